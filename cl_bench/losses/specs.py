"""The losses' specs: each ``loss=`` option's keys with their types, its kind (the call a method makes to it),
what its keys need to act, the inputs it takes, and its rules.

Torch-free (see :mod:`cl_bench.specs`). The kinds are listed in :mod:`cl_bench.losses`. A spec's
:meth:`~cl_bench.specs.Spec.check` holds the value rules its loss function applies to its own keys on every
call (the function keeps them too), so a bad value is rejected before any model loads; rules that depend on
the tensors a method passes (one hard negative per anchor, an even width) stay in the function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from cl_bench.specs import LossSpec

#: AnglE's reductions of a pair's element-wise angle differences (``loss.angle_pooling``)
AnglePooling = StrEnum("AnglePooling", "sum mean")
#: MixCSE's treatments of the mixed logits that hold the row's positive (``loss.mask_positive_mix``)
MaskPositiveMix = StrEnum("MaskPositiveMix", "zero drop none")
#: SupCon's anchor sets (``loss.contrast_mode``): both views, or the first views only
ContrastMode = StrEnum("ContrastMode", "all one")
#: the triplet loss's in-batch negative choice (``loss.mining``)
Mining = StrEnum("Mining", "hardest random")
#: QuickThoughts' neighbour scores (``loss.similarity``)
Similarity = StrEnum("Similarity", "dot cosine")
#: The SG objectives of the paper's loss ablation, in the order they were introduced (``loss.objective``).
SGObjective = StrEnum("SGObjective", "base opt1 opt2 opt3")


def check_tau(tau: float) -> None:
    """Raise a one-line error naming ``loss.tau`` unless ``tau > 0``."""
    check_scale(tau, "tau")


def check_scale(value: float, key: str) -> None:
    """Raise a one-line error naming ``loss.<key>`` unless the scale is > 0."""
    if not value > 0:
        raise ValueError(f"loss.{key}: must be > 0, got {value}")


def check_margin(margin: float) -> None:
    """Raise a one-line error naming ``loss.margin`` unless ``margin > 0``."""
    check_scale(margin, "margin")


def check_angle(weights: Mapping[str, float], scales: Mapping[str, float], pooling: str) -> None:
    """AnglE's keys: each term weight >= 0, each scale > 0, a known ``angle_pooling``."""
    for key, value in weights.items():
        if value < 0:
            raise ValueError(f"loss.{key}: must be >= 0, got {value}")
    for key, value in scales.items():
        check_scale(value, key)
    if pooling not in list(AnglePooling):
        raise ValueError(f"loss.angle_pooling: unknown '{pooling}'; valid: {', '.join(AnglePooling)}")


def check_mixcse(lambd: Any, mask_positive_mix: Any) -> None:
    """MixCSE's keys: ``lambd`` in [0, 1], a known ``mask_positive_mix``."""
    if not 0.0 <= float(lambd) <= 1.0:
        raise ValueError(f"loss.lambd: must be in [0, 1], got {lambd}")
    if mask_positive_mix not in list(MaskPositiveMix):
        raise ValueError(f"loss.mask_positive_mix: unknown '{mask_positive_mix}'; valid: {', '.join(MaskPositiveMix)}")


def check_debiasing(tau_plus: float, beta: float) -> None:
    """The debiased/hard-negative estimator's class prior in [0, 1) and concentration >= 0."""
    if not 0.0 <= tau_plus < 1.0:
        raise ValueError(f"loss.tau_plus: must be in [0, 1), got {tau_plus}")
    if beta < 0:
        raise ValueError(f"loss.beta: must be >= 0, got {beta}")


# ------------------------------------------------------------------------------------------------
# kind ``pair``: loss(anchors, positives, hard_negatives=None, *, labels=None, ...)
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class _PairLossSpec(LossSpec):
    """A ``pair`` loss: ``loss(anchors, positives, hard_negatives=None, *, labels=None, ...)``."""

    kind: ClassVar[str] = "pair"
    inputs: ClassVar[frozenset[str]] = frozenset({"labels"})


@dataclass(kw_only=True)
class _TemperaturePairLossSpec(_PairLossSpec):
    """A ``pair`` loss over similarities divided by a temperature, ``loss.tau > 0``."""

    tau: float

    def check(self) -> None:
        check_tau(self.tau)


@dataclass(kw_only=True)
class InfoNCESpec(_TemperaturePairLossSpec):
    """InfoNCE with in-batch negatives (:func:`cl_bench.losses.infonce.info_nce`)."""

    target: ClassVar[str] = "cl_bench.losses.infonce.info_nce"
    needs: ClassVar[Mapping[str, str]] = {"hard_negative_alpha": "hard_negatives"}
    inputs: ClassVar[frozenset[str]] = frozenset({"labels", "ignore"})

    hard_negative_alpha: float


