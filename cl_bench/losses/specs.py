"""The losses' specs: each ``loss=`` option's keys, each declared once with its type, default, rule and doc (the
comment beside it), its kind (the call a method makes to it), what its keys need to act and the inputs it takes.

Torch-free (see :mod:`cl_bench.specs`). The kinds are listed in :mod:`cl_bench.losses`. A key's own rule is
declared on its field (``tau: Annotated[float, Gt(0)] = 0.05``) and read by the one checker,
:func:`cl_bench.specs.check_fields`; a rule across keys is the spec's :meth:`~cl_bench.specs.Spec.check_combination`.
:meth:`~cl_bench.specs.Spec.check` runs both before any model loads. The loss functions take the spec's values
(no defaults of their own, no value rules); what depends on the tensors a method passes (one hard negative per
anchor, an even width) stays in the function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from annotated_types import Ge, Gt, Interval, MinLen

from cl_bench.specs import Checked, LossSpec, Must

#: a temperature: similarities are divided by it
Temperature = Annotated[float, Gt(0)]
#: a scale: similarities are multiplied by it (CoSENT's and AnglE's ``*_tau``)
Scale = Annotated[float, Gt(0)]
#: a margin between distances
Margin = Annotated[float, Gt(0)]
#: a term's weight in a sum of terms (0 leaves the term out)
Weight = Annotated[float, Ge(0)]
#: the debiased estimators' class prior tau_plus (the chance that a negative is a positive)
ClassPrior = Annotated[float, Interval(ge=0, lt=1)]

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


# ------------------------------------------------------------------------------------------------
# kind ``pair``: loss(anchors, positives, hard_negatives=None, *, labels=None, ...)
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class _PairLossSpec(LossSpec):
    """A ``pair`` loss: ``loss(anchors, positives, hard_negatives=None, *, labels=None, ...)``."""

    kind: ClassVar[str] = "pair"
    inputs: ClassVar[frozenset[str]] = frozenset({"labels"})


@dataclass(kw_only=True)
class InfoNCESpec(_PairLossSpec):
    """InfoNCE with in-batch negatives (:func:`cl_bench.losses.infonce.info_nce`)."""

    target: ClassVar[str] = "cl_bench.losses.infonce.info_nce"
    needs: ClassVar[Mapping[str, str]] = {"hard_negative_alpha": "hard_negatives"}
    inputs: ClassVar[frozenset[str]] = frozenset({"labels", "ignore"})

    tau: Temperature = 0.05  # the softmax temperature over cosine similarities (SimCSE: 0.05)
    #: weight alpha on an anchor's own hard negative (sup SimCSE, Table 7; 1 = unweighted, 0 = dropped)
    hard_negative_alpha: Annotated[float, Ge(0)] = 1.0


@dataclass(kw_only=True)
class NTXentSpec(_PairLossSpec):
    """NT-Xent, SimCLR's symmetric InfoNCE (:func:`cl_bench.losses.ntxent.ntxent`)."""

    target: ClassVar[str] = "cl_bench.losses.ntxent.ntxent"

    tau: Temperature = 0.05  # the temperature (SimCLR used 0.5 on images; 0.05 matches SimCSE's cosine scale)


@dataclass(kw_only=True)
class SupConSpec(_PairLossSpec):
    """Supervised contrastive loss, L_out (:func:`cl_bench.losses.supcon.supcon`)."""

    target: ClassVar[str] = "cl_bench.losses.supcon.supcon"

    tau: Temperature = 0.05  # the temperature (Khosla et al. use 0.1 on images)
    contrast_mode: ContrastMode = ContrastMode.all  # all = both views are anchors; one = first views only


@dataclass(kw_only=True)
class DebiasedSpec(_PairLossSpec):
    """Debiased contrastive loss (:func:`cl_bench.losses.debiased.debiased`)."""

    target: ClassVar[str] = "cl_bench.losses.debiased.debiased"

    tau: Temperature = 0.05  # the temperature (the authors' SimCLR runs use 0.5 on images)
    tau_plus: ClassPrior = 0.1  # class prior (the authors' default); 0 = InfoNCE with the clamp
    symmetric: bool = False  # true = SimCLR-style 2N-2 negatives as in the authors' code


@dataclass(kw_only=True)
class HardNegativeSpec(_PairLossSpec):
    """Hard-negative-weighted contrastive loss (:func:`cl_bench.losses.hard_negative.hard_negative`)."""

    target: ClassVar[str] = "cl_bench.losses.hard_negative.hard_negative"

    tau: Temperature = 0.05  # the temperature
    beta: Annotated[float, Ge(0)] = 1.0  # concentration (authors' default); 0 = debiased loss
    tau_plus: ClassPrior = 0.1  # class prior; 0 = no debiasing
    symmetric: bool = False  # true = SimCLR-style 2N-2 negatives as in the authors' code


