"""GISTEmbed (Solatorio 2024, "GISTEmbed: Guided In-sample Selection of Training Negatives"; sentence-transformers'
``GISTEmbedLoss``): a frozen guide encoder scores the batch, and a candidate that the guide ranks more similar to
an anchor than the anchor's own positive is presumably a false negative (a paraphrase, a duplicate) and is left
out of that anchor's softmax.

Two ways to use the guide, both with ``method=simcse_sup method.guide=<encoder>``:

* ``loss=gist`` (:func:`gist_embed`, kind ``guided_pair``) is sentence-transformers' ``GISTEmbedLoss`` with its
  defaults: temperature 0.01; the candidates of anchor i are the positives, the other anchors
  (``contrast_anchors``), the other positives (``contrast_positives``) and the hard negatives, each block masked by
  the guide against the anchor's guide similarity to its positive; a candidate whose guide similarity *ties* the
  positive's stays (the reference's ``>``; ``drop_ties=true`` drops it). ``tests/losses/test_losses_sentence_transformers.py``
  checks it against ``GISTEmbedLoss`` itself (float64, loss and gradients). The reference's ``margin`` /
  ``margin_strategy`` are not offered (its default, margin 0, is what this computes).
* ``loss=infonce`` (simcse_sup's default loss) is *guided supervised SimCSE*, cl-bench's own variant: InfoNCE at
  ``loss.tau`` (0.05) over the positives and hard negatives only, with :func:`guided_ignore_mask` (``>=``: ties are
  dropped) as its ``ignore=`` mask. It equals ``loss=gist loss.tau=0.05 loss.contrast_anchors=false
  loss.contrast_positives=false loss.drop_ties=true``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import cosine_similarity_matrix


def guided_ignore_mask(
    guide_anchors: torch.Tensor, guide_positives: torch.Tensor, guide_hard_negatives: torch.Tensor | None = None
) -> torch.Tensor:
    """The (N, N + K) columns each anchor ignores in guided supervised SimCSE: candidates the guide scores >= the
    anchor's positive (the positive itself never).

    Args:
        guide_anchors: (N, G) the guide's embeddings of the anchors.
        guide_positives: (N, G) of the positives (column i is anchor i's positive).
        guide_hard_negatives: optional (K, G) of the hard negatives (the last K columns).
    """
    with torch.no_grad():
        columns = guide_positives if guide_hard_negatives is None else torch.cat([guide_positives, guide_hard_negatives])
        similarity = cosine_similarity_matrix(guide_anchors, columns)
        n = guide_anchors.shape[0]
        own = torch.diagonal(similarity[:, :n]).unsqueeze(1)
        ignore = similarity >= own
        ignore[:, :n] &= ~torch.eye(n, dtype=torch.bool, device=ignore.device)
    return ignore


def gist_embed(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    guide: Sequence[torch.Tensor],
    tau: float,
    contrast_anchors: bool,
    contrast_positives: bool,
    drop_ties: bool,
) -> torch.Tensor:
    """sentence-transformers' ``GISTEmbedLoss``: anchor i must pick positive i among the guide-filtered candidates.

    ``loss = mean_i CE([cos(a_i, P) | cos(a_i, A) | cos(p_i, P) | cos(a_i, H)] / tau, i)`` where every candidate
    whose guide similarity to the row's sentence exceeds the guide similarity ``g(a_i, p_i)`` is set to −∞
    (anchor i's own positive never is). The diagonals of the anchor–anchor and positive–positive blocks (a sentence
    against itself) are always −∞, as in sentence-transformers ≥ 6.3 (before, a self pair stayed when the guide
    scored the positive exactly as the anchor itself).

    Args:
        anchors, positives: (N, D); row i of each is a pair.
        hard_negatives: optional (K, D) extra candidates of every anchor.
        guide: the frozen guide's embeddings of the same sentences: (anchors, positives[, hard_negatives]).
        tau: temperature (> 0; the reference's default 0.01).
        contrast_anchors: include the anchor–anchor block (the reference's ``contrast_anchors``).
        contrast_positives: include the positive–positive block (row i: positive i against all positives).
        drop_ties: mask candidates whose guide similarity equals the positive's too (``>=``; the reference keeps
            them: ``>``).

    Returns:
        Scalar loss (at least float32).
    """
    guide = tuple(guide)
    if len(guide) != (2 if hard_negatives is None else 3):
        raise ValueError(f"loss: gist needs the guide's embeddings of every column ({2 if hard_negatives is None else 3}), "
                         f"got {len(guide)}")
    n = anchors.shape[0]
    with torch.no_grad():
        guide_a, guide_p = guide[0], guide[1]
        threshold = torch.diagonal(cosine_similarity_matrix(guide_a, guide_p)).unsqueeze(1)

        def false_negatives(rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
            similarity = cosine_similarity_matrix(rows, columns)
            return similarity >= threshold if drop_ties else similarity > threshold

        own = torch.eye(n, dtype=torch.bool, device=anchors.device)
        masks = [false_negatives(guide_a, guide_p).to(anchors.device) & ~own]
        if contrast_anchors:
            masks.append(false_negatives(guide_a, guide_a).to(anchors.device) | own)
        if contrast_positives:
            masks.append(false_negatives(guide_p, guide_p).to(anchors.device) | own)
        if hard_negatives is not None:
            masks.append(false_negatives(guide_a, guide[2]).to(anchors.device))
    blocks = [cosine_similarity_matrix(anchors, positives)]
    if contrast_anchors:
        blocks.append(cosine_similarity_matrix(anchors, anchors))
    if contrast_positives:
        blocks.append(cosine_similarity_matrix(positives, positives))
    if hard_negatives is not None:
        blocks.append(cosine_similarity_matrix(anchors, hard_negatives))
    logits = (torch.cat(blocks, dim=1) / tau).masked_fill(torch.cat(masks, dim=1), float("-inf"))
    return F.cross_entropy(logits, torch.arange(n, device=logits.device))