@dataclass(kw_only=True)
class NTXentSpec(_TemperaturePairLossSpec):
    """NT-Xent, SimCLR's symmetric InfoNCE (:func:`cl_bench.losses.ntxent.ntxent`)."""

    target: ClassVar[str] = "cl_bench.losses.ntxent.ntxent"


@dataclass(kw_only=True)
class SupConSpec(_TemperaturePairLossSpec):
    """Supervised contrastive loss, L_out (:func:`cl_bench.losses.supcon.supcon`)."""

    target: ClassVar[str] = "cl_bench.losses.supcon.supcon"

    contrast_mode: ContrastMode


@dataclass(kw_only=True)
class DebiasedSpec(_TemperaturePairLossSpec):
    """Debiased contrastive loss (:func:`cl_bench.losses.debiased.debiased`)."""

    target: ClassVar[str] = "cl_bench.losses.debiased.debiased"

    tau_plus: float
    symmetric: bool

    def check(self) -> None:
        check_debiasing(self.tau_plus, 0.0)
        super().check()


@dataclass(kw_only=True)
class HardNegativeSpec(_TemperaturePairLossSpec):
    """Hard-negative-weighted contrastive loss (:func:`cl_bench.losses.hard_negative.hard_negative`)."""

    target: ClassVar[str] = "cl_bench.losses.hard_negative.hard_negative"

    beta: float
    tau_plus: float
    symmetric: bool

    def check(self) -> None:
        check_debiasing(self.tau_plus, self.beta)
        super().check()


@dataclass(kw_only=True)
class NCESpec(_TemperaturePairLossSpec):
    """Noise-contrastive estimation over in-batch noise (:func:`cl_bench.losses.nce.nce`)."""

    target: ClassVar[str] = "cl_bench.losses.nce.nce"

    noise_prob: float | None

    def check(self) -> None:
        if self.noise_prob is not None and not 0.0 < self.noise_prob <= 1.0:
            raise ValueError(f"loss.noise_prob: must be in (0, 1], got {self.noise_prob}")
        super().check()


@dataclass(kw_only=True)
class NPairSpec(_TemperaturePairLossSpec):
    """Multi-class N-pair loss (:func:`cl_bench.losses.npair.npair`)."""

    target: ClassVar[str] = "cl_bench.losses.npair.npair"

    l2_reg: float

    def check(self) -> None:
        if self.l2_reg < 0:
            raise ValueError(f"loss.l2_reg: must be >= 0, got {self.l2_reg}")
        super().check()


@dataclass(kw_only=True)
class SNNSpec(_TemperaturePairLossSpec):
    """Soft nearest-neighbour loss (:func:`cl_bench.losses.snn.snn`)."""

    target: ClassVar[str] = "cl_bench.losses.snn.snn"

    normalize: bool


@dataclass(kw_only=True)
class MixCSESpec(_TemperaturePairLossSpec):
    """MixCSE: InfoNCE with mixed hard negatives (:func:`cl_bench.losses.mixcse.mixcse`)."""

    target: ClassVar[str] = "cl_bench.losses.mixcse.mixcse"

    lambd: float
    mask_positive_mix: MaskPositiveMix

    def check(self) -> None:
        check_mixcse(self.lambd, self.mask_positive_mix)
        super().check()


@dataclass(kw_only=True)
class ContrastiveSpec(_PairLossSpec):
    """Contrastive loss with a margin (:func:`cl_bench.losses.contrastive.contrastive`)."""

    target: ClassVar[str] = "cl_bench.losses.contrastive.contrastive"

    margin: float
    normalize: bool

    def check(self) -> None:
        check_margin(self.margin)


@dataclass(kw_only=True)
class LiftedSpec(_PairLossSpec):
    """Lifted structured loss, smooth version (:func:`cl_bench.losses.lifted.lifted`)."""

    target: ClassVar[str] = "cl_bench.losses.lifted.lifted"

    margin: float
    normalize: bool

    def check(self) -> None:
        check_margin(self.margin)


@dataclass(kw_only=True)
class TripletSpec(LossSpec):
    """Triplet loss with in-batch negatives (:func:`cl_bench.losses.triplet.triplet`)."""

    target: ClassVar[str] = "cl_bench.losses.triplet.triplet"
    kind: ClassVar[str] = "pair"
    inputs: ClassVar[frozenset[str]] = frozenset({"labels", "generator"})

    margin: float
    mining: Mining
    normalize: bool

    def check(self) -> None:
        check_margin(self.margin)


# ------------------------------------------------------------------------------------------------
# the other kinds
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class GISTEmbedSpec(LossSpec):
    """GISTEmbed's guided loss (:func:`cl_bench.losses.gist.gist_embed`)."""

    target: ClassVar[str] = "cl_bench.losses.gist.gist_embed"
    kind: ClassVar[str] = "guided_pair"
    inputs: ClassVar[frozenset[str]] = frozenset({"guide"})

    tau: float
    contrast_anchors: bool
    contrast_positives: bool
    drop_ties: bool

    def check(self) -> None:
        check_tau(float(self.tau))


