"""IS-BERT: CNN shapes and padding, the JSD estimator against a naive computation, data, saving."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from cl_bench.augment.base import Augmentation
from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import validate, yaml_spec
from cl_bench.data.text import DataFileError
from cl_bench.losses.jsd import jsd_mi_loss
from cl_bench.methods.base import MethodContext
from cl_bench.methods.is_bert.modeling import CNN_WEIGHTS_FILE, ISBERT, NGramCNN
from cl_bench.models.encoder import build_encoder
from cl_bench.run_specs import TrainConfig
from cl_bench.train.loop import make_optimizer

SENTENCES = ["a man plays the guitar in the park", "the dog runs", "two children sit", "a red car"]


def _method(tiny_bert: Path, augmentation: Augmentation | None = None, **kwargs) -> ISBERT:
    encoder = build_encoder(str(tiny_bert), pooler="avg", max_length=16)
    context = MethodContext(
        encoder=encoder, loss=jsd_mi_loss, augmentation=None,
        model_name_or_path=str(tiny_bert),
    )
    return ISBERT(context, yaml_spec("method", "is_bert", channels=kwargs.pop("channels", 4), **kwargs))


# ------------------------------------------------------------------------------------------------
# The JSD estimator
# ------------------------------------------------------------------------------------------------
def naive_jsd_loss(local: list[torch.Tensor], global_: torch.Tensor) -> float:
    """E_neg − E_pos written out pair by pair; ``local[i]`` holds sentence i's real tokens only."""
    log2 = math.log(2.0)

    def softplus(z: float) -> float:
        return math.log1p(math.exp(z))

    positives, negatives = [], []
    for i, tokens in enumerate(local):
        for token in tokens:
            for j in range(len(local)):
                score = float(token @ global_[j])
                if i == j:
                    positives.append(log2 - softplus(-score))
                else:
                    negatives.append(softplus(score) - log2)
    return sum(negatives) / len(negatives) - sum(positives) / len(positives)


def test_jsd_equals_naive_computation_and_ignores_padding() -> None:
    gen = torch.Generator().manual_seed(0)
    lengths = [5, 2, 3]
    local = torch.randn(3, 5, 4, generator=gen)
    mask = torch.tensor([[1] * n + [0] * (5 - n) for n in lengths])
    global_ = torch.randn(3, 4, generator=gen)
    scores = torch.einsum("btd,jd->btj", local, global_)
    expected = naive_jsd_loss([local[i, :n] for i, n in enumerate(lengths)], global_)
    assert float(jsd_mi_loss(scores, mask)) == pytest.approx(expected, rel=1e-5)
    garbage = scores.clone()
    garbage[mask == 0] = 1e4  # scores at padded positions must not matter
    assert float(jsd_mi_loss(garbage, mask)) == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="at least 2 sentences"):
        jsd_mi_loss(scores[:1, :, :1], mask[:1])


def test_jsd_rewards_matching_local_and_global() -> None:
    # Aligned features (each sentence's tokens point along its own global vector) score better.
    global_ = torch.eye(3) * 3
    aligned = global_.unsqueeze(1).repeat(1, 4, 1)
    mask = torch.ones(3, 4)
    good = jsd_mi_loss(torch.einsum("btd,jd->btj", aligned, global_), mask)
    bad = jsd_mi_loss(torch.einsum("btd,jd->btj", aligned.roll(1, dims=0), global_), mask)
    assert float(good) < float(bad)


