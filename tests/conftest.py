"""Shared fixtures: offline environment, the real data root, tiny random BERTs built locally."""

from __future__ import annotations

import compileall
import dataclasses
import functools
import json
import math
import os
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig
from transformers import BertConfig

from cl_bench.config import (
    ConfigError,
    catalog,
    inert_keys,
    typed_specs,
    validate,
)
from cl_bench.config.catalog import CONF_DIR
from cl_bench.config.params import acting_params
from cl_bench.eval.registry import STS_SUBSETS, STS_YEAR_FOLDERS
from cl_bench.utils.cache_dirs import data_dir_from_environment

if TYPE_CHECKING:
    from cl_bench.train.loop import Trainer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# ONNX exports, embeddings, back-translations of a test session go to a fresh folder, not ~/.cache
os.environ.setdefault("CL_BENCH_CACHE", tempfile.mkdtemp(prefix="cl_bench_cache_"))

REPO_ROOT = Path(__file__).resolve().parents[1]
# A relative CL_BENCH_DATA made absolute once, for the whole session: subprocesses run from temporary folders and
# tests reading the variable directly then see the folder the user meant, not one relative to where they run.
if (_data_dir := data_dir_from_environment()) is not None:
    os.environ["CL_BENCH_DATA"] = str(_data_dir)
# Many tests run `cl-bench` in a subprocess, each importing cl_bench; where PYTHONDONTWRITEBYTECODE is set (CI's
# machines) nothing writes cl_bench's .pyc files and every subprocess compiles the sources again (1.5 s for the
# training stack here): compiled once for the session instead.
compileall.compile_dir(REPO_ROOT / "cl_bench", quiet=1)
MISSING_DATA = (
    "real data not found: set CL_BENCH_DATA to a data root with sts/, transfer/, corpus/, nli/ "
    "(e.g. CL_BENCH_DATA=../shared/data), or fetch it with `cl-bench-data download`"
)
WORDS = (
    "the a an and of to in is was for on with as by at it he she they we you this that from his her their "
    "man woman dog cat plays playing runs running eats food music guitar piano street car house water "
    "child children ball field red blue green big small old new good bad happy sad fast slow people two three "
    "sits sitting walks walking table chair book reads reading sun sky tree park bike rides riding"
).split()


def data_root() -> Path:
    """The real data root from CL_BENCH_DATA, as an absolute path; fails (never skips) when it is missing.

    A relative value (the README's ``CL_BENCH_DATA=../shared/data``) is made absolute by cl-bench's own helper,
    so that a test linking ``data_root() / "sts"`` into a temporary data root makes a link that resolves."""
    root = data_dir_from_environment()
    if root is None or not (root / "sts").is_dir():
        pytest.fail(MISSING_DATA)
    return root


def minilm_path() -> Path:
    """The real pretrained all-MiniLM-L6-v2 (models/ beside the data root, or CL_BENCH_MINILM)."""
    path = Path(os.environ.get("CL_BENCH_MINILM", data_root().parent / "models" / "all-MiniLM-L6-v2"))
    if not (path / "config.json").is_file():
        pytest.fail(f"all-MiniLM-L6-v2 not found at {path}: set CL_BENCH_MINILM to its directory")
    return path


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for `cl-bench` subprocesses on tiny models: real data root, one torch thread
    (tiny matrices gain nothing from a second thread and lose a lot when cores are busy)."""
    env = dict(os.environ, CL_BENCH_DATA=str(data_dir), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def build_tiny_bert(out_dir: Path, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """Save a tiny random BertModel + WordPiece tokenizer to ``out_dir`` (no download)."""
    import torch
    from transformers import BertModel, BertTokenizerFast

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *[f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"],
             *"abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"-()"]
    vocab = list(dict.fromkeys(vocab))
    (out_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(out_dir / "vocab.txt"), do_lower_case=True)  # transformers 5 ignores vocab_file=
    tokenizer.save_pretrained(out_dir)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=hidden * 2, max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(out_dir)
    return out_dir


@pytest.fixture(autouse=True)
def _restore_data_root_variable() -> Iterator[None]:
    """Tests that compose a config point CL_BENCH_DATA at their own folder: restore it after each, so
    that a later test's :func:`data_root`/:func:`minilm_path` find the real data whatever ran before."""
    saved = os.environ.get("CL_BENCH_DATA")
    yield
    if saved is None:
        os.environ.pop("CL_BENCH_DATA", None)
    else:
        os.environ["CL_BENCH_DATA"] = saved