@dataclass(kw_only=True)
class BarlowTwinsSpec(LossSpec):
    """Barlow Twins' redundancy reduction (:func:`cl_bench.losses.barlow_twins.barlow_twins`)."""

    target: ClassVar[str] = "cl_bench.losses.barlow_twins.barlow_twins"
    kind: ClassVar[str] = "two_view"

    lambd: float

    def check(self) -> None:
        if not self.lambd >= 0:
            raise ValueError(f"loss.lambd: must be >= 0, got {self.lambd}")


@dataclass(kw_only=True)
class BYOLSpec(LossSpec):
    """BYOL's normalised MSE (:func:`cl_bench.losses.byol.byol`); no key besides its name."""

    target: ClassVar[str] = "cl_bench.losses.byol.byol"
    kind: ClassVar[str] = "predict_target"


@dataclass(kw_only=True)
class SwAVSpec(LossSpec):
    """SwAV's swapped prediction (:func:`cl_bench.losses.swav.swav`)."""

    target: ClassVar[str] = "cl_bench.losses.swav.swav"
    kind: ClassVar[str] = "swapped_prediction"

    tau: float
    epsilon: float
    sinkhorn_iterations: int

    def check(self) -> None:
        check_tau(self.tau)
        check_scale(self.epsilon, "epsilon")
        if self.sinkhorn_iterations < 1:
            raise ValueError(f"loss.sinkhorn_iterations: must be >= 1, got {self.sinkhorn_iterations}")


@dataclass(kw_only=True)
class MemoryBankSpec(LossSpec):
    """Instance discrimination with a memory bank (:func:`cl_bench.losses.memory_bank.memory_bank_nce`)."""

    target: ClassVar[str] = "cl_bench.losses.memory_bank.memory_bank_nce"
    kind: ClassVar[str] = "memory_bank"
    inputs: ClassVar[frozenset[str]] = frozenset({"num_data", "partition"})

    tau: float
    proximal_lambda: float

    def check(self) -> None:
        if not self.proximal_lambda >= 0:
            raise ValueError(f"loss.proximal_lambda: must be >= 0, got {self.proximal_lambda}")
        check_tau(self.tau)


@dataclass(kw_only=True)
class SBERTSoftmaxSpec(LossSpec):
    """Sentence-BERT's classification objective (:func:`cl_bench.losses.sbert.sbert_softmax`); no key besides its name."""

    target: ClassVar[str] = "cl_bench.losses.sbert.sbert_softmax"
    kind: ClassVar[str] = "classifier"


@dataclass(kw_only=True)
class SBERTRegressionSpec(LossSpec):
    """Sentence-BERT's regression objective (:func:`cl_bench.losses.sbert.sbert_regression`); no key besides its name."""

    target: ClassVar[str] = "cl_bench.losses.sbert.sbert_regression"
    kind: ClassVar[str] = "scored_pair"


@dataclass(kw_only=True)
class CoSENTSpec(LossSpec):
    """CoSENT's ranking loss over scored pairs (:func:`cl_bench.losses.cosent.cosent`)."""

    target: ClassVar[str] = "cl_bench.losses.cosent.cosent"
    kind: ClassVar[str] = "scored_pair"

    scale: float

    def check(self) -> None:
        check_scale(self.scale, "scale")


@dataclass(kw_only=True)
class AnglESpec(LossSpec):
    """AnglE on scored pairs (:func:`cl_bench.losses.angle.angle`)."""

    target: ClassVar[str] = "cl_bench.losses.angle.angle"
    kind: ClassVar[str] = "scored_pair"

    cosine_w: float
    ibn_w: float
    angle_w: float
    cosine_tau: float
    ibn_tau: float
    angle_tau: float
    angle_pooling: AnglePooling

    def check(self) -> None:
        check_angle({"cosine_w": self.cosine_w, "ibn_w": self.ibn_w, "angle_w": self.angle_w},
                    {"cosine_tau": self.cosine_tau, "ibn_tau": self.ibn_tau, "angle_tau": self.angle_tau},
                    self.angle_pooling)


@dataclass(kw_only=True)
class AnglENLISpec(LossSpec):
    """AnglE on (query, positive, negative) rows (:func:`cl_bench.losses.angle.angle_nli`)."""

    target: ClassVar[str] = "cl_bench.losses.angle.angle_nli"
    kind: ClassVar[str] = "triplet"

    cosine_w: float
    ibn_w: float
    cln_w: float
    angle_w: float
    cosine_tau: float
    ibn_tau: float
    angle_tau: float
    angle_pooling: AnglePooling

    def check(self) -> None:
        check_angle({"cosine_w": self.cosine_w, "ibn_w": self.ibn_w, "cln_w": self.cln_w, "angle_w": self.angle_w},
                    {"cosine_tau": self.cosine_tau, "ibn_tau": self.ibn_tau, "angle_tau": self.angle_tau},
                    self.angle_pooling)


