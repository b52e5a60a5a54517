"""The spec of ``method=sbert`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.sbert.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from annotated_types import Ge, Gt

from cl_bench.specs import Because, MethodSpec, RunSetting

#: where a scored_pair loss's pairs come from (``method.scored_pairs`` of SBERT)
ScoredPairs = StrEnum("ScoredPairs", "stsb nli")
#: the loss SBERT's regression is (its ``_target_``): it fits the cosine to a score in [0, 1]
SBERT_REGRESSION_TARGET = "cl_bench.losses.sbert.sbert_regression"


@dataclass(kw_only=True)
class SBERTSpec(MethodSpec):
    """Sentence-BERT (:class:`cl_bench.methods.sbert.modeling.SBERT`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.sbert.modeling.SBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("classifier", "scored_pair", "triplet")
    tiny_run: ClassVar[tuple[str, ...]] = ("data=snli_labeled",)
    summary: ClassVar[str] = ("Sentence-BERT: siamese fine-tuning; loss=sbert_softmax (NLI), sbert_regression/cosent/angle "
                              "(STS-B) or sbert_triplet/angle_nli (NLI triples)")
    encodes_views: ClassVar[bool] = True  # its columns go through tokenize_groups: model.view_prompts acts

    #: SentEval SNLI splits read for sbert_softmax (null: the split data.train_file names)
    nli_splits: list[str] | None = None
    #: sbert_softmax: train the classifier (false: v0.2.0's fit, which never updated it; fixed in v0.2.2)
    train_classifier: bool = True
    #: a scored_pair loss's pairs: stsb (an STS-B split) | nli (the NLI triples file as AnglE's format A:
    #: premise-entailment labelled 1, premise-contradiction 0)
    scored_pairs: ScoredPairs = ScoredPairs.stsb
    #: scored_pairs=stsb: STS-B's 0-5 gold score rescaled to [0, score_max]: 1 = score/5 (SBERT's regression
    #: target); 5 = the raw score, as AnglE's STS-B example feeds loss=angle its labels
    score_max: Annotated[float, Gt(0)] = 1.0
    #: > 0: the loss is the mean of the losses of consecutive blocks of this many rows (GPUs x gradient
    #: accumulation steps of that many rows each; AnglE's NLI command: 128); 0: one loss
    loss_block: Annotated[int, Ge(0), Because("0: one loss over the batch")] = 0

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
