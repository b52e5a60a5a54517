"""The recorded name of every figure: one name per quantity, the same in the console, ``results.json``,
``metrics.jsonl``, MLflow and the reports (torch-free).

A name is ``<section>/<key>[.sample<N>]``. MLflow groups a run's charts into sections by the prefix before
``/``; ``key`` is the flat key the evaluation computes (the one a user types: ``train.select_metric=stsb_dev``);
``.sample<N>`` marks a figure computed on a fixed sample of N pairs per split (``eval.sample_pairs=N``, e.g.
``eval=iterate``): such a figure never carries the full protocol's name.

The names (docs/evaluation.md has the table with each one's split, protocol and sample):

* The final evaluation, full protocol:

  - ``sts/<key>``: ``sts12`` … ``sts16`` and their ``_mean``/``_wmean``/``_<subset>``, ``stsb``, ``sickr`` (test),
    ``stsb_dev``, ``sickr_dev`` (dev), ``sts_avg``, ``sts_dev_avg``, the similarity variants
    (``stsb_cosine``, ``stsb_max_similarity``, …);
  - ``transfer/<key>``: ``mr``, ``cr``, ``subj``, ``mpqa``, ``sst2``, ``trec``, ``mrpc``, ``mrpc_f1``,
    ``transfer_avg``, SentEval's dev accuracies ``<task>_dev`` and ``transfer_dev_avg``;
  - ``geometry/<key>``: ``align``, ``uniform``, ``anisotropy_mean_cos``, ``anisotropy_sv_top1``,
    ``anisotropy_sv_top10``, ``anisotropy_effective_rank``;
  - ``mteb/mteb_<Task>``; ``eval/eval_onnx``, ``eval/eval_bf16``, ``eval/eval_tf32``, ``eval/eval_sample_pairs``;
  - a user's registered task: its registry group as the section (``<group>/<key>``).

* On a sample (``eval.sample_pairs=N``): the STS figures and the geometry (the families the sample acts on,
  :func:`is_sampled`) as ``<section>/<key>.sample<N>``, e.g. ``sts/stsb.sample300``, ``geometry/align.sample300``.
* The in-training dev evaluation (the model-selection series, one point per evaluation step):
  ``select/<key>`` (``select/stsb_dev``, ``select/sickr_dev``, ``select/sts_dev_avg``, ``select/align_dev``,
  ``select/uniform_dev``, ``select/anisotropy_*_dev``, ``select/<task>_dev``, ``select/transfer_dev_avg``,
  ``select/stsb_dev_cosine`` …), with ``.sample<N>`` on the sampled families when ``eval.sample_pairs`` is set;
  the checkpoint selection: ``select/best_<select_metric>[.sample<N>]`` and ``select/best_step``.
* Training: ``train/loss``, ``train/<term>`` (each loss term), ``train/grad_norm``, ``train/lr``,
  ``train/epoch``, ``train/skipped_steps``, ``train/steps`` (the steps trained), ``train/stopped_early``.
* Run state: ``run/interrupted_at_step``, ``run/evaluation_interrupted``.

Runs logged before these names (flat keys: ``stsb``, ``stsb_dev``, ``best_stsb_dev``, ``train_loss``, ``lr``)
are read through :func:`parse_name` and :func:`upgrade_record`: in an old ``results.json`` a flat ``stsb_dev``
was the final evaluation's, and ``eval_sample_pairs`` beside it said the STS and geometry figures were on a
sample; in an old ``metrics.jsonl`` a record with ``epoch`` was a dev evaluation (the ``select/`` series).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cl_bench.eval.registry import metric_task

#: the final evaluation's sections of the built-in tasks and figures, then the other sections
FINAL_SECTIONS: tuple[str, ...] = ("sts", "transfer", "geometry", "mteb", "eval")
SELECT, TRAIN, RUN = "select", "train", "run"
#: the sections whose figures ``eval.sample_pairs`` computes on a sample (the pairs of STS-style tasks, the geometry)
SAMPLED_SECTIONS: frozenset[str] = frozenset({"sts", "geometry"})
#: the section of a legacy flat name this module cannot place (a user's task not registered in the reading process)
OTHER = "other"

#: the flat keys of the training and run state: legacy name -> (section, key)
_LEGACY_STATE: dict[str, tuple[str, str]] = {
    "lr": (TRAIN, "lr"),
    "epoch": (TRAIN, "epoch"),
    "skipped_steps": (TRAIN, "skipped_steps"),
    "steps": (TRAIN, "steps"),
    "stopped_early": (TRAIN, "stopped_early"),
    "best_step": (SELECT, "best_step"),
    "interrupted_at_step": (RUN, "interrupted_at_step"),
    "evaluation_interrupted": (RUN, "evaluation_interrupted"),
}
_GEOMETRY_PREFIXES = ("align", "uniform", "anisotropy_")
_SAMPLE = re.compile(r"^(?P<key>.+)\.sample(?P<n>[0-9]+)$")
#: the key that says, in a results record, on how many pairs per split the sampled figures were computed
SAMPLE_KEY = "eval_sample_pairs"


@dataclass(frozen=True)
class MetricName:
    """A parsed metric name.

    Attributes:
        section: ``sts``, ``transfer``, ``geometry``, ``mteb``, ``eval``, ``select``, ``train``, ``run``, a user
            task's group, or ``other`` (a legacy flat name of an unknown family).
        key: the flat key (``stsb``, ``best_stsb_dev``, ``loss``).
        sample_pairs: N of ``.sample<N>``; None for the full protocol (and for a legacy name, whose sample is
            the record's ``eval_sample_pairs``, :func:`upgrade_record`).
        legacy: the name was a flat key (logged before sections).
    """

    section: str
    key: str
    sample_pairs: int | None = None
    legacy: bool = False

    def __str__(self) -> str:
        return f"{self.section}/{self.key}" + (f".sample{self.sample_pairs}" if self.sample_pairs else "")

    @property
    def split(self) -> str:
        """``dev``, ``test`` or ``—`` (training, run state, encoding flags; geometry reads STS-B's
        ``eval.align_uniform_split``, ``all`` by default)."""
        if self.section in (TRAIN, RUN, "eval"):
            return "—"
        if self.section == SELECT or self.key.endswith("_dev") or "_dev_" in self.key:
            return "dev"
        if self.section == "geometry":
            return "eval.align_uniform_split"
        return "test"

    @property
    def protocol(self) -> str:
        """``full`` or ``sample of N pairs`` per split."""
        return f"sample of {self.sample_pairs} pairs" if self.sample_pairs else "full"


def section_of(key: str) -> str:
    """The final evaluation's section of a flat key (a task's registry group; ``other`` if unknown)."""
    if key.startswith(_GEOMETRY_PREFIXES):
        return "geometry"
    if key.startswith("mteb_"):
        return "mteb"
    if key.startswith("eval_"):
        return "eval"

    task = metric_task(key)
    return task.group if task is not None else OTHER


def is_sampled(key: str) -> bool:
    """Whether ``eval.sample_pairs`` computes this flat key on its sample: STS-style figures and the geometry
    (transfer accuracies, MTEB and the encoding flags are not sampled)."""
    if key.startswith(_GEOMETRY_PREFIXES):
        return True
    if key.startswith(("mteb_", "eval_")):
        return False

    task = metric_task(key)
    return task is not None and task.kind == "sts"


def _suffix(key: str, sample_pairs: int | None) -> str:
    return f".sample{int(sample_pairs)}" if sample_pairs and is_sampled(key) else ""


def final_name(key: str, sample_pairs: int | None = None) -> str:
    """The final evaluation's name of a flat key: ``sts/stsb``; ``sts/stsb.sample300`` on a sample of 300."""
    return f"{section_of(key)}/{key}{_suffix(key, sample_pairs)}"


