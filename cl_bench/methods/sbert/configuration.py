"""The spec of ``method=sbert`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.sbert.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from cl_bench.specs import MethodSpec, RunSetting

#: where a scored_pair loss's pairs come from (``method.scored_pairs`` of SBERT)
ScoredPairs = StrEnum("ScoredPairs", "stsb nli")
#: the loss SBERT's regression is (its ``_target_``): it fits the cosine to a score in [0, 1]
SBERT_REGRESSION_TARGET = "cl_bench.losses.sbert.sbert_regression"


@dataclass(kw_only=True)
class SBERTSpec(MethodSpec):
    """Sentence-BERT (:class:`cl_bench.methods.sbert.modeling.SBERT`; conf/method/sbert.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.sbert.modeling.SBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("classifier", "scored_pair", "triplet")
    tiny_run: ClassVar[tuple[str, ...]] = ("data=snli_labeled",)
    summary: ClassVar[str] = ("Sentence-BERT: siamese fine-tuning; loss=sbert_softmax (NLI), sbert_regression/cosent/angle "
                              "(STS-B) or sbert_triplet/angle_nli (NLI triples)")
    encodes_views: ClassVar[bool] = True  # its columns go through tokenize_groups: model.view_prompts acts

    nli_splits: list[str] | None
    train_classifier: bool
    scored_pairs: ScoredPairs
    score_max: float
    loss_block: int

    def check(self) -> None:
        """``method.score_max`` a number > 0, ``method.loss_block`` an integer >= 0."""
        score_max = self.score_max
        if isinstance(score_max, bool) or not isinstance(score_max, int | float) or not score_max > 0:
            raise ValueError(f"method.score_max: must be a number > 0, got {score_max!r}")
        loss_block = self.loss_block
        if isinstance(loss_block, bool) or not isinstance(loss_block, int) or loss_block < 0:
            raise ValueError(f"method.loss_block: must be an integer >= 0 (0: one loss over the batch), got {loss_block!r}")

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if setting.loss_kind != "scored_pair":
            inert["scored_pairs"] = f"only a scored_pair loss reads scored pairs (this loss is {setting.loss_kind})"
            inert["score_max"] = f"only a scored_pair loss reads STS-B scores (this loss is {setting.loss_kind})"
        elif self.scored_pairs != "stsb":
            inert["score_max"] = "method.scored_pairs=nli: the pairs' labels are 1 and 0 (no STS-B score to rescale)"
        if setting.loss_kind == "classifier":
            inert["loss_block"] = "a classifier loss (sbert_softmax) is one loss over the batch's labelled pairs"
            return inert
        return {**inert,
                "nli_splits": f"only a classifier loss (sbert_softmax) reads SNLI splits (this loss is {setting.loss_kind})",
                "train_classifier": f"only a classifier loss (sbert_softmax) has a classifier (this loss is {setting.loss_kind})"}

    def check_setting(self, setting: RunSetting) -> None:
        """SBERT's regression fits the cosine to a score in [0, 1]: ``method.score_max`` must stay 1 for it."""
        is_regression = setting.loss is not None and setting.loss.target == SBERT_REGRESSION_TARGET
        if is_regression and float(self.score_max) != 1.0:
            raise ValueError("method.score_max: loss=sbert_regression regresses the cosine on the score in [0, 1]; "
                             "keep method.score_max=1")
