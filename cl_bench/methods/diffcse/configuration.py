"""The spec of ``method=diffcse`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.diffcse.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from annotated_types import Ge, Interval

from cl_bench.models.hub import ModelLoadError, check_model_reachable
from cl_bench.specs import MethodSpec, RunSetting

#: ``method.projector`` of DiffCSE
Projector = StrEnum("Projector", "batchnorm mlp")


def check_generator_reachable(name_or_path: str) -> None:
    """Fail before any model loads when ``method.generator`` can obviously not be loaded (the same offline-safe
    check as ``model.name_or_path``: a local folder needs its config.json, a hub id a cached copy or the hub)."""
    try:
        check_model_reachable(name_or_path)
    except ModelLoadError as err:
        raise ValueError(
            f"method.generator: cannot load '{name_or_path}' ({err.reason}); "
            "point method.generator at a local masked-LM folder, or null for model.name_or_path (a variant, not the "
            "paper's DiffCSE; on a checkpoint without a masked-LM head, e.g. all-MiniLM-L6-v2, the generator's head is "
            "random and this is not DiffCSE's objective: docs/compare.md, DiffCSE's generator offline)"
        ) from err


@dataclass(kw_only=True)
class DiffCSESpec(MethodSpec):
    """DiffCSE (:class:`cl_bench.methods.diffcse.modeling.DiffCSE`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.diffcse.modeling.DiffCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    needs_masked_lm: ClassVar[str] = "its generator fills [MASK] tokens and its discriminator copies the encoder as a BERT-shaped token classifier"
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    run_note: ClassVar[str] = (
        "Its generator, `distilbert-base-uncased`, is a second hub model: offline, put it in the Hugging "
        "Face cache first or point `method.generator` at a local masked-LM folder; whether "
        "`method.generator=null` is still DiffCSE is answered on "
        "[Compare two methods](../compare.md#diffcses-generator-offline)."
    )
    tiny_run: ClassVar[tuple[str, ...]] = ("method.generator=null",)  # null: the tiny encoder's own checkpoint as the generator
    summary: ClassVar[str] = ("DiffCSE: SimCSE + conditional ELECTRA (frozen MLM generator edits, discriminator "
                              "conditioned on the embedding)")

    #: the frozen generator: any masked LM with the encoder's vocabulary (hub id or local folder); null:
    #: model.name_or_path
    generator: str | None = "distilbert-base-uncased"
    #: λ of the replaced-token-detection loss (run_diffcse.sh LAMBDA=0.005; 0: plain SimCSE + projector)
    lambda_weight: Annotated[float, Ge(0)] = 0.005
    #: tokens masked before the generator fills them (run_diffcse.sh MASK=0.30)
    mask_ratio: Annotated[float, Interval(gt=0, lt=1)] = 0.30
    #: batchnorm: DiffCSE's ProjectionMLP (--batchnorm) | mlp: SimCSE's Linear+tanh (pooler=cls only)
    projector: Projector = Projector.batchnorm

    def check_combination(self) -> None:
        """The generator is reachable when the ELECTRA term uses it (``lambda_weight`` > 0)."""
        if float(self.lambda_weight or 0) > 0 and self.generator:
            check_generator_reachable(str(self.generator))

    def check_setting(self, setting: RunSetting) -> None:
        """The BatchNorm projector is training-only (the saved encoder cannot hold it): with ``pooler=cls`` it
        needs ``pooler.mlp_only_train=true`` (checked here, before the model and the generator load)."""
        if setting.pooler == "cls" and self.projector == "batchnorm" and setting.mlp_only_train is False:
            raise ValueError("pooler.mlp_only_train: method=diffcse's BatchNorm projector is used in training only "
                             "(official --mlp_only_train); set pooler.mlp_only_train=true or method.projector=mlp")

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if setting.pooler and setting.pooler != "cls":  # embed() skips the projector on other poolers
            inert["projector"] = f"only pooler=cls has DiffCSE's projector (pooler={setting.pooler})"
        if float(self.lambda_weight or 0) == 0:
            why = "method.lambda_weight is 0 (no ELECTRA term); set method.lambda_weight > 0"
            inert.update({"generator": why, "mask_ratio": why})
        return inert
