"""The single pooler implementation: which layers each pooler reads, and the MLP head's use."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cl_bench.models.encoder import build_encoder
from cl_bench.models.poolers import POOLERS, masked_mean, pool


def _states(batch: int = 3, tokens: int = 5, hidden: int = 4, layers: int = 4) -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(batch, tokens, hidden) for _ in range(layers)]


def test_masked_mean_ignores_padding() -> None:
    hidden = torch.tensor([[[1.0, 1.0], [3.0, 3.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.allclose(masked_mean(hidden, mask), torch.tensor([[2.0, 2.0]]))


@pytest.mark.parametrize("name", POOLERS)
def test_each_pooler_reads_the_documented_layers(name: str) -> None:
    states = _states()
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    index = torch.tensor([3, 1, 0])  # the prompt poolers' token (cl_bench/models/prompts.py locates it)
    out = pool(name, states[-1], mask, states, token_index=index)
    expected = {
        "mask": states[-1][torch.arange(3), index],
        "prompt_last": states[-1][torch.arange(3), index],
        "cls": states[-1][:, 0],
        "cls_before_pooler": states[-1][:, 0],
        "avg": masked_mean(states[-1], mask),
        "avg_top2": (masked_mean(states[-2], mask) + masked_mean(states[-1], mask)) / 2,
        # hidden_states[1] = first transformer layer (SimCSE >= 206d7ae), not the embeddings [0]
        "avg_first_last": (masked_mean(states[1], mask) + masked_mean(states[-1], mask)) / 2,
        "cls_avg": (states[-1][:, 0] + masked_mean(states[-1], mask)) / 2,  # [CLS] is inside the average too
        "last_token": states[-1][[0, 1, 2], [4, 2, 1]],  # the last 1 of each mask row
    }[name]
    assert torch.allclose(out, expected)


def test_first_last_can_use_the_embedding_layer() -> None:
    states = _states()
    mask = torch.ones(3, 5, dtype=torch.long)
    out = pool("avg_first_last", states[-1], mask, states, first_layer=0)
    assert torch.allclose(out, (masked_mean(states[0], mask) + masked_mean(states[-1], mask)) / 2)
    assert not torch.allclose(out, pool("avg_first_last", states[-1], mask, states, first_layer=1))


def test_cls_avg_is_angles_cls_avg_on_a_padded_batch(tiny_bert) -> None:
    """AnglE's ``cls_avg`` (angle_emb.utils.get_pooling, SeanLee97/AnglE 5155458), by hand in float64 on a tiny BERT:
    the last layer's [CLS] plus the sum of the states the attention mask keeps ([CLS] and [SEP] among them) divided
    by the mask's count, halved; a sentence's vector is the same alone and beside a longer one (padding ignored)."""
    from transformers import AutoModel

    sentences = ["a man plays the guitar on the stage tonight", "dogs run"]
    encoder = build_encoder(str(tiny_bert), pooler="cls_avg", dropout=0.0).double().eval()
    got = encoder.encode(sentences, batch_size=2)
    backbone = AutoModel.from_pretrained(str(tiny_bert)).double().eval()
    batch = encoder.tokenizer(sentences, padding=True, return_tensors="pt")
    assert batch["attention_mask"][1].sum() < batch["attention_mask"].shape[1]  # the second row is padded
    with torch.no_grad():
        last = backbone(**batch).last_hidden_state
    mask = batch["attention_mask"]
    rows = []
    for row in range(len(sentences)):
        kept = [last[row, position] for position in range(mask.shape[1]) if mask[row, position] == 1]
        rows.append((last[row, 0] + sum(kept) / len(kept)) / 2)
    expected = torch.stack(rows).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)  # encode returns float32
    alone = encoder.encode(sentences[1:], batch_size=1)
    np.testing.assert_allclose(alone[0], got[1], atol=1e-6, rtol=0)
    assert not np.allclose(got, build_encoder(str(tiny_bert), pooler="cls_before_pooler").encode(sentences), atol=1e-3)


def test_unknown_pooler_names_valid_ones() -> None:
    with pytest.raises(ValueError, match="valid: cls, cls_before_pooler"):
        pool("max", torch.zeros(1, 2, 3), torch.ones(1, 2))


def test_mlp_only_train_applies_mlp_in_training_only(tiny_bert) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="cls", mlp_only_train=True, dropout=0.0)
    features = encoder.tokenize(["a man plays the guitar", "the dog runs"])
    encoder.train()
    trained = encoder(features)
    encoder.eval()
    evaluated = encoder(features)
    raw = encoder.backbone(**features).last_hidden_state[:, 0]
    assert torch.allclose(evaluated, raw, atol=1e-6)
    assert torch.allclose(trained, torch.tanh(encoder.mlp.dense(raw)), atol=1e-6)


def test_saved_mlp_is_reloaded_as_the_cls_pooler(tiny_bert, tmp_path) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="cls", mlp_only_train=False)
    with torch.no_grad():
        encoder.mlp.dense.weight.add_(0.5)  # a "trained" head, different from the checkpoint's pooler
    encoder.save(tmp_path / "ckpt")
    reloaded = build_encoder(str(tmp_path / "ckpt"), pooler="cls", fresh_mlp=False)
    sentences = ["a man plays the guitar", "two dogs run in the park"]
    assert abs(encoder.encode(sentences) - reloaded.encode(sentences)).max() < 1e-5


def test_encode_keeps_input_order_and_dedupes(tiny_bert) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg")
    sentences = ["the dog runs fast", "a cat", "the dog runs fast", "people sit at a big table in the park"]
    batched = encoder.encode(sentences, batch_size=2)
    one_by_one = [encoder.encode([s])[0] for s in sentences]
    assert batched.shape == (4, encoder.hidden_size)
    assert abs(batched - np.stack(one_by_one)).max() < 1e-5
    assert (batched[0] == batched[2]).all()


def test_first_last_baseline_preset_averages_the_embedding_output(tiny_bert, data_dir) -> None:
    """experiment=bert_first_last_avg (SimCSE Table 5's baseline) reads hidden_states[0], not [1]."""
    import os

    from hydra import compose, initialize_config_dir

    from cl_bench.commands.cli import CONF_DIR
    from cl_bench.config import validate

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=bert_first_last_avg", f"model.name_or_path={tiny_bert}"])
    validate(cfg)
    assert (cfg.mode, cfg.pooler.name, cfg.pooler.first_layer) == ("eval", "avg_first_last", 0)
    encoder = build_encoder(str(tiny_bert), pooler=cfg.pooler.name, first_layer=cfg.pooler.first_layer, fresh_mlp=False)
    features = encoder.tokenize(["a small test sentence", "another one"])
    with torch.inference_mode():
        states = encoder.backbone(**features, output_hidden_states=True).hidden_states
        mask = features["attention_mask"]
        expected = (masked_mean(states[0], mask) + masked_mean(states[-1], mask)) / 2
        assert torch.allclose(encoder.eval()(features), expected, atol=1e-6)
        layer_one = (masked_mean(states[1], mask) + masked_mean(states[-1], mask)) / 2
        assert not torch.allclose(expected, layer_one, atol=1e-3)