def select_name(key: str, sample_pairs: int | None = None) -> str:
    """The in-training dev evaluation's name: ``select/stsb_dev``, ``select/stsb_dev.sample300``,
    ``select/best_stsb_dev`` (the checkpoint-selection figure: the key's ``best_`` is read through),
    ``select/best_step``."""
    figure = key.removeprefix("best_")
    return f"{SELECT}/{key}{'' if key == 'best_step' else _suffix(figure, sample_pairs)}"


def train_name(key: str) -> str:
    """``train/<key>``: a loss term (``loss``, ``mlm``), ``grad_norm``, ``lr``, ``epoch``, ``skipped_steps``."""
    return f"{TRAIN}/{key}"


def run_name(key: str) -> str:
    """``run/<key>``: ``interrupted_at_step``, ``evaluation_interrupted``."""
    return f"{RUN}/{key}"


def final_names(results: Mapping[str, Any], sample_pairs: int | None = None) -> dict[str, Any]:
    """A final evaluation's flat ``{key: value}`` under its recorded names (text entries, e.g. ``pooler``, and
    names already recorded ones, ``section/key``, as they are)."""
    return {k if isinstance(v, str) or "/" in k else final_name(k, sample_pairs): v for k, v in results.items()}


def select_names(scores: Mapping[str, float], sample_pairs: int | None = None) -> dict[str, float]:
    """A dev evaluation's flat ``{key: value}`` under its ``select/`` names."""
    return {select_name(k, sample_pairs): v for k, v in scores.items()}


