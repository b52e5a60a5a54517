"""``eval.postprocess``, ``eval.whitening`` and ``eval.flow.*``: the post-processing's options and their checks
(the schema of :mod:`cl_bench.eval.flow`; :mod:`cl_bench.eval.postprocess` applies them).

Kept apart from the flow itself, which needs torch, so that the config schema and its validation
(:mod:`cl_bench.config`) load without torch: a rejected command answers before torch is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

POSTPROCESS_KINDS: tuple[str, ...] = ("none", "whitening", "flow")

FIT_MODES: tuple[str, ...] = ("train", "eval")
FLOW_POOLERS: tuple[str, ...] = ("official", "run")
FLOW_LOSSES: tuple[str, ...] = ("bits_pair_sum", "nats_mean")


@dataclass
class FlowOptions:
    """``eval.flow.*``: the flow's shape and how it is fitted (defaults: the official BERT-flow run).

    Attributes:
        levels: number of levels (a split after each but the last).
        depth: flow steps per level.
        width: hidden width of the coupling networks.
        epochs: passes over the fitting sentences (fractions allowed).
        lr: learning rate.
        batch_size: sentences per step (the official 32 pairs = 64 sentences).
        corpus: ``task`` (fit per task on all of its sentences, every split: the paper's
            ``use_full_for_training``) or the path of a text file, one sentence per line (one flow
            for every task).
        seed: initialisation, shuffling and dropout seed.
        fit_mode: ``train`` (fit on embeddings with dropout, as the official run) or ``eval``.
        pooler: ``official`` (BERT-flow's avg-last-2 pooling) or ``run`` (the run's pooler).
        adam_bias_correction: false: the official optimiser without bias correction; true: torch AdamW.
        loss: ``bits_pair_sum`` (the official objective's scale) or ``nats_mean``.
        init_batch_size: sentences of the separate draw that initialises the actnorms (official
            32); 0: the first training batch.
    """

    levels: int = 3
    depth: int = 3
    width: int = 32
    epochs: float = 1.0
    lr: float = 1e-3
    batch_size: int = 64
    corpus: str = "task"
    seed: int = 1234
    fit_mode: str = "train"
    pooler: str = "official"
    adam_bias_correction: bool = False
    loss: str = "bits_pair_sum"
    init_batch_size: int = 32

    @classmethod
    def from_mapping(cls, options: FlowOptions | Mapping[str, Any] | None) -> FlowOptions:
        """Build from the ``eval.flow`` node (or options), naming an unknown or invalid key."""
        built = cls.from_values(asdict(options) if isinstance(options, FlowOptions) else options)
        built.check()
        return built

    @classmethod
    def from_values(cls, options: Mapping[str, Any] | None) -> FlowOptions:
        """Build from the ``eval.flow`` node, naming an unknown key; the values are :meth:`check`'s."""
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        for key in options:
            if key not in known:
                raise ValueError(f"eval.flow.{key}: unknown key; valid: {', '.join(sorted(known))}")
        return cls(**options)

    def check(self) -> None:
        """Raise a one-line error naming the first invalid ``eval.flow.*`` value."""
        for key in ("levels", "depth", "width", "batch_size", "seed", "init_batch_size"):
            value = getattr(self, key)
            minimum = 0 if key in ("seed", "init_batch_size") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"eval.flow.{key}: must be an integer >= {minimum}, got {value!r}")
        for key in ("epochs", "lr"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"eval.flow.{key}: must be > 0, got {value!r}")
        for key, valid in (("fit_mode", FIT_MODES), ("pooler", FLOW_POOLERS), ("loss", FLOW_LOSSES)):
            if getattr(self, key) not in valid:
                raise ValueError(f"eval.flow.{key}: unknown {getattr(self, key)!r}; valid: {', '.join(valid)}")
        if not isinstance(self.adam_bias_correction, bool):
            raise ValueError(f"eval.flow.adam_bias_correction: must be true or false, got {self.adam_bias_correction!r}")
        if not isinstance(self.corpus, str) or not self.corpus:
            raise ValueError(f"eval.flow.corpus: must be 'task' or a text file, got {self.corpus!r}")


def check_postprocess(
    postprocess: str, whitening: int | None, flow: FlowOptions | Mapping[str, Any] | None
) -> FlowOptions:
    """Validate ``eval.postprocess``, ``eval.whitening`` and ``eval.flow.*`` together (one-line errors).

    Returns:
        The flow options (defaults when ``eval.flow`` is empty).
    """
    if postprocess not in POSTPROCESS_KINDS:
        raise ValueError(f"eval.postprocess: unknown '{postprocess}'; valid: {', '.join(POSTPROCESS_KINDS)}")
    if whitening is not None and postprocess != "whitening":
        raise ValueError(
            f"eval.whitening: the kept dimensions act only with eval.postprocess=whitening (got {postprocess})"
        )
    options = FlowOptions.from_mapping(flow)
    if postprocess != "flow" and options != FlowOptions():
        changed = next(f for f in FlowOptions.__dataclass_fields__ if getattr(options, f) != getattr(FlowOptions(), f))
        raise ValueError(f"eval.flow.{changed}: acts only with eval.postprocess=flow (got {postprocess})")
    if postprocess == "flow" and options.corpus != "task" and not Path(options.corpus).expanduser().is_file():
        raise ValueError(f"eval.flow.corpus: {options.corpus}: no such file (use 'task' or a text file)")
    return options


def fits_per_task(postprocess: str, flow: FlowOptions) -> bool:
    """Whether each task's transform is fitted on that task's sentences (all its splits are then read)."""
    return postprocess == "whitening" or (postprocess == "flow" and flow.corpus == "task")
