"""The FLOP count the encoding benchmarks divide by their time (benchmarks/_common.py) equals torch's own
count of the encoder's matrix products, and the batches it counts are the ones ``encode`` pads."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import BertConfig, BertModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _common import BatchShapes, encoder_flops  # noqa: E402 (the benchmarks' shared module, not a package)

from cl_bench.models.encoder import build_encoder  # noqa: E402


def test_encoder_flops_equal_torch_flop_counter() -> None:
    config = BertConfig(vocab_size=50, hidden_size=48, num_hidden_layers=3, num_attention_heads=4, intermediate_size=80,
                        max_position_embeddings=64, attn_implementation="eager")
    model = BertModel(config, add_pooling_layer=False).eval()
    batches = [(3, 7), (2, 19)]
    counted = 0
    for rows, length in batches:
        ids = torch.randint(5, 50, (rows, length))
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
        counted += counter.get_total_flops()
    assert encoder_flops(config, batches) == counted


def test_batch_shapes_records_the_padded_batches_of_encode(tiny_bert: Path) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    shapes = BatchShapes(encoder)
    sentences = ["a dog", "the man plays the guitar", "a dog", "two children walking in the park"]
    encoder.encode(sentences, batch_size=2)
    lengths = sorted(encoder.token_counts(list(dict.fromkeys(sentences))))  # distinct sentences, length-sorted batches
    assert shapes.batches == [(2, lengths[1]), (1, lengths[2])]
    assert shapes.real_tokens == sum(lengths) and shapes.padded_tokens() == 2 * lengths[1] + lengths[2]