@pytest.fixture(autouse=True, scope="session")
def _schemas_registered() -> None:
    """Hydra's ConfigStore holds the schemas that conf/config.yaml and every built-in option's YAML extend
    (:func:`cl_bench.config.register_schemas`), as ``cl-bench`` registers them at start-up: a test that composes the
    config gets the same types and keys whether or not another test imported ``cl_bench.commands.cli`` first."""
    from cl_bench.config import register_schemas

    register_schemas()


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of a tiny random BERT saved in Hugging Face format."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data root (CL_BENCH_DATA)."""
    return data_root()


# ------------------------------------------------------------------------------------------------
# Helpers several test modules share (each module imports them from here, never from another test module)
# ------------------------------------------------------------------------------------------------
# --- used by config/test_fast_rejection.py, config/test_missing_files_early.py ---
_PROBE = """
import contextlib, io, json, sys
from cl_bench.commands import cli
answers = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["cl-bench", *argv]
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            cli.main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code
    answers.append([code, err.getvalue(), out.getvalue()])
heavy = sorted(m for m in ("torch", "transformers", "mlflow", "sklearn") if m in sys.modules)
print(json.dumps({"answers": answers, "heavy": heavy}))
"""


def job_first_error(argv: list[str]) -> str:
    """The job's own first rejection of ``argv`` (:func:`cl_bench.commands.job.run`'s checks: for ``mode=eval`` the recorded
    pooling first, then :func:`cl_bench.config.validate`), as cl-bench prints it."""
    from cl_bench.config import use_recorded_pooling, validate

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=argv)
    if cfg.mode == "eval":
        use_recorded_pooling(cfg, argv)
    with pytest.raises(ConfigError) as job:
        validate(cfg, argv)
    return f"cl-bench: error: {job.value}"


