"""The ``eval`` config node, declared once: :class:`EvalOptions` (every option of how
:func:`cl_bench.eval.evaluate` scores an encoder) and the Hydra schema of the node built from it,
:data:`EvalConfig` (``tasks``, the options, and ``pooler``, which acts on the encoder).

Torch-free and light (dataclasses and :mod:`cl_bench.eval.flow_options`; not even omegaconf, which the GPU image
lacks, though ``benchmarks/`` import the evaluation there): the config schema
(:mod:`cl_bench.config`) and the checks that run before torch is imported read it. The value rules
that need no file of the data root are :meth:`EvalOptions.check`'s; the encoding options' hardware
rules (bf16, TF32, ONNX Runtime) and the data files are checked by
:func:`cl_bench.eval.tasks.check_eval_config`, which calls it.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from annotated_types import Ge

from cl_bench.eval.flow_options import FlowOptions, check_postprocess
from cl_bench.eval.registry import split_tasks, uses_transfer
from cl_bench.specs import Checked, Must, check_fields

#: The two SentEval classifier configurations (SimCSE ``--mode test`` / ``fasttest``): number of folds.
TRANSFER_CONFIGS: dict[str, int] = {"full": 10, "fast": 5}
#: ``eval.transfer_classifier``: SentEval's PyTorch classifier, or the scikit-learn approximation.
TRANSFER_CLASSIFIERS: tuple[str, ...] = ("senteval", "sklearn")
#: Which STS-B splits alignment/uniformity/anisotropy are computed on.
GEOMETRY_SPLITS: dict[str, tuple[str, ...]] = {
    "all": ("train", "dev", "test"),
    "train": ("train",),
    "dev": ("dev",),
    "test": ("test",),
}
#: ``eval.*`` keys that decide how the evaluated encoder is built (:func:`cl_bench.commands.job.with_eval_pooler`), not
#: how :func:`cl_bench.eval.evaluate` scores it: not an :class:`EvalOptions` field
ENCODER_EVAL_KEYS: tuple[str, ...] = ("pooler",)
#: the ``eval`` node's keys that are not :class:`EvalOptions` fields: the tasks (an argument of their own, split
#: into cl-bench's tasks and ``mteb:`` ones by the caller) and the encoder's keys
NODE_ONLY_KEYS: tuple[str, ...] = ("tasks", *ENCODER_EVAL_KEYS)


class EvalConfigError(ValueError):
    """An invalid ``eval.*`` value or a missing data file; the one-line message names the key or path."""


def _flow_options(value: FlowOptions | Mapping[str, Any] | None) -> FlowOptions:
    """``eval.flow`` as :class:`FlowOptions`; an unknown key is an error here, the values are :meth:`EvalOptions.check`'s."""
    if isinstance(value, FlowOptions):
        return value
    try:
        return FlowOptions.from_values(value)
    except ValueError as err:
        raise EvalConfigError(str(err)) from None


def _choice(valid: Iterable[str]) -> Must:
    """A text option whose value is one of ``valid``."""
    names = tuple(valid)
    return Must(lambda v: v in names, f"be one of {', '.join(names)}")


# named here: a field's annotation is evaluated apart from this module's names (see cl_bench/run_specs.py)
_GEOMETRY_SPLIT = _choice(GEOMETRY_SPLITS)
_TRANSFER_CONFIG = _choice(TRANSFER_CONFIGS)
_TRANSFER_CLASSIFIER = _choice(TRANSFER_CLASSIFIERS)


def _check_postprocess(options: Any) -> None:
    """The rule across ``postprocess``, ``whitening`` and ``flow`` (of :class:`EvalOptions` or the ``eval`` node)."""
    check_postprocess(options.postprocess, options.whitening, options.flow)


