"""cl-bench's losses against sentence-transformers' own loss classes, float64, loss and every gradient (≤ 1e-10).

The reference classes take a model and tokenized columns; a stub module stands in for the model: its "features"
are row numbers into a table of embeddings (a leaf tensor), so the reference loss sees exactly the embeddings
cl-bench's loss is given, and the gradients both put on that table are compared.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import torch
from torch import nn

from cl_bench.losses.matryoshka import MatryoshkaLoss

# the dev extra: a missing package fails these tests (never skips them)
from sentence_transformers.sentence_transformer import losses as st_losses

TOLERANCE = {"rtol": 0.0, "atol": 1e-10}


class TableModel(nn.Module):
    """A stand-in for a SentenceTransformer: ``features["row"]`` picks rows of a fixed embedding table."""

    def __init__(self, table: torch.Tensor, tokenizer: object | None = None, max_seq_length: int = 16) -> None:
        super().__init__()
        self.table = table
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length

    def forward(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"sentence_embedding": self.table[features["row"]]}

    def get_embedding_dimension(self) -> int:
        return int(self.table.shape[1])


def table(rows: int, width: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, width, generator=g, dtype=torch.float64) * 2).requires_grad_(True)


def columns(n: int, count: int) -> list[dict[str, torch.Tensor]]:
    """``count`` columns of ``n`` rows: column c is rows c·n … c·n + n − 1 of the table."""
    return [{"row": torch.arange(c * n, (c + 1) * n)} for c in range(count)]


def assert_same_loss_and_gradients(
    ours: Callable[[torch.Tensor], torch.Tensor], reference: Callable[[torch.Tensor], torch.Tensor], weights: torch.Tensor
) -> tuple[float, float]:
    """Both losses of the same embedding table, and their gradients on it, equal within 1e-10."""
    ours_loss = ours(weights)
    (ours_grad,) = torch.autograd.grad(ours_loss, weights)
    reference_loss = reference(weights)
    (reference_grad,) = torch.autograd.grad(reference_loss, weights)
    assert ours_loss.dtype == reference_loss.dtype == torch.float64
    torch.testing.assert_close(ours_loss, reference_loss, **TOLERANCE)
    torch.testing.assert_close(ours_grad, reference_grad, **TOLERANCE)
    assert ours_grad.abs().max() > 0
    return float(ours_loss.detach()), float(reference_loss.detach())


# ----------------------------------------------------------------------------------------------------- Matryoshka


@pytest.mark.parametrize("weights", [None, [1.0, 0.5, 0.25]])
@pytest.mark.parametrize("hard_negatives", [False, True])
def test_matryoshka_over_infonce_is_matryoshka_over_mnrl(weights: list[float] | None, hard_negatives: bool) -> None:
    from cl_bench.losses.infonce import info_nce

    n, width, dims = 5, 8, [8, 4, 2]
    count = 3 if hard_negatives else 2
    weights_table = table(count * n, width, seed=0)

    def ours(t: torch.Tensor) -> torch.Tensor:
        return MatryoshkaLoss(functools.partial(info_nce, tau=0.05), dims, weights)(*t.split(n))

    def reference(t: torch.Tensor) -> torch.Tensor:
        model = TableModel(t)
        loss = st_losses.MatryoshkaLoss(model, st_losses.MultipleNegativesRankingLoss(model, scale=20.0), dims, weights)
        return loss(columns(n, count), None)

    assert_same_loss_and_gradients(ours, reference, weights_table)


@pytest.mark.parametrize("margin", [5.0, 1.0])
def test_matryoshka_over_the_sbert_triplet_loss_is_matryoshka_over_triplet_loss(margin: float) -> None:
    """Prefixes are re-normalised: with the Euclidean triplet loss the value depends on it (slicing alone differs)."""
    from cl_bench.losses.sbert import sbert_triplet

    n, width, dims = 6, 8, [8, 6, 2]
    weights_table = table(3 * n, width, seed=1)

    def ours(t: torch.Tensor) -> torch.Tensor:
        return MatryoshkaLoss(functools.partial(sbert_triplet, margin=margin), dims)(*t.split(n))

    def reference(t: torch.Tensor) -> torch.Tensor:
        model = TableModel(t)
        return st_losses.MatryoshkaLoss(model, st_losses.TripletLoss(model, triplet_margin=margin), dims)(
            columns(n, 3), None)

    ours_value, _ = assert_same_loss_and_gradients(ours, reference, weights_table)
    sliced_only = sum(sbert_triplet(*(x[:, :d] for x in weights_table.split(n)), margin=margin) for d in dims)
    assert abs(float(sliced_only) - ours_value) > 0.1  # the check would catch slicing without re-normalising
