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
import inspect
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cl_bench.eval.flow_options import FlowOptions, check_postprocess

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


def _is_int(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass(frozen=True)
class EvalOptions:
    """How :func:`cl_bench.eval.evaluate` scores an encoder: the ``eval`` config node's options but ``tasks`` and
    ``pooler`` (:data:`NODE_ONLY_KEYS`). Build it with :meth:`from_config`; :meth:`check` validates the values.

    Attributes:
        batch_size: encoding batch size
        align_uniform: Wang & Isola alignment/uniformity on STS-B, as SimCSE
        align_uniform_split: STS-B split(s) for the geometry metrics: all | train | dev | test
        anisotropy: singular-value spectrum + mean cosine of random pairs (+ anisotropy.png)
        transfer_config: SentEval classifier config: full (test: Adam, 10 folds) | fast (fasttest: RMSprop, 5 folds)
        transfer_classifier: senteval (SentEval's PyTorch classifier) | sklearn (lbfgs approximation)
        seed: transfer-task fold shuffling seed (SentEval's default)
        whitening: BERT-whitening's kept dimensions k (eval.postprocess=whitening; null = all)
        backend: encoder forward pass: auto (ONNX Runtime fp32 on CPU when installed, else torch) | torch | onnx
        precision: auto (bf16 on a CUDA GPU of compute >= 8.0, and on a bf16 CPU when ``sample_pairs`` is set; else fp32) | fp32 | bf16 | tf32 (CUDA)
        cache: reuse embeddings of the same weights, pooler, length, precision, backend and sentences
        cache_dir: embedding cache + ONNX exports (null: $CL_BENCH_CACHE, else ~/.cache/cl-bench)
        cache_size_gb: the cache folder is pruned to this size, least recently used first
        postprocess: none | whitening | flow (BERT-flow), fitted per task before cosine scoring
        flow: BERT-flow's options (eval.postprocess=flow)
        truncate_dim: score the first K embedding dimensions only (Matryoshka; null = all)
        sample_pairs: quick path for iterating (eval=iterate): STS on a fixed sample of K pairs per split; null = all
    """

    batch_size: int = 128
    align_uniform: bool = True
    align_uniform_split: str = "all"
    anisotropy: bool = True
    transfer_config: str = "full"
    transfer_classifier: str = "senteval"
    seed: int = 1111
    whitening: int | None = None
    backend: str = "auto"
    precision: str = "auto"
    cache: bool = True
    cache_dir: str | None = None
    cache_size_gb: float = 20.0
    postprocess: str = "none"
    flow: FlowOptions = field(default_factory=FlowOptions)
    truncate_dim: int | None = None
    sample_pairs: int | None = None

    def __post_init__(self) -> None:
        # ``flow`` given as the config's mapping (or a dict): the typed options, naming an unknown key
        object.__setattr__(self, "flow", _flow_options(self.flow))

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> EvalOptions:
        """The options of an ``eval`` config node (a DictConfig, interpolations resolved, or a dict); its ``tasks``
        and ``pooler`` are left out, a key it lacks keeps its default.

        Raises:
            EvalConfigError: ``eval.<key>: unknown key; valid: ...`` for a key the node may not have.
        """
        omegaconf = sys.modules.get("omegaconf")  # a DictConfig exists only where omegaconf was imported
        if omegaconf is not None and isinstance(node, omegaconf.DictConfig):
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
        user names, must exist), in a fixed order: the first invalid value raises. The encoding options (``backend``, ``precision``, ``cache*``) depend on the device and the
        installed packages: :func:`cl_bench.models.inference.check_encoding_options` judges them
        (:func:`cl_bench.eval.tasks.check_eval_config` runs both).

        Raises:
            EvalConfigError: one line naming the key (``eval.batch_size: must be an integer >= 1, got 0``).
        """
        if not _is_int(self.batch_size, 1):
            raise EvalConfigError(f"eval.batch_size: must be an integer >= 1, got {self.batch_size!r}")
        if self.transfer_config not in TRANSFER_CONFIGS:
            raise EvalConfigError(
                f"eval.transfer_config: unknown '{self.transfer_config}'; valid: {', '.join(TRANSFER_CONFIGS)}"
            )
        if self.transfer_classifier not in TRANSFER_CLASSIFIERS:
            raise EvalConfigError(f"eval.transfer_classifier: unknown '{self.transfer_classifier}'; "
                                  f"valid: {', '.join(TRANSFER_CLASSIFIERS)}")
        if not _is_int(self.seed, 0):
            raise EvalConfigError(f"eval.seed: must be an integer >= 0, got {self.seed!r}")
        if self.whitening is not None and not _is_int(self.whitening, 1):
            raise EvalConfigError(
                f"eval.whitening: must be null or the number of kept dimensions >= 1, got {self.whitening!r}"
            )
        if self.truncate_dim is not None and not _is_int(self.truncate_dim, 1):
            raise EvalConfigError(
                f"eval.truncate_dim: must be null or a number of dimensions >= 1, got {self.truncate_dim!r}"
            )
        if self.sample_pairs is not None and not _is_int(self.sample_pairs, 10):
            raise EvalConfigError(f"eval.sample_pairs: must be null (every pair) or a number of pairs >= 10, "
                                  f"got {self.sample_pairs!r}")
        try:
            check_postprocess(self.postprocess, self.whitening, self.flow)
        except ValueError as err:
            raise EvalConfigError(str(err)) from err
        if self.align_uniform_split not in GEOMETRY_SPLITS:
            raise EvalConfigError(f"eval.align_uniform_split: unknown '{self.align_uniform_split}'; "
                                  f"valid: {', '.join(GEOMETRY_SPLITS)}")


def _node_schema() -> type:
    """The Hydra schema of the ``eval`` node: ``tasks``, then :class:`EvalOptions`' fields (declared there only,
    so a new option is one field), then ``pooler``; a mutable dataclass, as overrides set its values. Its
    docstring's ``Attributes:`` (the configuration reference's column) are EvalOptions' and the two keys' own."""
    tasks = ("tasks", "list[str]", field(default_factory=lambda: ["sts"]))
    pooler = ("pooler", "str | None", field(default=None))
    options = [(f.name, f.type, field(default=f.default, default_factory=f.default_factory))
               for f in dataclasses.fields(EvalOptions)]
    attributes = inspect.cleandoc(EvalOptions.__doc__ or "").split("Attributes:\n", 1)[1].rstrip()
    doc = ("Options of the final evaluation: ``tasks``, the fields of ``cl_bench.eval.EvalOptions`` (what\n"
           "``cl_bench.eval.evaluate`` takes, declared there) and ``pooler`` (applied to the encoder).\n\n"
           "Attributes:\n"
           "    tasks: groups sts, transfer and/or task names\n"
           f"{attributes}\n"
           "    pooler: the final evaluation's pooler (e.g. AnglE's cls_avg); null = the run's pooler.name\n")
    return dataclasses.make_dataclass("EvalConfig", [tasks, *options, pooler],
                                      namespace={"__module__": __name__, "__doc__": doc})


#: The ``eval`` node's schema (``CLBenchConfig.eval``): built from :class:`EvalOptions`, so its options are declared once.
EvalConfig = _node_schema()
