"""Token / feature / span cutoff: exactly the chosen tokens or features are zeroed, never special tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cl_bench.augment.cutoff import FeatureCutoff, SpanCutoff, TokenCutoff, encode_with_embedding_augmentation
from cl_bench.augment.specs import FeatureCutoffSpec, SpanCutoffSpec, TokenCutoffSpec
from cl_bench.config import yaml_spec
from cl_bench.models.encoder import build_encoder, special_tokens_mask

H = 40
# Three sentences: 12, 7 and 3 real tokens, [CLS] first and [SEP] last, right-padded to 12.
LENGTHS = [12, 7, 3]


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    embeddings = torch.randn(len(LENGTHS), max(LENGTHS), H, generator=gen) + 3.0  # no accidental zeros
    attention = torch.zeros(len(LENGTHS), max(LENGTHS), dtype=torch.long)
    special = torch.ones(len(LENGTHS), max(LENGTHS), dtype=torch.bool)  # padding counts as special
    for row, length in enumerate(LENGTHS):
        attention[row, :length] = 1
        special[row, 1 : length - 1] = False
    return embeddings, attention, special


def cutoff(cls: type, rate: float):
    """A cutoff class with its spec (its one key, ``rate``)."""
    spec = {TokenCutoff: TokenCutoffSpec, SpanCutoff: SpanCutoffSpec, FeatureCutoff: FeatureCutoffSpec}[cls]
    return cls(spec(rate=rate))


def content_count(row: int) -> int:
    return LENGTHS[row] - 2


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5, 0.9])
def test_token_cutoff_zeroes_exactly_int_rate_content_tokens(rate: float) -> None:
    embeddings, attention, special = batch()
    out, mask = cutoff(TokenCutoff, rate).augment_inputs(
        embeddings, attention, special, torch.Generator().manual_seed(1)
    )
    for row in range(len(LENGTHS)):
        zeroed = (out[row] == 0).all(dim=-1)
        assert int(zeroed.sum()) == int(content_count(row) * rate)
        assert not (zeroed & special[row]).any(), "special tokens and padding are never cut"
        # Cut tokens leave the attention mask; all other tokens are untouched.
        assert torch.equal(mask[row].bool(), attention[row].bool() & ~zeroed)
        torch.testing.assert_close(out[row][~zeroed], embeddings[row][~zeroed])


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5, 0.9])
def test_span_cutoff_zeroes_one_contiguous_span(rate: float) -> None:
    embeddings, attention, special = batch()
    for seed in range(10):
        out, mask = cutoff(SpanCutoff, rate).augment_inputs(
            embeddings, attention, special, torch.Generator().manual_seed(seed)
        )
        for row in range(len(LENGTHS)):
            zeroed = (out[row] == 0).all(dim=-1).nonzero().squeeze(1).tolist()
            assert len(zeroed) == int(content_count(row) * rate)
            if zeroed:
                assert zeroed == list(range(zeroed[0], zeroed[0] + len(zeroed))), "one contiguous span"
                assert zeroed[0] >= 1 and zeroed[-1] <= LENGTHS[row] - 2, "never [CLS]/[SEP]"
            assert int(mask[row].sum()) == LENGTHS[row] - len(zeroed)


@pytest.mark.parametrize("rate", [0.1, 0.25, 0.5])
def test_feature_cutoff_zeroes_the_same_dims_of_every_content_token(rate: float) -> None:
    embeddings, attention, special = batch()
    out, mask = cutoff(FeatureCutoff, rate).augment_inputs(
        embeddings, attention, special, torch.Generator().manual_seed(2)
    )
    assert torch.equal(mask, attention), "feature cutoff keeps the attention mask"
    chosen_per_row = []
    for row in range(len(LENGTHS)):
        zero = out[row] == 0
        content = ~special[row]
        dims = zero[content].all(dim=0)
        assert int(dims.sum()) == int(H * rate)
        assert torch.equal(zero[content], dims.expand(int(content.sum()), H)), (
            "same dimensions in every token"
        )
        torch.testing.assert_close(out[row][special[row]], embeddings[row][special[row]])  # specials intact
        chosen_per_row.append(dims)
    assert not all(torch.equal(chosen_per_row[0], d) for d in chosen_per_row[1:]), "drawn per sentence"


@pytest.mark.parametrize("cls", [TokenCutoff, SpanCutoff, FeatureCutoff], ids=lambda c: c.__name__)
def test_cutoff_is_deterministic_under_a_seed_and_identity_at_rate_zero(cls) -> None:
    embeddings, attention, special = batch()
    first = cutoff(cls, 0.4).augment_inputs(embeddings, attention, special, torch.Generator().manual_seed(7))
    again = cutoff(cls, 0.4).augment_inputs(embeddings, attention, special, torch.Generator().manual_seed(7))
    other = cutoff(cls, 0.4).augment_inputs(embeddings, attention, special, torch.Generator().manual_seed(8))
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other[0])
    identity = cutoff(cls, 0.0).augment_inputs(embeddings, attention, special, torch.Generator().manual_seed(7))
    assert torch.equal(identity[0], embeddings) and torch.equal(identity[1], attention)
    # The embeddings-only hook of the interface applies the same cut.
    only = cutoff(cls, 0.4).augment_embeddings(embeddings, attention, special, torch.Generator().manual_seed(7))
    assert torch.equal(only, first[0])


def test_cutoff_rate_is_validated() -> None:
    with pytest.raises(ValueError, match="augmentation.rate: must be in"):
        yaml_spec("augmentation", "token_cutoff", rate=1.0)


@pytest.fixture(scope="module")
def encoder(tiny_bert: Path):
    torch.manual_seed(0)
    return build_encoder(str(tiny_bert), pooler="avg", dropout=0.0).eval()


SENTENCES = [
    "a man plays the guitar in the street",
    "the dog runs",
    "two children ride bikes in the park today",
]


def test_encode_with_cutoff_changes_only_the_augmented_rows(encoder) -> None:
    features = encoder.tokenize(SENTENCES + SENTENCES)
    plain = encoder(features)
    zero_rate = encode_with_embedding_augmentation(
        encoder, features, cutoff(TokenCutoff, 0.0), 3, torch.Generator().manual_seed(0)
    )
    torch.testing.assert_close(zero_rate, plain)
    for augmentation in (cutoff(TokenCutoff, 0.5), cutoff(SpanCutoff, 0.5), cutoff(FeatureCutoff, 0.5)):
        z = encode_with_embedding_augmentation(
            encoder, features, augmentation, 3, torch.Generator().manual_seed(0)
        )
        torch.testing.assert_close(z[:3], plain[:3])
        assert not torch.allclose(z[3:], plain[3:])
    assert not encoder.backbone.embeddings._forward_hooks, "the hook is removed after the forward pass"


def test_encode_with_cutoff_acts_on_the_embedding_output_and_the_attention_mask(encoder) -> None:
    """Reference: zero the embedding-layer output by hand and pass the cut attention mask."""
    features = encoder.tokenize(SENTENCES + SENTENCES)
    span_cutoff = cutoff(SpanCutoff, 0.5)
    got = encode_with_embedding_augmentation(encoder, features, span_cutoff, 3, torch.Generator().manual_seed(4))

    special = special_tokens_mask(encoder.tokenizer, features["input_ids"])
    keep_tokens, keep_features = span_cutoff.sample_keep_masks(
        features["attention_mask"][3:], special[3:], encoder.hidden_size, torch.Generator().manual_seed(4)
    )
    keep = torch.cat(
        [torch.ones(3, *keep_features.shape[1:], dtype=torch.bool), keep_features & keep_tokens[..., None]]
    )
    mask = features["attention_mask"].clone()
    mask[3:] = mask[3:] * keep_tokens
    handle = encoder.backbone.embeddings.register_forward_hook(lambda m, a, out: out * keep)
    try:
        expected = encoder(dict(features, attention_mask=mask))
    finally:
        handle.remove()
    torch.testing.assert_close(got, expected)
    assert (mask[3:].sum(1) < features["attention_mask"][3:].sum(1)).all()


def test_encode_with_cutoff_backpropagates_into_the_embeddings(tiny_bert: Path) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="cls", dropout=0.1).train()
    features = encoder.tokenize(SENTENCES + SENTENCES)
    z = encode_with_embedding_augmentation(
        encoder, features, cutoff(TokenCutoff, 0.3), 3, torch.Generator().manual_seed(0)
    )
    z.sum().backward()
    grad = encoder.backbone.embeddings.word_embeddings.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