# --- used by config/test_ablations.py, config/test_seeds.py, methods/test_mlm_mode.py ---
def sweep_jobs(experiment: str, extra: list[str] | None = None) -> list[list[str]]:
    """The jobs Hydra's basic sweeper launches for ``cl-bench experiment=NAME [extra]`` (no job is run)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN", f"{experiment} must turn multirun on by itself"
    arguments = [f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()] + [f"experiment={experiment}"] + (extra or [])
    overrides = OverridesParser.create().parse_overrides(arguments)
    (batch,) = BasicSweeper.split_arguments(overrides, None)
    return batch


def job_config(job: list[str], data_dir: Path, tiny_bert: Path) -> DictConfig:
    """One job's composed config, validated offline: the tiny local BERT, and wiki1m's shipped head."""
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    offline = [f"model.name_or_path={tiny_bert}", f"data.train_file={data_dir}/corpus/wiki1m_for_simcse.head.txt"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*job, *offline])


# --- used by eval/test_eval_flow.py, eval/test_eval_max_similarity.py, eval/test_eval_registry.py, eval/test_eval_sts.py ---
# ------------------------------------------------------------------------------------------------
# A miniature SentEval STS layout and encoders with known outputs
# ------------------------------------------------------------------------------------------------
def sts_sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9))))


def write_sts_fixture(root: Path, pairs_per_part: int = 8, seed: int = 0) -> Path:
    """Write every STS file SentEval reads, with random word sentences and gold scores."""
    rng = np.random.default_rng(seed)
    for task, (year, folder) in STS_YEAR_FOLDERS.items():
        path = root / folder
        path.mkdir(parents=True, exist_ok=True)
        for subset in STS_SUBSETS[year]:
            inputs, golds = [], []
            for i in range(pairs_per_part):
                inputs.append(f"{sts_sentence(rng)}\t{sts_sentence(rng)}")
                # STS15/16 ship unscored lines: an empty gold line means "skip this pair"
                golds.append("" if task in ("sts15", "sts16") and i % 4 == 3 else f"{rng.uniform(0, 5):.3f}")
            (path / f"STS.input.{subset}.txt").write_text("\n".join(inputs) + "\n")
            (path / f"STS.gs.{subset}.txt").write_text("\n".join(golds) + "\n")
    # STS13's SMT gold ships without its input; SentEval (and cl-bench) ignore it
    (root / "sts/STS13-en-test/STS.gs.SMT.txt").write_text("1.0\n2.0\n")
    stsb = root / "sts/STSBenchmark"
    stsb.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        rows = []
        for i in range(pairs_per_part * 2):
            score = 4.5 if i % 3 == 0 else rng.uniform(0, 4)
            rows.append(
                f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score:.3f}\t{sts_sentence(rng)}\t{sts_sentence(rng)}"
            )
        (stsb / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")
    sick = root / "sts/SICK"
    sick.mkdir(parents=True, exist_ok=True)
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
        rows += [
            f"{i}\t{sts_sentence(rng)}\t{sts_sentence(rng)}\t{rng.uniform(1, 5):.1f}\tNEUTRAL"
            for i in range(pairs_per_part)
        ]
        # SICK_test_annotated.txt has CRLF line ends in the distributed data
        newline = "\r\n" if name == "SICK_test_annotated.txt" else "\n"
        (sick / name).write_bytes((newline.join(rows) + newline).encode())
    return root


class HashEncoder:
    """Deterministic pseudo-random embedding per sentence; counts encode calls."""

    def __init__(self, width: int = 16) -> None:
        self.width = width
        self.calls: list[list[str]] = []

    def encode(self, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
        self.calls.append(list(sentences))
        rows = [np.random.default_rng(zlib.crc32(s.encode())).normal(size=self.width) for s in sentences]
        return np.asarray(rows, dtype=np.float32).reshape(len(sentences), self.width)


# --- used by the tests that call a loss function directly (losses/, methods/, models/, train/, utils/) ---
def as_built(loss: Any, **changes: Any) -> functools.partial:
    """``loss`` as a run builds it: a partial of its spec's defaults (their one declaration,
    :mod:`cl_bench.losses.specs`; the function has none of its own), ``changes`` applied."""
    from cl_bench.specs import loss_spec_of

    spec = loss_spec_of(loss)
    assert spec is not None, f"{loss} has no loss spec"
    values = {f.name: f.default for f in dataclasses.fields(spec) if f.name != "name"}
    return functools.partial(loss, **{**values, **changes})


# --- used by losses/test_losses.py, losses/test_losses_edge.py ---
# ------------------------------------------------------------------------------------------------
# Naive building blocks: one scalar at a time
# ------------------------------------------------------------------------------------------------
def cos(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.dot(u, v) / (u.norm() * v.norm())


def lse(values: list[torch.Tensor]) -> torch.Tensor:
    """log(sum(exp(values))) written out, shifted by the maximum."""
    top = max(values, key=lambda t: t.item())
    return top + torch.log(sum(torch.exp(v - top) for v in values))


# ------------------------------------------------------------------------------------------------
# Naive references
# ------------------------------------------------------------------------------------------------
def naive_info_nce(a, p, h, y, tau=0.05, hard_negative_alpha=1.0):
    terms = []
    for i in range(len(a)):
        for j in range(len(p)):
            if y[j] != y[i]:
                continue
            positive = cos(a[i], p[j]) / tau
            negatives = [cos(a[i], p[m]) / tau for m in range(len(p)) if y[m] != y[i]]
            for k in range(len(h)):
                weight = hard_negative_alpha if k == i else 1.0
                if weight > 0:
                    negatives.append(cos(a[i], h[k]) / tau + math.log(weight))
            terms.append(-(positive - lse([positive, *negatives])))
    return sum(terms) / len(terms)


# --- used by methods/test_method_cert.py, methods/test_method_declutr.py, methods/test_method_objectives.py,
#     methods/test_method_quickthoughts.py ---
STS_KEYS = ("sts/sts12", "sts/sts13", "sts/sts14", "sts/sts15", "sts/sts16", "sts/stsb", "sts/sickr", "sts/sts_avg")


def run_cl_bench(args: list[str], data_dir: Path, tmp_path: Path) -> tuple[dict[str, float], list[dict]]:
    """Run the `cl-bench` console command in ``tmp_path``; check results, metrics and the MLflow run.

    Returns:
        ``(results.json, metrics.jsonl rows)``.
    """
    import mlflow  # MLflow loads only for the tests that use it

    exe = shutil.which("cl-bench")
    assert exe, "the cl-bench console script is not installed (pip install -e .)"
    proc = subprocess.run([exe, *args, "train.progress_bar=false", "hydra.run.dir=run"], cwd=tmp_path,
                          capture_output=True, text=True, env=cli_env(data_dir), timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    for key in STS_KEYS:
        assert key in results and math.isfinite(results[key]) and -100 <= results[key] <= 100, key
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any("train/loss" in m for m in metrics) and any("select/stsb_dev" in m for m in metrics)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("cl-bench").experiment_id])
    method = next(a.split("=", 1)[1] for a in args if a.startswith("method="))
    assert run.info.status == "FINISHED" and run.data.tags["method"] == method
    assert run.data.metrics["sts/sts_avg"] == pytest.approx(results["sts/sts_avg"])
    return results, metrics


# --- used by commands/test_cli_smoke.py, methods/test_method_is_bert.py, methods/test_method_sg_opt.py,
#     methods/test_method_simcse_sup.py ---
def cl_bench_process(args: list[str], cwd: Path, data_dir: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    exe = shutil.which("cl-bench")
    assert exe, "the cl-bench console script is not installed (pip install -e .)"
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, env=cli_env(data_dir), timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


# --- used by methods/test_method_objectives.py, methods/test_per_view_batch_norm.py, methods/test_sbert_official.py ---
SENTENCES = [
    "a man plays the guitar", "the dog runs in the park", "two children read a book",
    "a woman eats food", "the cat sits on the table", "people walk in the street",
]


def build_objective_method(tiny_bert: Path, data_dir: Path, overrides: list[str]):
    from cl_bench.train.loop import build_method  # the training stack loads only for the tests that use it

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    if not any(o.startswith("data=") for o in overrides):
        overrides = ["data=wiki1m_head", *overrides]
    overrides = [f"model.name_or_path={tiny_bert}", "pooler=avg", *overrides]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    validate(cfg, overrides)
    torch.manual_seed(0)
    return build_method(typed_specs(cfg), torch.device("cpu")), cfg


# --- used by eval/test_eval_transfer.py, models/test_decoder_eval.py ---
POSITIVE = ("good", "great", "fine", "happy", "nice")


NEGATIVE = ("bad", "awful", "poor", "sad", "dull")


TREC_CUES = ("abbrq", "descq", "entyq", "humq", "locq", "numq")


FILLER = ("the", "film", "story", "was", "a", "very", "and", "plot", "actor", "music", "this", "it")


def transfer_sentence(rng: np.random.Generator, cue: Sequence[str], other: Sequence[str] = FILLER) -> str:
    # 1 sentence in 8 carries the other class's cue: separable data would need unbounded weights
    cue = other if rng.random() < 0.125 else cue
    words = list(rng.choice(FILLER, size=int(rng.integers(2, 8)))) + [str(rng.choice(cue))]
    rng.shuffle(words)
    return " ".join(words)


def write_transfer_fixture(root: Path, per_class: int = 30, seed: int = 0) -> Path:
    """Every transfer file SentEval reads (plus STS-B/SICK dev for evaluate_dev), label-cued sentences."""
    rng = np.random.default_rng(seed)

    def lines(cue: Sequence[str], n: int = per_class) -> list[str]:
        other = NEGATIVE if cue is POSITIVE else POSITIVE
        return [transfer_sentence(rng, cue, other) for _ in range(n)]

    def write(relative: str, text_lines: list[str], encoding: str = "utf-8", prefix: bytes = b"") -> None:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(prefix + ("\n".join(text_lines) + "\n").encode(encoding))

    for pos, neg in (
        ("transfer/MR/rt-polarity.pos", "transfer/MR/rt-polarity.neg"),
        ("transfer/CR/custrev.pos", "transfer/CR/custrev.neg"),
        ("transfer/SUBJ/subj.objective", "transfer/SUBJ/subj.subjective"),
        ("transfer/MPQA/mpqa.pos", "transfer/MPQA/mpqa.neg"),
    ):
        write(pos, lines(POSITIVE), "latin-1")
        write(neg, lines(NEGATIVE), "latin-1")
    for split in ("train", "dev", "test"):
        rows = [f"{s} \t1" for s in lines(POSITIVE)] + [f"{s} \t0" for s in lines(NEGATIVE)]
        write(f"transfer/SST/binary/sentiment-{split}", rows)
    classes = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
    cues = [(cue,) for cue in TREC_CUES]
    for name, n in (("train_5500.label", 12), ("TREC_10.label", 4)):
        rows = [
            f"{c}:x {transfer_sentence(rng, cue)}" for c, cue in zip(classes, cues, strict=True) for _ in range(n)
        ]
        write(f"transfer/TREC/{name}", rows, "latin-1")
    for split, n in (("train", 40), ("test", 20)):
        rows = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(n):
            a = transfer_sentence(rng, POSITIVE)
            b = a if i % 2 else transfer_sentence(rng, NEGATIVE)  # paraphrase = identical sentence
            rows.append(f"{i % 2}\t{i}\t{i + 1000}\t{a}\t{b}")
        write(f"transfer/MRPC/msr_paraphrase_{split}.txt", rows)
    write(
        "sts/STSBenchmark/sts-dev.csv",
        [
            f"g\tf\ty\t{i}\t{i % 5}.0\t{transfer_sentence(rng, POSITIVE)}\t{transfer_sentence(rng, NEGATIVE)}"
            for i in range(10)
        ],
    )
    sick = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    sick += [
        f"{i}\t{transfer_sentence(rng, POSITIVE)}\t{transfer_sentence(rng, NEGATIVE)}\t{1 + i % 4}.5\tNEUTRAL"
        for i in range(10)
    ]
    write("sts/SICK/SICK_trial.txt", sick)
    return root


# --- used by train/test_early_stopping.py, train/test_selection.py ---
def early_stopping_config(tiny_bert: Path, data_dir: Path, *extra: str) -> DictConfig:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    overrides = [
        f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=40", "batch_size=4", "pooler=avg",
        "train.max_steps=10", "train.eval_steps=1", "train.save_best=false", "train.device=cpu",
        "train.progress_bar=false", "train.checkpoint_steps=0", *extra,
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def scripted_dev(scores: list[float]):  # noqa: ANN202
    """A dev evaluation that returns the given STS-B dev scores in turn (then keeps the last)."""
    remaining: Iterator[float] = iter(scores)
    last = [0.0]

    def dev_eval(encoder: object) -> dict[str, float]:
        last[0] = next(remaining, last[0])
        return {"stsb_dev": last[0]}

    return dev_eval


# --- used by train/test_after_step_hooks.py, train/test_train_step.py ---
def hooks_trainer(method: str, tiny_bert: Path, data_dir: Path, tmp_path: Path, *extra: str) -> Trainer:
    from cl_bench.train.loop import Trainer  # the training stack loads only for the tests that use it

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    overrides = [
        f"method={method}", f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=16", "batch_size=4",
        "pooler=avg", "train.max_steps=2", "train.eval_steps=0", "train.save_best=false", "train.device=cpu",
        "train.progress_bar=false", "train.checkpoint_steps=0", *extra,
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    validate(cfg)
    return Trainer(typed_specs(cfg), tmp_path, lambda metrics, step: None, lambda encoder: {"stsb_dev": 0.0})


# --- used by config/test_options_act.py, models/test_decoders.py, methods/test_method_prepare.py ---
CORPUS = [
    "a man plays the guitar in the park", "the dog runs in the street", "two children read a book",
    "a woman eats food at the table", "the cat sits on the chair", "people walk in the park",
]


def params_of(cfg: DictConfig) -> dict[str, Any]:
    """A composed config's MLflow params, its inert keys found from it (the job passes its preflight's)."""
    return acting_params(cfg, inert_keys(cfg))


def compose_config(data_dir: Path, overrides: list[str]) -> Any:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*overrides, "paths.output_dir=out"])


def tiny_run(method: str) -> tuple[str, list[str]]:
    """``(data, overrides)`` of a tiny run of ``method=NAME``, from its spec's ``tiny_run`` (the registry: a method's
    case is its folder's): the ``data=`` preset it reads (``"corpus"``: a file of plain sentences the test writes) and
    its other overrides."""
    spec = catalog.method_spec(method)
    assert spec is not None, f"method={method} has no spec"
    data = next((o.split("=", 1)[1] for o in spec.tiny_run if o.startswith("data=")), "corpus")
    return data, [o for o in spec.tiny_run if not o.startswith("data=")]


def method_config(method: str, data_dir: Path, tiny_bert: Path, corpus: Path, data: str | None = None) -> Any:
    """``method=NAME``'s tiny run (:func:`tiny_run`) on the tiny model, composed; ``data``: another data set."""
    default_data, keys = tiny_run(method)
    data = data or default_data
    overrides = [f"method={method}", f"model.name_or_path={tiny_bert}", "model.max_length=16", "batch_size=4",
                 "logger=none", "data.limit=40", *keys]
    overrides.append(f"data.train_file={corpus}" if data == "corpus" else f"data={data}")
    return compose_config(data_dir, overrides)
