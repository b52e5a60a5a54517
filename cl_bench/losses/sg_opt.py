"""Self-guided contrastive objectives of SG-BERT / SG-OPT (Kim, Yoo & Lee, ACL 2021, §3).

Notation of the paper: ``c_i`` is the (projected) [CLS] vector of sentence i from the tuned
BERT_T, ``h_i`` a (projected) layer view of the same sentence from the frozen BERT_F, and
``φ(u, v) = exp(cos(u, v) / τ)``. The base NT-Xent has four kinds of terms: (1) c_i–h_i
attraction, (2) c_i–c_j, (3) c_i–h_j and (4) h_i–h_j repulsion. The variants:

* ``base`` (SG): SimCLR's symmetric NT-Xent over the 2b vectors {c_i} ∪ {h_i}; each vector's
  partner is its positive, the other 2b−2 vectors its negatives; mean over the 2b anchors.
* ``opt1``: only the c_i are anchors, which drops the h-anchored terms and with them every h–h
  repulsion (4): ``−log φ(c_i,h_i) / (Σ_j φ(c_i,h_j) + Σ_{j≠i} φ(c_i,c_j))``.
* ``opt2``: ``opt1`` without the c_i–c_j repulsion (2): ``−log φ(c_i,h_i) / Σ_j φ(c_i,h_j)``.
* ``opt3`` (SG-OPT): every layer view h_{i,k} of sentence i is a positive of c_i, the views of
  the other sentences are the negatives:
  ``−1/(b·L) Σ_i Σ_k log φ(c_i,h_{i,k}) / (φ(c_i,h_{i,k}) + Σ_{m≠i} Σ_n φ(c_i,h_{m,n}))``.

These follow the paper's definitions. The official ``loss.py`` differs in two places that look
like bugs (protocols §2.3): its base loss builds 2b logit rows but only b labels, and its
``OPT2`` slices the negatives from column b, which drops one of the b−1 other h_j.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from cl_bench.losses.infonce import info_nce
from cl_bench.losses.ntxent import ntxent
from cl_bench.losses.similarity import contrast_pairs, cosine_logits, multi_positive_nce
from cl_bench.losses.specs import SGObjective  # the objectives of the paper's loss ablation


def sg_contrastive_loss(
    anchors: torch.Tensor,
    layer_views: torch.Tensor,
    sampled_layer: torch.Tensor,
    *,
    tau: float,
    objective: str,
) -> torch.Tensor:
    """The SG/SG-OPT contrastive loss for one batch.

    ``base`` is SimCLR's NT-Xent (:func:`~cl_bench.losses.ntxent.ntxent`), ``opt2`` one-sided
    InfoNCE (:func:`~cl_bench.losses.infonce.info_nce`); ``opt1`` and ``opt3`` use the shared
    pair structure of :mod:`cl_bench.losses.similarity`.

    Args:
        anchors: (b, D) projected c_i.
        layer_views: (b, L, D) all L projected layer views h_{i,k}.
        sampled_layer: (b,) the paper's layer sampler σ: the view index ``base``/``opt1``/``opt2``
            use for each sentence (``opt3`` uses every view).
        tau: temperature τ (> 0).
        objective: one of :data:`SGObjective`.

    Returns:
        Scalar float32 loss.
    """
    if objective not in list(SGObjective):
        raise ValueError(
            f"loss.objective: unknown SG objective '{objective}'; valid: {', '.join(SGObjective)}"
        )
    if layer_views.dim() != 3 or layer_views.shape[0] != anchors.shape[0]:
        raise ValueError(
            f"layer_views must be (b, L, D) matching anchors {tuple(anchors.shape)}, got {tuple(layer_views.shape)}"
        )
    if objective != "opt3":
        rows = torch.arange(layer_views.shape[0], device=layer_views.device)
        views = layer_views[rows, sampled_layer.to(layer_views.device)]
    else:
        views = layer_views
    if objective == "base":
        return ntxent(anchors, views, tau=tau)
    if objective == "opt2":
        return info_nce(anchors, views, tau=tau, hard_negative_alpha=1.0)  # no hard negatives: alpha unused
    if objective == "opt1":
        # c_i rows against all c_j and h_j columns; c_i itself is excluded, h_i is the positive.
        pairs = contrast_pairs(anchors, views, rows="anchors", columns="both")
        return multi_positive_nce(
            cosine_logits(pairs.rows, pairs.columns, tau), pairs.positive, pairs.negative
        )
    batch, num_views = views.shape[:2]
    logits = cosine_logits(anchors, views.reshape(batch * num_views, -1), tau)  # (b, b·L)
    owner = torch.arange(batch, device=anchors.device).repeat_interleave(num_views)
    own_views = torch.arange(batch, device=anchors.device).unsqueeze(1) == owner.unsqueeze(0)
    # Mean over the b·L positive pairs (c_i, h_{i,k}), each against the other sentences' views.
    return multi_positive_nce(logits, own_views, ~own_views)


def parameter_drift(
    tuned: Iterable[tuple[str, torch.Tensor]], frozen: Mapping[str, torch.Tensor]
) -> torch.Tensor:
    """SG-BERT's regularizer ``Σ ‖θ_T − θ_F‖²`` over the tuned parameters (float32).

    Args:
        tuned: ``(name, parameter)`` pairs of BERT_T that are trained.
        frozen: BERT_F's parameters by the same names.

    Raises:
        KeyError: naming a tuned parameter that BERT_F lacks.
    """
    total: torch.Tensor | None = None
    for name, param in tuned:
        if name not in frozen:
            raise KeyError(f"parameter '{name}' of the tuned encoder has no frozen counterpart")
        term = (param.float() - frozen[name].float()).pow(2).sum()
        total = term if total is None else total + term
    if total is None:
        raise ValueError("parameter_drift: no tuned parameter given")
    return total