@dataclass(kw_only=True)
class NCESpec(_PairLossSpec):
    """Noise-contrastive estimation over in-batch noise (:func:`cl_bench.losses.nce.nce`)."""

    target: ClassVar[str] = "cl_bench.losses.nce.nce"

    tau: Temperature = 0.05  # the temperature of the data-vs-noise logit s/tau - log(k q)
    #: q of each noise sample; null = uniform over the batch's candidates (1/C)
    noise_prob: Annotated[float, Interval(gt=0, le=1)] | None = None


@dataclass(kw_only=True)
class NPairSpec(_PairLossSpec):
    """Multi-class N-pair loss (:func:`cl_bench.losses.npair.npair`)."""

    target: ClassVar[str] = "cl_bench.losses.npair.npair"

    tau: Temperature = 1.0  # the temperature of the raw inner products (1 = Sohn's loss)
    l2_reg: Annotated[float, Ge(0)] = 0.002  # lambda of Sohn (2016): the L2 penalty on the embedding norms


@dataclass(kw_only=True)
class SNNSpec(_PairLossSpec):
    """Soft nearest-neighbour loss (:func:`cl_bench.losses.snn.snn`)."""

    target: ClassVar[str] = "cl_bench.losses.snn.snn"

    #: the temperature of the negative squared distances (on normalised points 0.1 ~ InfoNCE at 0.05)
    tau: Temperature = 0.1
    normalize: bool = True  # L2-normalise the embeddings first


@dataclass(kw_only=True)
class MixCSESpec(_PairLossSpec):
    """MixCSE: InfoNCE with mixed hard negatives (:func:`cl_bench.losses.mixcse.mixcse`)."""

    target: ClassVar[str] = "cl_bench.losses.mixcse.mixcse"

    tau: Temperature = 0.05  # the temperature (--temp 0.05)
    #: λ: weight of the row's own view in a mix (run_unsup_example.sh --lambdas 0.2)
    lambd: Annotated[float, Interval(ge=0, le=1)] = 0.2
    #: the mixed logits holding the row's positive: zero (official: logit 0) | drop | none
    mask_positive_mix: MaskPositiveMix = MaskPositiveMix.zero


@dataclass(kw_only=True)
class ContrastiveSpec(_PairLossSpec):
    """Contrastive loss with a margin (:func:`cl_bench.losses.contrastive.contrastive`)."""

    target: ClassVar[str] = "cl_bench.losses.contrastive.contrastive"

    margin: Margin = 1.0  # epsilon, on L2-normalised embeddings (distances in [0, 2])
    normalize: bool = True  # L2-normalise the embeddings first


@dataclass(kw_only=True)
class LiftedSpec(_PairLossSpec):
    """Lifted structured loss, smooth version (:func:`cl_bench.losses.lifted.lifted`)."""

    target: ClassVar[str] = "cl_bench.losses.lifted.lifted"

    margin: Margin = 1.0  # epsilon (Song et al.: 1)
    normalize: bool = True  # L2-normalise the embeddings first


@dataclass(kw_only=True)
class TripletSpec(LossSpec):
    """Triplet loss with in-batch negatives (:func:`cl_bench.losses.triplet.triplet`)."""

    target: ClassVar[str] = "cl_bench.losses.triplet.triplet"
    kind: ClassVar[str] = "pair"
    inputs: ClassVar[frozenset[str]] = frozenset({"labels", "generator"})

    margin: Margin = 0.2  # FaceNet's alpha on the unit hypersphere (squared distances)
    mining: Mining = Mining.hardest  # hardest | random in-batch negative
    normalize: bool = True  # L2-normalise the embeddings first (FaceNet's unit hypersphere)


# ------------------------------------------------------------------------------------------------
# the other kinds
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class GISTEmbedSpec(LossSpec):
    """GISTEmbed's guided loss (:func:`cl_bench.losses.gist.gist_embed`)."""

    target: ClassVar[str] = "cl_bench.losses.gist.gist_embed"
    kind: ClassVar[str] = "guided_pair"
    inputs: ClassVar[frozenset[str]] = frozenset({"guide"})

    tau: Temperature = 0.01  # the reference's temperature
    contrast_anchors: bool = True  # the guide-masked anchor-anchor block (false: left out)
    contrast_positives: bool = True  # the guide-masked positive-positive block (false: left out)
    #: false: a candidate the guide scores exactly as the positive stays (the reference's >); true: it is masked
    #: too (>=)
    drop_ties: bool = False