@dataclass(frozen=True)
class EvalOptions:
    """How :func:`cl_bench.eval.evaluate` scores an encoder: the ``eval`` config node's options but ``tasks`` and
    ``pooler`` (:data:`NODE_ONLY_KEYS`). Build it with :meth:`from_config`; :meth:`check` validates the values. Each
    field's doc is its comment, its rule its ``Annotated`` type (:func:`cl_bench.specs.check_fields`)."""

    batch_size: Annotated[int, Ge(1)] = 128  # encoding batch size (SentEval: 128)
    align_uniform: bool = True  # Wang & Isola alignment (gold > 4 pairs) / uniformity on STS-B, as SimCSE
    #: STS-B split(s) for align/uniform/anisotropy: all (SimCSE: "whole STS-B") | train | dev | test
    align_uniform_split: Annotated[str, _GEOMETRY_SPLIT] = "all"
    anisotropy: bool = True  # singular-value spectrum + mean cosine of random pairs; anisotropy.png in the run dir
    #: SentEval classifier config: full (its "test": Adam, 10 folds, paper tables) | fast ("fasttest": RMSprop, 5 folds)
    transfer_config: Annotated[str, _TRANSFER_CONFIG] = "full"
    #: senteval (SentEval's PyTorch classifier) | sklearn (lbfgs approximation)
    transfer_classifier: Annotated[str, _TRANSFER_CLASSIFIER] = "senteval"
    seed: Annotated[int, Ge(0)] = 1111  # SentEval's seed: its classifiers and k-fold shuffles (default 1111)
    #: BERT-whitening's kept dimensions k (e.g. 256; null = all); eval.postprocess=whitening only
    whitening: Annotated[int, Ge(1)] | None = None
    #: encoder forward pass: auto (the faster of torch and ONNX Runtime fp32 on this CPU, measured once; torch on
    #: GPU/bf16) | torch | onnx
    backend: str = "auto"
    #: auto (bf16 on a CUDA GPU of compute >= 8.0, and on a bf16 CPU when sample_pairs is set; fp32 elsewhere) | fp32 |
    #: bf16 (CPU with avx512_bf16/amx_bf16, GPU compute >= 8.0) | tf32 (GPU compute >= 8.0)
    precision: str = "auto"
    cache: bool = True  # reuse embeddings of the same weights, pooler, length, precision, backend and sentences
    cache_dir: str | None = None  # embedding cache + ONNX exports (null: $CL_BENCH_CACHE, else ~/.cache/cl-bench)
    cache_size_gb: float = 20.0  # the cache folder is pruned to this size, least recently used first
    #: none | whitening (BERT-whitening) | flow (BERT-flow), fitted per task on its sentences
    postprocess: str = "none"
    #: BERT-flow's options (eval.postprocess=flow only); defaults = the official run (cl_bench/eval/flow.py)
    flow: FlowOptions = field(default_factory=FlowOptions)
    truncate_dim: Annotated[int, Ge(1)] | None = None  # score the first K embedding dimensions only (Matryoshka; null = all)
    #: quick path for iterating (eval=iterate): STS on a fixed sample of K pairs per split; null = every pair
    sample_pairs: Annotated[int, Ge(10)] | None = None

    def __post_init__(self) -> None:
        # ``flow`` given as the config's mapping (or a dict): the typed options, naming an unknown key
        object.__setattr__(self, "flow", _flow_options(self.flow))

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> EvalOptions:
        """The options of an ``eval`` config node (a DictConfig, interpolations resolved, a dict, or the typed node
        :data:`EvalConfig`); its ``tasks`` and ``pooler`` are left out, a key it lacks keeps its default.

        Raises:
            EvalConfigError: ``eval.<key>: unknown key; valid: ...`` for a key the node may not have.
        """
        omegaconf = sys.modules.get("omegaconf")  # a DictConfig exists only where omegaconf was imported
        if dataclasses.is_dataclass(node):
            values = {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}
        elif omegaconf is not None and isinstance(node, omegaconf.DictConfig):
            values = omegaconf.OmegaConf.to_container(node, resolve=True)
        else:
            values = dict(node)
        known = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in known and key not in NODE_ONLY_KEYS:
                valid = ", ".join(("tasks", *known, *ENCODER_EVAL_KEYS))
                raise EvalConfigError(f"eval.{key}: unknown key; valid: {valid}")
        return cls(**{key: value for key, value in values.items() if key in known})  # type: ignore[arg-type]

    def check(self) -> None:
        """The value rules that need no file of the data root and no hardware (``eval.flow.corpus``, a file the
        user names, must exist): each field's declared rule, then the post-processing's rule across keys. The
        encoding options (``backend``, ``precision``, ``cache*``) depend on the device and the installed packages:
        :func:`cl_bench.eval.tasks.check_eval_config` judges them after these rules
        (:mod:`cl_bench.models.encoding_options`, :func:`cl_bench.models.inference.check_inference_options`).

        Raises:
            EvalConfigError: one line naming the key (``eval.batch_size: must be >= 1, got 0``).
        """
        try:
            check_fields(self, "eval.")
            _check_postprocess(self)
        except ValueError as err:
            raise EvalConfigError(str(err)) from None


