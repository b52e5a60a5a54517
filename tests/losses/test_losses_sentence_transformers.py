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
from conftest import as_built

# the dev extra: a missing package fails these tests (never skips them)
from sentence_transformers.sentence_transformer import losses as st_losses
from torch import nn

from cl_bench.losses.matryoshka import MatryoshkaLoss

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

    def _get_untruncated_embedding_dimension(self) -> int:  # what MatryoshkaLoss reads from sentence-transformers 6.3
        return self.get_embedding_dimension()


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
        return MatryoshkaLoss(as_built(info_nce, tau=0.05), dims, weights)(*t.split(n))

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
    assert abs(float(sliced_only.detach()) - ours_value) > 0.1  # the check would catch slicing without re-normalising


# ------------------------------------------------------------------------------------------------------ GISTEmbed


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> object:
    """A tiny WordPiece tokenizer built offline: GISTEmbedLoss needs both models to carry a transformers tokenizer
    (the same vocabulary: it then hands the guide the model's own features)."""
    from transformers import BertTokenizerFast

    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    return BertTokenizerFast(vocab_file=str(vocab))


def guide_table(n: int, columns_count: int, width: int = 6) -> torch.Tensor:
    """Guide embeddings with false negatives (a planted near-duplicate of a positive), ties (another anchor equal to
    a positive; a hard negative equal to its positive; an anchor equal to its positive, which ties with the anchor
    itself) and clear negatives."""
    g = torch.Generator().manual_seed(7)
    anchors = torch.randn(n, width, generator=g, dtype=torch.float64)
    positives = anchors + 0.3 * torch.randn(n, width, generator=g, dtype=torch.float64)
    positives[0] = anchors[0]                        # the guide scores positive 0 as anchor 0 itself (a tie with a_0)
    positives[3] = positives[2] + 1e-3               # a near-duplicate: a false negative of row 2 (and row 3)
    anchors[5] = positives[4]                        # row 4's anchor-anchor block: a_5 ties with p_4
    parts = [anchors, positives]
    if columns_count == 3:
        negatives = torch.randn(n, width, generator=g, dtype=torch.float64)
        negatives[1] = positives[1]                  # a tie with row 1's positive
        negatives[4] = anchors[4] + 0.01 * torch.randn(width, generator=g, dtype=torch.float64)  # a false negative
        parts.append(negatives)
    return torch.cat(parts)


@pytest.mark.parametrize("hard_negatives", [True, False])
@pytest.mark.parametrize(("contrast_anchors", "contrast_positives"), [(True, True), (False, True), (True, False), (False, False)])
@pytest.mark.parametrize("tau", [0.01, 0.05])
def test_gist_is_gistembedloss(word_tokenizer: object, hard_negatives: bool, contrast_anchors: bool,
                               contrast_positives: bool, tau: float) -> None:
    from cl_bench.losses.gist import gist_embed

    n, count = 6, 3 if hard_negatives else 2
    weights_table = table(count * n, 8, seed=2)
    guide = guide_table(n, count)

    def ours(t: torch.Tensor) -> torch.Tensor:
        return as_built(gist_embed)(*t.split(n), guide=guide.split(n), tau=tau, contrast_anchors=contrast_anchors,
                          contrast_positives=contrast_positives)

    def reference(t: torch.Tensor) -> torch.Tensor:
        loss = st_losses.GISTEmbedLoss(TableModel(t, word_tokenizer), TableModel(guide, word_tokenizer), temperature=tau,
                                       contrast_anchors=contrast_anchors, contrast_positives=contrast_positives)
        assert not loss.must_retokenize
        return loss(columns(n, count), None)

    assert_same_loss_and_gradients(ours, reference, weights_table)
    # the guide acted; and the tie rule matters: a_5 ties with p_4 in row 4's anchor-anchor block, the reference
    # keeps it (>), >= drops it (seen on a table where a_5 is a_4, so the kept candidate weighs in the softmax)
    kwargs = {"tau": tau, "contrast_anchors": contrast_anchors, "contrast_positives": contrast_positives}
    unguided = gist_embed(*weights_table.split(n), guide=weights_table.detach().split(n), drop_ties=False, **kwargs)
    assert not torch.isclose(ours(weights_table), unguided)
    if contrast_anchors:
        tied = weights_table.detach().clone()
        tied[5] = tied[4]
        kept, dropped = (gist_embed(*tied.split(n), guide=guide.split(n), drop_ties=drop, **kwargs) for drop in (False, True))
        assert not torch.isclose(kept, dropped)