@dataclass(kw_only=True)
class BarlowTwinsSpec(LossSpec):
    """Barlow Twins' redundancy reduction (:func:`cl_bench.losses.barlow_twins.barlow_twins`)."""

    target: ClassVar[str] = "cl_bench.losses.barlow_twins.barlow_twins"
    kind: ClassVar[str] = "two_view"

    #: the weight of the off-diagonal terms (official code's --lambd; paper: 5e-3)
    lambd: Annotated[float, Ge(0)] = 0.0051


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

    tau: Temperature = 0.1  # temperature of the prediction softmax (official --temperature)
    epsilon: Annotated[float, Gt(0)] = 0.05  # Sinkhorn entropic regularisation (official --epsilon)
    sinkhorn_iterations: Annotated[int, Ge(1)] = 3  # official --sinkhorn_iterations


@dataclass(kw_only=True)
class MemoryBankSpec(LossSpec):
    """Instance discrimination with a memory bank (:func:`cl_bench.losses.memory_bank.memory_bank_nce`)."""

    target: ClassVar[str] = "cl_bench.losses.memory_bank.memory_bank_nce"
    kind: ClassVar[str] = "memory_bank"
    inputs: ClassVar[frozenset[str]] = frozenset({"num_data", "partition"})

    tau: Temperature = 0.07  # the temperature (paper / official --nce-t)
    #: λ of the proximal term (paper §3.4: 30; the official code has none: 0)
    proximal_lambda: Annotated[float, Ge(0)] = 0.0


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

    scale: Scale = 20.0  # λ, the cosines' multiplier (bojone/CoSENT cosent.py: * 20)


@dataclass(kw_only=True)
class AnglESpec(LossSpec):
    """AnglE on scored pairs (:func:`cl_bench.losses.angle.angle`); defaults: ``angle_emb.angle_trainer``'s CLI."""

    target: ClassVar[str] = "cl_bench.losses.angle.angle"
    kind: ClassVar[str] = "scored_pair"

    cosine_w: Weight = 0.0  # weight of the CoSENT term over the pairs' cosines
    ibn_w: Weight = 1.0  # weight of the in-batch negatives term
    angle_w: Weight = 0.02  # weight of the angle term (angle difference in complex space)
    cosine_tau: Scale = 20.0  # scale of the cosine term (a multiplier, as the code's *_tau)
    ibn_tau: Scale = 20.0  # scale of the in-batch term (a multiplier)
    angle_tau: Scale = 20.0  # scale of the angle term (a multiplier)
    angle_pooling: AnglePooling = AnglePooling.sum  # sum | mean of the element-wise angle differences


@dataclass(kw_only=True)
class AnglENLISpec(LossSpec):
    """AnglE on (query, positive, negative) rows (:func:`cl_bench.losses.angle.angle_nli`); defaults:
    ``angle_emb.angle_trainer``'s CLI."""

    target: ClassVar[str] = "cl_bench.losses.angle.angle_nli"
    kind: ClassVar[str] = "triplet"

    cosine_w: Weight = 0.0  # weight of the CoSENT term over (q, p) = 1 and (q, n) = 0
    ibn_w: Weight = 1.0  # weight of CE(q → positives) in the in-batch term
    cln_w: Weight = 1.0  # weight of CE(q → positives ∪ negatives) in the in-batch term
    angle_w: Weight = 0.02  # weight of the angle term
    cosine_tau: Scale = 20.0  # scale of the cosine term (a multiplier, as the code's *_tau)
    ibn_tau: Scale = 20.0  # scale of the in-batch terms (a multiplier)
    angle_tau: Scale = 20.0  # scale of the angle term (a multiplier)
    angle_pooling: AnglePooling = AnglePooling.sum  # sum | mean of the element-wise angle differences


@dataclass(kw_only=True)
class SBERTTripletSpec(LossSpec):
    """Sentence-BERT's triplet objective (:func:`cl_bench.losses.sbert.sbert_triplet`)."""

    target: ClassVar[str] = "cl_bench.losses.sbert.sbert_triplet"
    kind: ClassVar[str] = "triplet"

    margin: Margin = 1.0  # ε, on Euclidean distances of unnormalised embeddings (SBERT: 1)


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

    tau: Temperature = 0.07  # the temperature (CERT/MoCo: 0.07)


