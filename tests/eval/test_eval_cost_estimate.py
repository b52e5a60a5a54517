"""The final evaluation's cost estimate: measured throughput on the evaluation's own length-sorted batches,
one-time costs left out, per-call costs counted once, the embedding cache accounted for (fake encoders on a
fake clock)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from cl_bench.eval.suite import ESTIMATE_BATCHES, announce_cost, padded_length
from cl_bench.models.inference import EncodingSettings, current_settings, encoding

ONE_TIME = 500.0  # an ONNX export on the first call
PER_CALL = 3.0  # hashing the weights, tokenizer set-up: every call, once
PER_PADDED_UNIT = 1e-4


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class CharEncoder:
    """Costs what a real encoder's call costs: the first call's one-time work, a fixed cost per call and
    work per padded unit of its length-sorted batches (here characters); records whether each call could
    use the cache."""

    def __init__(self, clock: FakeClock, in_cache: bool = False) -> None:
        self.clock, self.in_cache = clock, in_cache
        self.calls: list[tuple[int, bool]] = []

    def lengths(self, sentences: Sequence[str]) -> list[int]:
        return [len(text) for text in sentences]

    def cost(self, sentences: Sequence[str], batch_size: int) -> float:
        unique = list(dict.fromkeys(sentences))
        lengths = self.lengths(unique)
        order = sorted(range(len(unique)), key=lengths.__getitem__)
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        return PER_CALL + PER_PADDED_UNIT * padded_length(batches, lengths)

    def encode(self, sentences: Sequence[str], batch_size: int) -> np.ndarray:
        self.clock.now += self.cost(sentences, batch_size) + (0.0 if self.calls else ONE_TIME)
        self.calls.append((len(sentences), current_settings().cache))
        return np.zeros((len(sentences), 4), dtype=np.float32)

    def cached(self, sentences: Sequence[str], batch_size: int) -> bool:
        return self.in_cache and current_settings().cache


class TokenEncoder(CharEncoder):
    """Sorts and pays by tokens (here words), as a SentenceEncoder does, and tells its token counts."""

    def lengths(self, sentences: Sequence[str]) -> list[int]:
        return [len(text.split()) for text in sentences]

    def token_counts(self, sentences: Sequence[str]) -> list[int]:
        return self.lengths(sentences)


def sentences_with_a_long_tail(count: int) -> list[str]:
    """Words of 1-12 characters, a log-normal number of them: a few very long sentences, and characters
    that do not follow tokens."""
    rng = random.Random(0)
    return [
        " ".join(["w" * rng.randint(1, 12) for _ in range(int(rng.lognormvariate(2.5, 0.6)) + 1)]) + f" {i}"
        for i in range(count)
    ]


@pytest.mark.parametrize("encoder_class", [CharEncoder, TokenEncoder])
@pytest.mark.parametrize("batch_size", [128, 16])
def test_the_estimate_is_the_measured_cost_of_the_evaluations_batches(encoder_class: type, batch_size: int) -> None:
    sentences = sentences_with_a_long_tail(28_617)
    clock = FakeClock()
    encoder = encoder_class(clock)
    with encoding(EncodingSettings(cache=True)):
        estimate = announce_cost(encoder, sentences, batch_size, ["sts12", "stsb"], clock=clock)
    actual = encoder_class(FakeClock()).cost(sentences, batch_size)
    assert estimate == pytest.approx(actual, rel=0.03)  # the one-time cost and repeated per-call costs left out
    # warm-up, one-sentence call, the sample: a few percent of the work, never through the cache
    assert [cache for _, cache in encoder.calls] == [False, False, False]
    assert encoder.calls[-1][0] == ESTIMATE_BATCHES * batch_size


def test_batches_sorted_by_characters_misjudge_an_encoder_that_sorts_by_tokens() -> None:
    # why the estimate asks for token counts: sampled by characters, the batches pad to more tokens
    sentences = sentences_with_a_long_tail(5_383)
    by_chars = CharEncoder(FakeClock())  # no token_counts: the estimate sorts by characters
    by_chars.cost = TokenEncoder(FakeClock()).cost  # ...but the encoding costs tokens
    with encoding(EncodingSettings(cache=False)):
        misjudged = announce_cost(by_chars, sentences, 128, ["stsb"], clock=by_chars.clock)
        estimated = announce_cost(TokenEncoder(clock := FakeClock()), sentences, 128, ["stsb"], clock=clock)
    actual = TokenEncoder(FakeClock()).cost(sentences, 128)
    assert estimated == pytest.approx(actual, rel=0.03)
    assert misjudged > 1.1 * actual


def test_a_cached_evaluation_is_estimated_at_zero_without_encoding() -> None:
    clock = FakeClock()
    encoder = CharEncoder(clock, in_cache=True)
    with encoding(EncodingSettings(cache=True)):
        assert announce_cost(encoder, sentences_with_a_long_tail(5_000), 128, ["stsb"], clock=clock) == 0.0
    assert encoder.calls == [] and clock.now == 0.0
    with encoding(EncodingSettings(cache=False)):  # eval.cache=false: it will encode, so it is timed
        assert announce_cost(encoder, sentences_with_a_long_tail(5_000), 128, ["stsb"], clock=clock) > 0


def test_a_set_of_a_few_batches_is_not_timed() -> None:
    clock = FakeClock()
    encoder = CharEncoder(clock)
    assert announce_cost(encoder, sentences_with_a_long_tail(2 * ESTIMATE_BATCHES * 128), 128, ["stsb"], clock=clock) is None
    assert encoder.calls == []