@dataclass(kw_only=True)
class SBERTTripletSpec(LossSpec):
    """Sentence-BERT's triplet objective (:func:`cl_bench.losses.sbert.sbert_triplet`)."""

    target: ClassVar[str] = "cl_bench.losses.sbert.sbert_triplet"
    kind: ClassVar[str] = "triplet"

    margin: float

    def check(self) -> None:
        check_margin(self.margin)


@dataclass(kw_only=True)
class JSDSpec(LossSpec):
    """IS-BERT's Jensen-Shannon MI estimator (:func:`cl_bench.losses.jsd.jsd_mi_loss`); no key besides its name."""

    target: ClassVar[str] = "cl_bench.losses.jsd.jsd_mi_loss"
    kind: ClassVar[str] = "local_global"


@dataclass(kw_only=True)
class QueueInfoNCESpec(LossSpec):
    """MoCo's InfoNCE over a queue of negative keys (:func:`cl_bench.losses.moco.queue_info_nce`)."""

    target: ClassVar[str] = "cl_bench.losses.moco.queue_info_nce"
    kind: ClassVar[str] = "queue"
    inputs: ClassVar[frozenset[str]] = frozenset({"extra_negatives"})

    tau: float

    def check(self) -> None:
        check_tau(self.tau)


@dataclass(kw_only=True)
class SNCSESpec(LossSpec):
    """SNCSE: InfoNCE plus the bidirectional margin loss on a soft negative (:func:`cl_bench.losses.sncse.sncse_loss`)."""

    target: ClassVar[str] = "cl_bench.losses.sncse.sncse_loss"
    kind: ClassVar[str] = "soft_negative"

    tau: float
    alpha: float
    beta: float
    bml_weight: float

    def check(self) -> None:
        if self.beta < self.alpha:
            raise ValueError(f"loss.beta: must be >= loss.alpha, got alpha={self.alpha}, beta={self.beta}")
        check_tau(self.tau)


@dataclass(kw_only=True)
class NeighbourSpec(LossSpec):
    """QuickThoughts' neighbour classifier (:func:`cl_bench.losses.neighbour.neighbour_classification`)."""

    target: ClassVar[str] = "cl_bench.losses.neighbour.neighbour_classification"
    kind: ClassVar[str] = "neighbour"
    needs: ClassVar[Mapping[str, str]] = {"tau": "similarity=cosine"}

    similarity: Similarity
    tau: float | None

    def check(self) -> None:
        if self.similarity == "cosine":
            if self.tau is None:
                raise ValueError("loss.tau: similarity=cosine needs a temperature")
            check_tau(self.tau)


@dataclass(kw_only=True)
class SGContrastiveSpec(LossSpec):
    """SG-BERT's and SG-OPT's objectives (:func:`cl_bench.losses.sg_opt.sg_contrastive_loss`; ``loss=sg``, ``loss=sg_opt``)."""

    target: ClassVar[str] = "cl_bench.losses.sg_opt.sg_contrastive_loss"
    kind: ClassVar[str] = "self_guided"

    objective: SGObjective
    tau: float

    def check(self) -> None:
        check_tau(self.tau)


# ------------------------------------------------------------------------------------------------
# train.matryoshka_dims / _weights: Matryoshka wraps a loss of these kinds (cl_bench/losses/matryoshka.py)
# ------------------------------------------------------------------------------------------------
#: loss kinds whose tensor arguments are sentence embeddings (so a prefix of them is an embedding too)
EMBEDDING_KINDS = ("pair", "guided_pair", "scored_pair", "triplet")


def check_dims(dims: Sequence[int], weights: Sequence[float] | None) -> None:
    """One-line errors naming ``train.matryoshka_dims`` / ``train.matryoshka_weights``."""
    if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        raise ValueError(f"train.matryoshka_dims: must be a non-empty list of sizes >= 1, got {list(dims)}")
    if len(set(dims)) != len(dims):
        raise ValueError(f"train.matryoshka_dims: sizes must be distinct, got {list(dims)}")
    if weights is not None:
        if len(weights) != len(dims):
            raise ValueError(f"train.matryoshka_weights: one weight per size of train.matryoshka_dims "
                             f"({len(dims)}), got {len(weights)}")
        if any(isinstance(w, bool) or not isinstance(w, int | float) or w < 0 for w in weights):
            raise ValueError(f"train.matryoshka_weights: must be numbers >= 0, got {list(weights)}")