def parse_name(name: str) -> MetricName:
    """Section, key and sample of a recorded name; a legacy flat name is placed by its family
    (``stsb`` -> ``sts``, ``best_stsb_dev`` -> ``select``, ``train_loss`` -> ``train/loss``, ``lr`` -> ``train``)."""
    section, slash, rest = name.partition("/")
    if slash:
        match = _SAMPLE.match(rest)
        return MetricName(section, match["key"], int(match["n"])) if match else MetricName(section, rest)
    if name in _LEGACY_STATE:
        return MetricName(*_LEGACY_STATE[name], legacy=True)
    if name.startswith("best_"):
        return MetricName(SELECT, name, legacy=True)
    if name.startswith("train_"):
        return MetricName(TRAIN, name.removeprefix("train_"), legacy=True)
    return MetricName(section_of(name), name, legacy=True)


def upgrade_record(record: Mapping[str, Any], series: bool = False) -> dict[str, Any]:
    """One record (``results.json``, a ``metrics.jsonl`` line, an MLflow run's metrics) under the current names.

    Current names pass unchanged; legacy flat ones are renamed by :func:`parse_name`, the final figures of a
    sampled family given the record's ``eval_sample_pairs`` as their sample (the old runs logged the sampled
    figures under the full names). ``series``: a ``metrics.jsonl`` line, where a legacy record with ``epoch``
    is a dev evaluation (its figures go to ``select/``, on the full dev set: the old dev evaluation sampled
    nothing). ``step`` and ``time`` and text entries pass unchanged.
    """
    sample = record.get(SAMPLE_KEY)
    sample = int(sample) if isinstance(sample, int | float) and sample == sample and sample > 0 else None
    dev_record = series and "epoch" in record
    out: dict[str, Any] = {}
    for key, value in record.items():
        if key in ("step", "time") or isinstance(value, str) or "/" in key:
            out[key] = value
            continue
        parsed = parse_name(key)
        if parsed.section == SELECT or parsed.section in (TRAIN, RUN):
            out[str(parsed)] = value
        elif dev_record:
            out[select_name(key)] = value
        else:
            out[final_name(key, sample)] = value
    return out


def sample_of(record: Mapping[str, Any], section: str = "final") -> int | None:
    """The sample (N pairs per split) a record's final (``section="final"``) or ``select`` figures were computed
    on, from their names or, in a legacy record, its ``eval_sample_pairs``; None: the full protocol."""
    for name in record:
        if "/" not in name:
            continue
        parsed = parse_name(name)
        if parsed.sample_pairs and ((parsed.section == SELECT) == (section == SELECT)):
            return parsed.sample_pairs
    if section != SELECT:
        legacy = record.get(SAMPLE_KEY, record.get(f"eval/{SAMPLE_KEY}"))
        if isinstance(legacy, int | float) and legacy == legacy and legacy > 0:
            return int(legacy)
    return None


def flat_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """``{flat key: value}`` of a record in either naming: the final figures by their key whatever their sample,
    the selection figures as ``best_<m>``/``best_step``, training and run state by their legacy flat keys
    (``train_loss``, ``lr``, ``steps``, ``interrupted_at_step``). The ``select/`` series' last points (the
    in-training dev figures) are left out: they are not the final evaluation's. What a reader that compares
    flat keys (a paper's table, the model card) reads; the sample is :func:`sample_of`'s."""
    out: dict[str, Any] = {}
    for name, value in upgrade_record(record).items():
        if "/" not in name:
            out[name] = value
            continue
        parsed = parse_name(name)
        if parsed.section == SELECT:
            if parsed.key.startswith("best_"):
                out[parsed.key] = value
        elif parsed.section == TRAIN:
            out[parsed.key if parsed.key in _LEGACY_STATE else f"train_{parsed.key}"] = value
        else:
            out[parsed.key] = value
    return out


#: the headline figures (the console summary line, MLflow's runs-table columns and sort), full protocol
HEADLINE_METRICS: tuple[str, ...] = ("sts/sts_avg", "sts/stsb", "transfer/transfer_avg", "geometry/align",
                                     "geometry/uniform", "select/best_stsb_dev")


def headline_names(sample_pairs: int | None = None) -> tuple[str, ...]:
    """:data:`HEADLINE_METRICS` as a run with ``eval.sample_pairs=sample_pairs`` records them."""
    if not sample_pairs:
        return HEADLINE_METRICS
    named = (parse_name(name) for name in HEADLINE_METRICS)
    return tuple(select_name(m.key, sample_pairs) if m.section == SELECT else final_name(m.key, sample_pairs)
                 for m in named)