# ------------------------------------------------------------------------------------------------
# CNN and encoder
# ------------------------------------------------------------------------------------------------
def test_cnn_shapes_activation_and_zero_padding() -> None:
    torch.manual_seed(0)
    states = torch.randn(2, 6, 8)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    relu = NGramCNN(8, channels=5, kernel_sizes=[1, 3, 5], activation="relu")
    out = relu(states, mask)
    assert out.shape == (2, 6, 15) and relu.output_size == 15
    assert (out >= 0).all() and torch.equal(out[1, 3:], torch.zeros(3, 15))
    linear = NGramCNN(8, channels=5, kernel_sizes=[1, 3, 5], activation="none")
    assert (linear(states, mask) < 0).any()  # the official code's variant has no nonlinearity
    # The short sentence alone (no padding) gives the same features as inside the padded batch.
    alone = relu(states[1:, :3], mask[1:, :3])
    torch.testing.assert_close(alone[0], out[1, :3])
    # the window sizes' rule is the spec's, declared on its field
    with pytest.raises(ValueError, match=r"method.kernel_sizes: must be odd positive window sizes \('same' padding\), got \[2\]"):
        yaml_spec("method", "is_bert", kernel_sizes=[2])
    with pytest.raises(ValueError, match="method.activation"):
        yaml_spec("method", "is_bert", activation="tanh")


def test_sentence_embedding_is_the_masked_mean_and_padding_free(tiny_bert: Path) -> None:
    method = _method(tiny_bert)
    encoder = method.encoder
    assert encoder.hidden_size == 12  # 4 channels × 3 window sizes
    batched = encoder.encode(SENTENCES, batch_size=4)
    one_by_one = [encoder.encode([s], batch_size=1)[0] for s in SENTENCES]
    assert batched.shape == (4, 12)
    for row, single in zip(batched, one_by_one, strict=True):
        assert torch.allclose(torch.from_numpy(row), torch.from_numpy(single), atol=1e-5)
    encoder.eval()
    features = encoder.tokenize(SENTENCES)
    outputs = encoder.token_states(features)
    local = encoder.local_features(outputs, features["attention_mask"])
    n = int(features["attention_mask"][1].sum())
    torch.testing.assert_close(encoder.pool_outputs(outputs, features["attention_mask"])[1], local[1, :n].mean(0))


@pytest.mark.parametrize("discriminator", ["dot", "mlp_dot"])
def test_training_step_updates_bert_cnn_and_discriminator(tiny_bert: Path, discriminator: str) -> None:
    torch.manual_seed(0)
    method = _method(tiny_bert, discriminator=discriminator, discriminator_size=6)
    before = {n: p.detach().clone() for n, p in method.named_parameters()}
    optimizer = make_optimizer(method, _train_cfg())
    method.train()
    terms = method.training_step(SENTENCES)
    assert torch.isfinite(terms["loss"]) and float(terms["mi_jsd"]) == pytest.approx(-float(terms["loss"].detach()))
    terms["loss"].backward()
    optimizer.step()
    changed = {n for n, p in method.named_parameters() if not torch.equal(p, before[n])}
    assert "encoder.cnn.convs.1.weight" in changed
    assert "encoder.backbone.encoder.layer.1.output.dense.weight" in changed
    assert any(n.startswith("discriminator.") for n in changed) == (discriminator == "mlp_dot")
    scores = method.scores(torch.randn(4, 7, 12), torch.randn(4, 12))
    assert scores.shape == (4, 7, 4)


def _train_cfg() -> TrainConfig:
    return TrainConfig(lr=1e-2, weight_decay=0.01, adam_beta1=0.9, adam_beta2=0.999, adam_eps=1e-7)


def test_save_writes_cnn_weights_that_reproduce_the_embeddings(tiny_bert: Path, tmp_path: Path) -> None:
    method = _method(tiny_bert)
    method.encoder.save(tmp_path / "best", {"step": 3})
    meta = json.loads((tmp_path / "best" / "cl_bench_encoder.json").read_text())
    assert meta["is_bert_cnn"] == {"kernel_sizes": [1, 3, 5], "channels": 4, "activation": "relu", "weights": CNN_WEIGHTS_FILE}
    reloaded = _method(tmp_path / "best")
    reloaded.encoder.cnn.load_state_dict(torch.load(tmp_path / "best" / CNN_WEIGHTS_FILE, weights_only=True))
    torch.testing.assert_close(
        torch.from_numpy(reloaded.encoder.encode(SENTENCES)), torch.from_numpy(method.encoder.encode(SENTENCES))
    )
    # evaluation (mode=eval, cl-bench-export's check) rebuilds the CNN encoder from the folder alone,
    # whatever pooler is asked for: scoring the bare backbone would be another model
    evaluated = build_encoder(str(tmp_path / "best"), pooler="cls", fresh_mlp=False)
    assert type(evaluated).__name__ == "ISBERTEncoder" and evaluated.hidden_size == 12
    torch.testing.assert_close(
        torch.from_numpy(evaluated.encode(SENTENCES)), torch.from_numpy(method.encoder.encode(SENTENCES))
    )
    # training from the folder starts from its backbone, as from any checkpoint
    assert type(build_encoder(str(tmp_path / "best"), pooler="avg")).__name__ == "SentenceEncoder"


