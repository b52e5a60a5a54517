"""The key types and choices that several methods' specs share (the auxiliary MLM's keys, a head's layer sizes, a
prompt template, BatchNorm heads' mode), each with its rule declared once (read by :func:`cl_bench.specs.check_fields`).

Torch-free (see :mod:`cl_bench.specs`). Each method's own spec sits in its folder,
``cl_bench/methods/<name>/configuration.py``; what one method alone uses lives there, not here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from annotated_types import Ge, Interval, MinLen

from cl_bench.models.prompts import MASK_PLACEHOLDER, SENTENCE_SLOT
from cl_bench.specs import Must

#: ``method.batch_norm`` of the two-view methods with BatchNorm heads (Barlow Twins, BYOL)
BatchNormMode = StrEnum("BatchNormMode", "per_view joint")

#: a head's layer sizes (``method.projector`` of Barlow Twins, ``method.projection`` of BYOL and SwAV)
LayerSizes = Annotated[list[Annotated[int, Ge(1)]], MinLen(1)]
#: λ of an auxiliary MLM loss (SimCSE, supervised SimCSE, DeCLUTR); 0: no MLM term
MlmWeight = Annotated[float, Ge(0)]
#: the fraction of tokens masked for an auxiliary MLM loss
MlmProbability = Annotated[float, Interval(gt=0, lt=1)]


def _one_slot_one_mask(template: Any) -> bool:
    return isinstance(template, str) and template.count(SENTENCE_SLOT) == 1 and template.count(MASK_PLACEHOLDER) == 1


#: a [MASK]-pooled prompt template (PromptBERT, SNCSE): the sentence slot once, the mask once (the encoder fills the
#: slot and pools the mask's state)
Template = Annotated[str, Must(_one_slot_one_mask, f"hold one sentence slot {SENTENCE_SLOT} and one {MASK_PLACEHOLDER}")]


def mlm_inert_keys(values: dict[str, Any]) -> dict[str, str]:
    """``mlm_probability`` (and ``mlm_mode``, where a method has it) cannot act when ``mlm_weight`` is 0 (no MLM term)."""
    if float(values.get("mlm_weight", 0.0) or 0.0) != 0.0:
        return {}
    why = "method.mlm_weight is 0 (no MLM term); set method.mlm_weight > 0"
    return {key: why for key in ("mlm_probability", "mlm_mode") if key in values}
