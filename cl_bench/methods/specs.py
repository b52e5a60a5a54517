"""The rules and choices that several methods' specs share (the auxiliary MLM's keys, a head's layer sizes, a
prompt template, BatchNorm heads' mode).

Torch-free (see :mod:`cl_bench.specs`). Each method's own spec sits in its folder,
``cl_bench/methods/<name>/configuration.py``; what one method alone uses lives there, not here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from cl_bench.models.prompts import MASK_PLACEHOLDER, SENTENCE_SLOT, check_prompt
from cl_bench.specs import check_ranges

#: ``method.batch_norm`` of the two-view methods with BatchNorm heads (Barlow Twins, BYOL)
BatchNormMode = StrEnum("BatchNormMode", "per_view joint")


def check_mlm_config(values: dict[str, Any]) -> None:
    """The auxiliary-MLM keys shared by SimCSE, supervised SimCSE and DeCLUTR: weight and probability."""
    check_ranges("method", values, {"mlm_weight": (lambda v: v >= 0, ">= 0"),
                                    "mlm_probability": (lambda v: 0 < v < 1, "in (0, 1)")})


def mlm_inert_keys(values: dict[str, Any]) -> dict[str, str]:
    """``mlm_probability`` (and ``mlm_mode``, where a method has it) cannot act when ``mlm_weight`` is 0 (no MLM term)."""
    if float(values.get("mlm_weight", 0.0) or 0.0) != 0.0:
        return {}
    why = "method.mlm_weight is 0 (no MLM term); set method.mlm_weight > 0"
    return {key: why for key in ("mlm_probability", "mlm_mode") if key in values}


def check_head(values: dict[str, Any], key: str) -> None:
    """Raise ``ValueError("method.<key>: ...")`` unless ``values[key]`` is a non-empty list of sizes >= 1."""
    sizes = values.get(key)
    if sizes is not None and (
        isinstance(sizes, str | int) or not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes)
    ):
        raise ValueError(f"method.{key}: must be a non-empty list of layer sizes >= 1, got {sizes!r}")


def check_templates(values: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Each ``method.<key>`` template has one ``[X]`` and one ``[MASK]``."""
    for key in keys:
        template = values.get(key)
        if template is None:
            continue
        if not isinstance(template, str) or SENTENCE_SLOT not in template or MASK_PLACEHOLDER not in template:
            raise ValueError(f"method.{key}: a template needs the sentence slot {SENTENCE_SLOT} and {MASK_PLACEHOLDER}, "
                             f"got {template!r}")
        check_prompt(template, f"method.{key}", "mask")
