"""``eval.postprocess``, ``eval.whitening`` and ``eval.flow.*``: the post-processing's options and their checks
(the schema of :mod:`cl_bench.eval.flow`; :mod:`cl_bench.eval.postprocess` applies them).

Kept apart from the flow itself, which needs torch, so that the config schema and its validation
(:mod:`cl_bench.config`) load without torch: a rejected command answers before torch is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Ge, Gt

from cl_bench.specs import Must, check_fields

POSTPROCESS_KINDS: tuple[str, ...] = ("none", "whitening", "flow")

FIT_MODES: tuple[str, ...] = ("train", "eval")
FLOW_POOLERS: tuple[str, ...] = ("official", "run")
FLOW_LOSSES: tuple[str, ...] = ("bits_pair_sum", "nats_mean")

# the rules Must states, named here: a field's annotation is evaluated apart from this module's names
_FIT_MODE = Must(lambda v: v in FIT_MODES, f"be one of {', '.join(FIT_MODES)}")
_FLOW_POOLER = Must(lambda v: v in FLOW_POOLERS, f"be one of {', '.join(FLOW_POOLERS)}")
_FLOW_LOSS = Must(lambda v: v in FLOW_LOSSES, f"be one of {', '.join(FLOW_LOSSES)}")
_BOOLEAN = Must(lambda v: isinstance(v, bool), "be true or false")
_NON_EMPTY = Must(lambda v: isinstance(v, str) and bool(v), "be 'task' or a text file")


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

    levels: Annotated[int, Ge(1)] = 3
    depth: Annotated[int, Ge(1)] = 3
    width: Annotated[int, Ge(1)] = 32
    epochs: Annotated[float, Gt(0)] = 1.0
    lr: Annotated[float, Gt(0)] = 1e-3
    batch_size: Annotated[int, Ge(1)] = 64
    corpus: Annotated[str, _NON_EMPTY] = "task"
    seed: Annotated[int, Ge(0)] = 1234
    fit_mode: Annotated[str, _FIT_MODE] = "train"
    pooler: Annotated[str, _FLOW_POOLER] = "official"
    adam_bias_correction: Annotated[bool, _BOOLEAN] = False
    loss: Annotated[str, _FLOW_LOSS] = "bits_pair_sum"
    init_batch_size: Annotated[int, Ge(0)] = 32

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
        """Raise a one-line error naming the first invalid ``eval.flow.*`` value (the rules declared on the fields)."""
        check_fields(self, "eval.flow.")


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