def test_gist_defaults_are_the_references() -> None:
    import inspect

    from cl_bench.losses.specs import GISTEmbedSpec

    ours = GISTEmbedSpec(name="gist")  # the spec's defaults are the loss's (its YAML sets none)
    reference = inspect.signature(st_losses.GISTEmbedLoss.__init__).parameters
    assert ours.tau == reference["temperature"].default == 0.01
    for key in ("contrast_anchors", "contrast_positives"):
        assert getattr(ours, key) is reference[key].default is True
    assert ours.drop_ties is False and reference["margin"].default == 0.0
    assert reference["margin_strategy"].default == "absolute"


def test_gist_with_its_switches_off_is_guided_supervised_simcse() -> None:
    """loss=gist loss.tau=0.05 loss.contrast_anchors=false loss.contrast_positives=false loss.drop_ties=true equals
    loss=infonce with the guide's mask (guided supervised SimCSE), loss and gradients."""
    from cl_bench.losses.gist import gist_embed, guided_ignore_mask
    from cl_bench.losses.infonce import info_nce

    n = 6
    weights_table = table(3 * n, 8, seed=3)
    guide = guide_table(n, 3).split(n)

    def gist_off(t: torch.Tensor) -> torch.Tensor:
        return gist_embed(*t.split(n), guide=guide, tau=0.05, contrast_anchors=False, contrast_positives=False,
                          drop_ties=True)

    def guided_simcse(t: torch.Tensor) -> torch.Tensor:
        return as_built(info_nce)(*t.split(n), tau=0.05, ignore=guided_ignore_mask(*guide))

    assert_same_loss_and_gradients(gist_off, guided_simcse, weights_table)


# ------------------------------------------------------------------------------------------------ CoSENT and AnglE


SCORES = torch.tensor([0.2, 0.76, 0.0, 1.0, 0.4, 0.76, 0.92], dtype=torch.float64)  # ties and a zero included


@pytest.mark.parametrize("scale", [20.0, 5.0])
def test_cosent_is_cosentloss(scale: float) -> None:
    from cl_bench.losses.cosent import cosent

    n = SCORES.shape[0]
    weights_table = table(2 * n, 8, seed=4)

    def ours(t: torch.Tensor) -> torch.Tensor:
        return cosent(*t.split(n), SCORES, scale=scale)

    def reference(t: torch.Tensor) -> torch.Tensor:
        return st_losses.CoSENTLoss(TableModel(t), scale=scale)(columns(n, 2), SCORES)

    assert_same_loss_and_gradients(ours, reference, weights_table)


@pytest.mark.parametrize("scale", [20.0, 5.0])
def test_the_angle_term_is_angleloss(scale: float) -> None:
    """sentence-transformers' AnglELoss is AnglE's angle term alone (CoSENT over the angle difference):
    ``loss=angle loss.ibn_w=0 loss.angle_w=1 loss.angle_tau=<scale>``."""
    from cl_bench.losses.angle import angle

    n = SCORES.shape[0]
    weights_table = table(2 * n, 8, seed=5)

    def ours(t: torch.Tensor) -> torch.Tensor:
        return as_built(angle)(*t.split(n), SCORES, cosine_w=0.0, ibn_w=0.0, angle_w=1.0, angle_tau=scale)

    def reference(t: torch.Tensor) -> torch.Tensor:
        return st_losses.AnglELoss(TableModel(t), scale=scale)(columns(n, 2), SCORES)

    assert_same_loss_and_gradients(ours, reference, weights_table)