@dataclass(kw_only=True)
class SNCSESpec(LossSpec):
    """SNCSE: InfoNCE plus the bidirectional margin loss on a soft negative (:func:`cl_bench.losses.sncse.sncse_loss`)."""

    target: ClassVar[str] = "cl_bench.losses.sncse.sncse_loss"
    kind: ClassVar[str] = "soft_negative"

    tau: Temperature = 0.05  # the InfoNCE temperature (--temp 0.05)
    alpha: float = 0.1  # the lower margin of the bidirectional margin loss (train_SNCSE.py)
    beta: float = 0.3  # the upper margin (>= alpha)
    bml_weight: float = 0.001  # lambda_, the margin loss's weight (BERT); 0.0005 for RoBERTa

    def check_combination(self) -> None:
        """``beta >= alpha``: the margin band runs from alpha to beta."""
        if self.beta < self.alpha:
            raise ValueError(f"loss.beta: must be >= loss.alpha, got alpha={self.alpha}, beta={self.beta}")


@dataclass(kw_only=True)
class NeighbourSpec(LossSpec):
    """QuickThoughts' neighbour classifier (:func:`cl_bench.losses.neighbour.neighbour_classification`)."""

    target: ClassVar[str] = "cl_bench.losses.neighbour.neighbour_classification"
    kind: ClassVar[str] = "neighbour"
    needs: ClassVar[Mapping[str, str]] = {"tau": "similarity=cosine"}

    #: dot = f(s)ᵀg(c) (the paper; no temperature) | cosine = cosine / tau (set loss.tau with it)
    similarity: Similarity = Similarity.dot
    tau: Temperature | None = None  # the temperature of similarity=cosine (null with dot)

    def check_combination(self) -> None:
        """``similarity=cosine`` divides by ``tau``, so it needs one."""
        if self.similarity == "cosine" and self.tau is None:
            raise ValueError("loss.tau: similarity=cosine needs a temperature")


@dataclass(kw_only=True)
class SGContrastiveSpec(LossSpec):
    """SG-BERT's and SG-OPT's objectives (:func:`cl_bench.losses.sg_opt.sg_contrastive_loss`; ``loss=sg_opt``, and
    ``loss=sg`` with ``objective: base``)."""

    target: ClassVar[str] = "cl_bench.losses.sg_opt.sg_contrastive_loss"
    kind: ClassVar[str] = "self_guided"

    #: base (SG-BERT, = loss=sg) | opt1 | opt2 | opt3 (SG-OPT, L_opt3): the paper's loss ablation
    objective: SGObjective = SGObjective.opt3
    tau: Temperature = 0.01  # T (paper; code --T 1e-2)


# ------------------------------------------------------------------------------------------------
# train.matryoshka_dims / _weights: Matryoshka wraps a loss of these kinds (cl_bench/losses/matryoshka.py)
# ------------------------------------------------------------------------------------------------
#: loss kinds whose tensor arguments are sentence embeddings (so a prefix of them is an embedding too)
EMBEDDING_KINDS = ("pair", "guided_pair", "scored_pair", "triplet")


#: a module-level rule: the annotations are read in this module's namespace (get_type_hints), as run_specs' are
_DISTINCT = Must(lambda v: len(set(v)) == len(v), "be distinct sizes")


@dataclass(kw_only=True)
class MatryoshkaKeys(Checked):
    """The Matryoshka keys, ``train.matryoshka_dims`` and ``train.matryoshka_weights``, declared here once: the run's
    ``train`` group has them (:class:`cl_bench.run_specs.TrainConfig` extends this), and
    :class:`cl_bench.losses.matryoshka.MatryoshkaLoss`, built from Python, runs their rules (``check()``)."""

    group: ClassVar[str] = "train"
    #: Matryoshka: the loss summed over these embedding prefix sizes (cl_bench/losses/matryoshka.py)
    matryoshka_dims: Annotated[list[Annotated[int, Ge(1)]], MinLen(1), _DISTINCT] | None = None
    #: one weight per size (null: 1 each)
    matryoshka_weights: list[Annotated[float, Ge(0)]] | None = None

    def check_combination(self) -> None:
        # without sizes the weights cannot act: the preflight's inert-key check says so
        if None not in (self.matryoshka_weights, self.matryoshka_dims) and \
                len(self.matryoshka_weights) != len(self.matryoshka_dims):
            raise ValueError(f"train.matryoshka_weights: one weight per size of train.matryoshka_dims "
                             f"({len(self.matryoshka_dims)}), got {len(self.matryoshka_weights)}")
