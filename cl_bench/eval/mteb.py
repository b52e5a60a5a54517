"""MTEB tasks on a cl-bench encoder (optional extra: ``pip install 'cl-bench[mteb]'``).

``eval.tasks`` names an MTEB task with the ``mteb:`` prefix followed by MTEB's own task name,
e.g. ``eval.tasks=[sts,mteb:STS12,mteb:SICK-R]``; the prefix keeps MTEB's names apart from
cl-bench's own tasks (``sts12`` is SentEval's protocol, ``mteb:STS12`` is MTEB's). The encoder and
pooler are the ones being evaluated: anything with ``encode(sentences, batch_size) -> (N, H)``.

Data. The STS tasks whose data the root holds in SentEval's layout are built from it, with no
network: ``STS12`` … ``STS16`` (SentEval's sub-datasets, unscored pairs dropped), ``STSBenchmark``
(test split) and ``SICK-R`` (all 9,927 SICK pairs, as MTEB's ``mteb/sickr-sts``). Their pair counts
are checked against MTEB's task metadata. These copies are SentEval's lower-cased, Moses-tokenized
text, while MTEB's hub copies keep the original text, so scores are close to, not identical with,
MTEB-leaderboard figures; every result records its data source. Any other task is loaded by mteb
itself (Hugging Face cache, or the hub when online); when neither can provide it, the error names
the task and what to do.

Encoding. mteb hands its sentences to the encoder's own ``encode``, inside the
:func:`cl_bench.models.inference.encoding` context of ``eval.backend``, ``eval.precision`` and
``eval.cache``: a :class:`~cl_bench.models.encoder.SentenceEncoder` encodes them exactly as it does
cl-bench's own tasks (ONNX Runtime or torch, fp32 or bf16, embeddings cached), and the results carry
the same ``eval_onnx``/``eval_bf16`` flags.

Results: ``mteb_<Task>`` = the task's main score (cosine Spearman for STS) × 100, like cl-bench's
own STS figures; the full MTEB scores go to ``<out_dir>/mteb/<Task>.json``.

This module imports neither ``cl_bench.train`` nor ``cl_bench.methods``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from cl_bench.data.text import DataFileError
from cl_bench.eval.registry import MTEB_PREFIX, load_task
from cl_bench.eval.suite import encoding_flags
from cl_bench.models.inference import EncodingSettings, encoding

log = logging.getLogger(__name__)

#: MTEB STS task -> cl-bench STS task whose SentEval files hold the same pairs.
LOCAL_STS_TASKS: dict[str, str] = {
    "STS12": "sts12",
    "STS13": "sts13",
    "STS14": "sts14",
    "STS15": "sts15",
    "STS16": "sts16",
    "STSBenchmark": "stsb",
    "SICK-R": "sickr",
}
LOCAL_SOURCE = "local SentEval copy in the data root (lower-cased, Moses-tokenized text)"
INSTALL_HINT = "MTEB tasks need the optional extra: pip install 'cl-bench[mteb]'"


class Encoder(Protocol):
    """What is evaluated: text in, one float vector per sentence out."""

    def encode(self, sentences: Sequence[str], batch_size: int = ...) -> np.ndarray: ...


class MTEBUnavailableError(RuntimeError):
    """mteb is not installed, or a task's data cannot be had; the message says what to do."""


def _strip(name: str) -> str:
    return str(name).removeprefix(MTEB_PREFIX)


def _mteb() -> Any:
    try:
        import mteb
    except ImportError as err:
        raise MTEBUnavailableError(INSTALL_HINT) from err
    return mteb


def get_tasks(task_names: Iterable[str]) -> list[Any]:
    """MTEB task objects for names with or without the ``mteb:`` prefix.

    Raises:
        MTEBUnavailableError: mteb is not installed.
        ValueError: an unknown task name (one line, with mteb's suggestion).
    """
    mteb = _mteb()
    tasks = []
    for name in task_names:
        bare = _strip(name)
        try:
            tasks.append(mteb.get_task(bare))
        except KeyError as err:
            hint = str(err).strip("\"'").replace("KeyError: ", "")
            raise ValueError(f"eval.tasks: unknown MTEB task '{MTEB_PREFIX}{bare}' ({hint})") from None
    return tasks


def local_sts_pairs(data_dir: str | Path, task_name: str) -> tuple[list[str], list[str], list[float]]:
    """The test pairs of an MTEB STS task, read from the data root's SentEval files.

    Args:
        data_dir: the data root.
        task_name: a key of :data:`LOCAL_STS_TASKS`.

    Returns:
        ``(sentence1, sentence2, score)`` lists.

    Raises:
        DataFileError: a file is missing or malformed (the message names it).
    """
    task = LOCAL_STS_TASKS[_strip(task_name)]
    # STS-B: its test split; STS12–16: every sub-dataset; MTEB's SICK-R is the whole of SICK
    parts = list(load_task(data_dir, task, ("test",) if task == "stsb" else None).values())
    sent1 = [s for part in parts for s in part.sent1]
    sent2 = [s for part in parts for s in part.sent2]
    scores = [float(g) for part in parts for g in part.gold]
    return sent1, sent2, scores


def _expected_size(task: Any, split: str) -> int | None:
    stats = getattr(task.metadata, "descriptive_stats", None) or {}
    entry = stats.get(split) if isinstance(stats, dict) else None
    return entry.get("num_samples") if isinstance(entry, dict) else None


