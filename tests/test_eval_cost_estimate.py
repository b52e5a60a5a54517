"""The final evaluation's cost estimate: measured throughput on length-sorted batches, one-time costs left
out, per-call costs counted once, the embedding cache accounted for (a fake encoder on a fake clock)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from cl_bench.eval.suite import ESTIMATE_BATCHES, announce_cost, padded_chars
from cl_bench.models.inference import EncodingSettings, current_settings, encoding

ONE_TIME = 500.0  # an ONNX export on the first call
PER_CALL = 3.0  # hashing the weights, tokenizer set-up: every call, once
PER_PADDED_CHAR = 1e-4


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def length_sorted_batches(sentences: Sequence[str], batch_size: int) -> list[list[str]]:
    ordered = sorted(dict.fromkeys(sentences), key=len)
    return [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]


class FakeEncoder:
    """Costs what a real encoder's call costs: the first call's one-time work, a fixed cost per call and
    work per padded character of its length-sorted batches; records whether each call could use the cache."""

    def __init__(self, clock: FakeClock, in_cache: bool = False) -> None:
        self.clock, self.in_cache = clock, in_cache
        self.calls: list[tuple[int, bool]] = []

    def cost(self, sentences: Sequence[str], batch_size: int) -> float:
        return PER_CALL + PER_PADDED_CHAR * padded_chars(length_sorted_batches(sentences, batch_size))

    def encode(self, sentences: Sequence[str], batch_size: int) -> np.ndarray:
        self.clock.now += self.cost(sentences, batch_size) + (0.0 if self.calls else ONE_TIME)
        self.calls.append((len(sentences), current_settings().cache))
        return np.zeros((len(sentences), 4), dtype=np.float32)

    def cached(self, sentences: Sequence[str]) -> bool:
        return self.in_cache and current_settings().cache


def sentences_with_a_long_tail(count: int) -> list[str]:
    rng = random.Random(0)
    lengths = [int(rng.lognormvariate(4.0, 0.6)) + 1 for _ in range(count)]  # a few very long sentences
    return [f"{i} " + "x" * length for i, length in enumerate(lengths)]


@pytest.mark.parametrize("batch_size", [128, 16])
def test_the_estimate_is_the_measured_cost_of_the_sorted_batches(batch_size: int) -> None:
    sentences = sentences_with_a_long_tail(28_617)
    clock = FakeClock()
    encoder = FakeEncoder(clock)
    with encoding(EncodingSettings(cache=True)):
        estimate = announce_cost(encoder, sentences, batch_size, ["sts"], clock=clock)
    actual = FakeEncoder(FakeClock()).cost(sentences, batch_size)
    assert estimate == pytest.approx(actual, rel=0.03)  # the one-time cost and repeated per-call costs left out
    # a random sample's batches pad to their random longest sentence: what the estimate used to time
    shuffled = random.Random(1).sample(sentences, len(sentences))
    random_batches = [shuffled[i : i + batch_size] for i in range(0, len(shuffled), batch_size)]
    assert PER_PADDED_CHAR * padded_chars(random_batches) > 1.5 * actual
    # warm-up, one-sentence call, the sample: a few percent of the work, never through the cache
    assert [cache for _, cache in encoder.calls] == [False, False, False]
    assert encoder.calls[-1][0] == ESTIMATE_BATCHES * batch_size


def test_a_cached_evaluation_is_estimated_at_zero_without_encoding() -> None:
    clock = FakeClock()
    encoder = FakeEncoder(clock, in_cache=True)
    with encoding(EncodingSettings(cache=True)):
        assert announce_cost(encoder, sentences_with_a_long_tail(5_000), 128, ["stsb"], clock=clock) == 0.0
    assert encoder.calls == [] and clock.now == 0.0
    with encoding(EncodingSettings(cache=False)):  # eval.cache=false: it will encode, so it is timed
        assert announce_cost(encoder, sentences_with_a_long_tail(5_000), 128, ["stsb"], clock=clock) > 0


def test_a_set_of_a_few_batches_is_not_timed() -> None:
    clock = FakeClock()
    encoder = FakeEncoder(clock)
    assert announce_cost(encoder, sentences_with_a_long_tail(2 * ESTIMATE_BATCHES * 128), 128, ["stsb"], clock=clock) is None
    assert encoder.calls == []
