"""GISTEmbed's guided in-batch negative selection (Solatorio 2024, "GISTEmbed: Guided In-sample Selection of
Training Negatives"; sentence-transformers' ``GISTEmbedLoss``).

A frozen guide encoder scores the batch; a candidate column that the guide ranks at least as similar to the
anchor as the anchor's own positive is presumably a false negative (a paraphrase, a duplicate) and is left out
of the anchor's contrastive denominator. The result is a boolean mask of ignored columns that a ``pair`` loss
accepts as ``ignore=`` (:func:`cl_bench.losses.infonce.info_nce`).

The comparison is ``>=`` (sentence-transformers uses ``>``, with which an exact duplicate of the positive,
scored equal by the guide, stays a negative); the anchor's own positive is never ignored.
"""

from __future__ import annotations

import torch

from cl_bench.losses.similarity import cosine_similarity_matrix


def guided_ignore_mask(
    guide_anchors: torch.Tensor, guide_positives: torch.Tensor, guide_hard_negatives: torch.Tensor | None = None
) -> torch.Tensor:
    """The (N, N + K) columns each anchor ignores: candidates the guide scores >= the anchor's positive.

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