def _load_local(task: Any, data_dir: str | Path) -> None:
    from datasets import Dataset, DatasetDict

    name = task.metadata.name
    sent1, sent2, scores = local_sts_pairs(data_dir, name)
    (split,) = task.metadata.eval_splits
    expected = _expected_size(task, split)
    if expected is not None and expected != len(scores):
        raise MTEBUnavailableError(
            f"{MTEB_PREFIX}{name}: the data root's copy has {len(scores)} pairs but MTEB's {split} split has "
            f"{expected}; check it with `cl-bench-data verify --data-dir {data_dir}`"
        )
    task.dataset = DatasetDict({split: Dataset.from_dict({"sentence1": sent1, "sentence2": sent2, "score": scores})})
    task.data_loaded = True


def prepare_tasks(task_names: Iterable[str], data_dir: str | Path, prefer_local: bool = True) -> list[tuple[Any, str]]:
    """Load every task's data before any encoding, so a missing task fails the run at once.

    Args:
        task_names: MTEB task names (``mteb:`` prefix optional).
        data_dir: the data root holding SentEval's STS files.
        prefer_local: build the STS tasks of :data:`LOCAL_STS_TASKS` from the data root (no
            network); False loads them through mteb like any other task.

    Returns:
        ``(task, data source)`` pairs.

    Raises:
        MTEBUnavailableError: mteb missing, or a task's data is neither local nor obtainable.
        ValueError: an unknown task name.
    """
    prepared = []
    for task in get_tasks(task_names):
        name = task.metadata.name
        local_problem = None
        if prefer_local and name in LOCAL_STS_TASKS:
            try:
                _load_local(task, data_dir)
                prepared.append((task, LOCAL_SOURCE))
                log.info("%s%s: using the %s", MTEB_PREFIX, name, LOCAL_SOURCE)
                continue
            except DataFileError as err:
                local_problem = f"no local copy ({err}; get it with `cl-bench-data download --only senteval`)"
        try:
            task.load_data()
        except Exception as err:  # datasets raises ConnectionError, FileNotFoundError, ... offline
            path = (task.metadata.dataset or {}).get("path", "?")
            local = local_problem or (
                f"no local copy (the data root provides only {', '.join(LOCAL_STS_TASKS)})"
                if name not in LOCAL_STS_TASKS else "local copy not used (prefer_local=False)"
            )
            raise MTEBUnavailableError(
                f"{MTEB_PREFIX}{name}: data not available: {local}, and mteb could not load '{path}' "
                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); run once with network "
                "access (HF_HUB_OFFLINE unset) to cache it, or drop the task from eval.tasks"
            ) from err
        prepared.append((task, f"mteb ({(task.metadata.dataset or {}).get('path', '?')})"))
    return prepared


def check_mteb_tasks(task_names: Iterable[str]) -> None:
    """Pre-flight for ``eval.tasks``: mteb installed and every name known (no data is read).

    Raises:
        ValueError: one line naming the task or the missing extra.
    """
    try:
        get_tasks(task_names)
    except MTEBUnavailableError as err:
        raise ValueError(f"eval.tasks: {err}") from err


def _adapter(encoder: Encoder, batch_size: int) -> Any:
    """Wrap a cl-bench encoder in mteb's encoder interface (cosine similarity)."""
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    class ClBenchEncoder(AbsEncoder):
        def __init__(self) -> None:
            self.model = encoder
            self.mteb_model_meta = ModelMeta.create_empty(
                overwrites={"name": "cl-bench/encoder", "revision": "local", "similarity_fn_name": ScoringFunction.COSINE}
            )

        def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
                   prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
            texts = [text for batch in inputs for text in batch["text"]]
            return np.asarray(encoder.encode(texts, batch_size), dtype=np.float32)

    return ClBenchEncoder()


def run_mteb(
    encoder: Encoder,
    task_names: Sequence[str],
    out_dir: str | Path,
    data_dir: str | Path,
    batch_size: int = 128,
    prefer_local: bool = True,
    settings: EncodingSettings | None = None,
) -> dict[str, float]:
    """Run MTEB tasks on an encoder.

    Args:
        encoder: anything with ``encode(sentences, batch_size) -> np.ndarray`` (N, H).
        task_names: MTEB task names, with or without the ``mteb:`` prefix.
        out_dir: run directory; full scores go to ``<out_dir>/mteb/<Task>.json``.
        data_dir: the data root (local copies of the STS tasks).
        batch_size: encoding batch size.
        prefer_local: see :func:`prepare_tasks`.
        settings: backend, precision and cache of the encoding
            (:func:`cl_bench.models.inference.encoding_settings`; None: torch, fp32, no cache).

    Returns:
        ``{"mteb_<Task>": main score × 100}``, plus ``eval_onnx``/``eval_bf16`` where they computed it.

    Raises:
        MTEBUnavailableError: mteb is not installed or a task's data is not available.
        ValueError: an unknown task name.
    """
    mteb = _mteb()
    prepared = prepare_tasks(task_names, data_dir, prefer_local)
    settings = settings if settings is not None else EncodingSettings()
    with encoding(settings):
        result = mteb.evaluate(
            _adapter(encoder, batch_size), [task for task, _ in prepared], cache=None,
            encode_kwargs={"batch_size": batch_size}, show_progress_bar=False,
        )
    sources = {task.metadata.name: source for task, source in prepared}
    folder = Path(out_dir) / "mteb"
    folder.mkdir(parents=True, exist_ok=True)
    metrics: dict[str, float] = encoding_flags(settings)
    for task_result in result.task_results:
        name = task_result.task_name
        metrics[f"mteb_{name}"] = float(task_result.get_score()) * 100
        record = {"task": name, "data_source": sources.get(name), "main_score": task_result.get_score(),
                  "scores": task_result.scores}
        (folder / f"{name}.json").write_text(json.dumps(record, indent=1, default=str))
    return metrics