# ------------------------------------------------------------------------------------------------
# Data and configs
# ------------------------------------------------------------------------------------------------
def test_reads_distinct_nli_sentences(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    method = _method(tiny_bert, snli_splits=["dev", "test"])
    sentences = method.read_corpus(str(data_dir / "nli" / "snli_senteval" / "s1.dev.gz"))
    assert len(sentences) == len(set(sentences)) == 25741
    assert sentences[0] == "Two women are embracing while holding to go packages ."
    dev_only = _method(tiny_bert, snli_splits=None).read_corpus(str(data_dir / "nli" / "snli_senteval" / "s2.dev.gz"))
    assert 0 < len(dev_only) < len(sentences)
    triples = method.read_corpus(str(data_dir / "nli" / "snli_devtest_triples_for_simcse.csv.gz"))
    assert len(triples) == len(set(triples)) and "Two woman are holding packages ." in triples
    tsv = tmp_path / "nli_sentences.train.gz"
    with gzip.open(tsv, "wt", encoding="utf-8") as handle:
        handle.write("a man sleeps\tsnli\na dog barks\tmnli\na man sleeps\tsnli\n\n")
    assert method.read_corpus(str(tsv)) == ["a man sleeps", "a dog barks"]
    with pytest.raises(DataFileError, match=r"s1\.nope\.gz: SentEval SNLI file not found \(split 'nope'\)"):
        _method(tiny_bert, snli_splits=["nope"]).read_corpus(str(data_dir / "nli" / "snli_senteval" / "s1.dev.gz"))


def test_preset_composes_and_validates(tiny_bert: Path, data_dir: Path) -> None:
    import os

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=is_bert", f"model.name_or_path={tiny_bert}"])
    validate(cfg)
    assert cfg.method.kernel_sizes == [1, 3, 5] and cfg.method.channels == 256 and cfg.method.activation == "relu"
    assert cfg.train.lr == 2e-6 and cfg.train.adam_eps == 1e-7 and cfg.train.batch_size == 32
    assert cfg.train.adam_bias_correction is False and cfg.train.select_metric == "stsb_dev_max_similarity"
    assert cfg.model.max_length == 128 and cfg.data.name == "nli_sentences"


@pytest.mark.slow
def test_short_real_run_from_minilm(data_dir: Path, tmp_path: Path) -> None:
    from conftest import cl_bench_process as _cl_bench
    from conftest import minilm_path

    _cl_bench(
        [
            "experiment=is_bert", f"model.name_or_path={minilm_path()}", "model.max_length=32", "data.limit=128",
            "train.lr=2e-5", "train.max_steps=3", "train.eval_steps=0", "train.progress_bar=false", "train.num_threads=2",
            "eval.tasks=[stsb]", "eval.align_uniform=false", "eval.anisotropy=false", "hydra.run.dir=run",
        ],
        tmp_path, data_dir,
    )
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert -100 <= results["sts/stsb"] <= 100 and math.isfinite(results["select/best_stsb_dev_max_similarity"])
    losses = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(math.isfinite(v) for m in losses for k, v in m.items() if k.startswith("train/loss"))
    assert (tmp_path / "run" / "best_model" / CNN_WEIGHTS_FILE).is_file()
