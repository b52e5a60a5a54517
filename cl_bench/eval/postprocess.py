"""``eval.postprocess``: how embeddings are transformed before scoring — none, BERT-whitening or BERT-flow.

Both transforms are fitted on a task's own sentences, every split (BERT-whitening's
``normalized_by='target'``; BERT-flow's ``use_full_for_training``), so each task gets its own
transform; BERT-flow can instead be fitted once on a named corpus (``eval.flow.corpus=<file>``)
and applied to every task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cl_bench.eval.flow import FittedFlow, FlowOptions
from cl_bench.eval.geometry import Whitening

Transform = Callable[[np.ndarray], np.ndarray]
Embed = Callable[[Sequence[str]], np.ndarray]

POSTPROCESS_KINDS: tuple[str, ...] = ("none", "whitening", "flow")


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


@dataclass
class PostProcess:
    """A configured post-processing: :meth:`fit` gives the transform for one task's sentences.

    Attributes:
        kind: ``none`` | ``whitening`` | ``flow``.
        whitening: kept dimensions of BERT-whitening (None: all).
        flow: BERT-flow options.
    """

    kind: str = "none"
    whitening: int | None = None
    flow: FlowOptions = field(default_factory=FlowOptions)
    _shared: Transform | None = field(default=None, repr=False)

    @property
    def fits_per_task(self) -> bool:
        """Whether each task's transform is fitted on that task's sentences (all splits needed)."""
        return self.kind == "whitening" or (self.kind == "flow" and self.flow.corpus == "task")

    def prepare(self, embed: Embed, corpus: Sequence[str]) -> None:
        """Fit the one shared flow on the named corpus's sentences (no-op when fitting per task)."""
        if not self.fits_per_task and self._shared is None:
            self._shared = FittedFlow.fit(embed(corpus), self.flow).transform

    def transform_for(self, embed: Embed, sentences: Sequence[str]) -> Transform:
        """The transform for a task with these sentences (all its splits): fitted on them, or the shared one."""
        if not self.fits_per_task:
            if self._shared is None:
                raise RuntimeError("PostProcess.prepare must fit the corpus flow first")
            return self._shared
        x = np.asarray(embed(sentences))
        if self.kind == "whitening":
            return Whitening.fit(x, self.whitening if self.whitening is not None else x.shape[1]).transform
        return FittedFlow.fit(x, self.flow).transform


def build_postprocess(
    postprocess: str, whitening: int | None, flow: FlowOptions | Mapping[str, Any] | None
) -> PostProcess | None:
    """The :class:`PostProcess` of the ``eval`` options (None for ``none``)."""
    options = check_postprocess(postprocess, whitening, flow)
    if postprocess == "none":
        return None
    return PostProcess(postprocess, whitening, options)