class _EvalNode(Checked):
    """The rules of the ``eval`` node (:data:`EvalConfig`): its fields' (:class:`EvalOptions`'), the post-processing's,
    and which of its keys act on a run."""

    group: ClassVar[str] = "eval"

    def options(self) -> EvalOptions:
        """The node's :class:`EvalOptions` (without ``tasks`` and ``pooler``)."""
        return EvalOptions.from_config(self)  # type: ignore[arg-type]

    def inert_keys(self, run: Any) -> dict[str, str]:
        """The ``eval.*`` keys (and the ``pooler`` group) that cannot act on ``run`` (a :class:`cl_bench.run_specs.RunSpecs`)."""
        tasks = [str(t) for t in self.tasks]  # type: ignore[attr-defined]
        training = run.training
        inert: dict[str, str] = {}
        if not (uses_transfer(tasks) or (training and run.train.select_metric == "transfer_dev_avg")):
            for key in ("eval.transfer_config", "eval.transfer_classifier", "eval.seed"):
                inert[key] = "no transfer task is evaluated (eval.tasks)"
        if not self.align_uniform:  # type: ignore[attr-defined]
            inert["eval.align_uniform_split"] = "eval.align_uniform is false"
        if tasks and not split_tasks(tasks)[0]:
            for key in ("eval.align_uniform", "eval.align_uniform_split", "eval.anisotropy", "eval.postprocess",
                        "eval.whitening", "eval.flow", "eval.truncate_dim", "eval.sample_pairs"):
                inert[key] = "only cl-bench's own tasks use it; eval.tasks has only mteb: tasks"
        postprocess = self.postprocess  # type: ignore[attr-defined]
        if postprocess != "whitening":
            inert["eval.whitening"] = f"only eval.postprocess=whitening keeps k dimensions (eval.postprocess={postprocess})"
        if postprocess != "flow":
            inert["eval.flow"] = f"only eval.postprocess=flow fits a flow (eval.postprocess={postprocess})"
        elif not training and self.flow.pooler == "official":  # type: ignore[attr-defined]
            inert["pooler"] = ("eval.flow.pooler=official pools as BERT-flow (avg_first_last, first_layer=1); "
                               "add eval.flow.pooler=run to use the pooler group")
        return inert


def _node_schema() -> type:
    """The Hydra schema of the ``eval`` node: ``tasks``, then :class:`EvalOptions`' fields (declared there only,
    so a new option is one field, with its rule and doc), then ``pooler``; a mutable dataclass, as overrides set its
    values; its rules are :class:`_EvalNode`'s."""
    tasks = ("tasks", "list[str]", field(default_factory=lambda: ["sts"]))
    pooler = ("pooler", "str | None", field(default=None))
    options = [(f.name, f.type, field(default=f.default, default_factory=f.default_factory))
               for f in dataclasses.fields(EvalOptions)]
    doc = ("Options of the final evaluation: ``tasks`` (groups sts, transfer and/or task names: sts12..sts16 stsb "
           "sickr mr cr subj mpqa sst2 trec mrpc, or mteb:NAME), the fields of ``cl_bench.eval.EvalOptions`` (what "
           "``cl_bench.eval.evaluate`` takes, declared there) and ``pooler`` (the final evaluation's pooler, "
           "re-pooling the trained encoder, e.g. AnglE's cls_avg; null = pooler.name; dev selection and best_model/ "
           "keep pooler.name).")
    return dataclasses.make_dataclass("EvalConfig", [tasks, *options, pooler], bases=(_EvalNode,),
                                      namespace={"__module__": __name__, "__doc__": doc})


#: The ``eval`` node's schema (``CLBenchConfig.eval``): built from :class:`EvalOptions`, so its options are declared once.
EvalConfig = _node_schema()
