"""QuickThoughts mechanics: neighbour targets, the classifier loss, contiguous batches, f/g encoders."""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import minilm_path, run_cl_bench
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import validate, yaml_spec
from cl_bench.losses.infonce import cosine_logits
from cl_bench.losses.neighbour import neighbour_classification
from cl_bench.methods.base import MethodContext
from cl_bench.methods.quickthoughts.modeling import (
    CONTEXT_ENCODER_DIR,
    ConcatEncoder,
    QuickThoughts,
    neighbour_targets,
)
from cl_bench.models.encoder import build_encoder
from cl_bench.utils.rundir import ENCODER_META_FILE

SENTENCES = [
    "a man plays the guitar", "the dog runs in the park", "two children read a book",
    "a woman eats food", "the cat sits on the table", "people walk in the street", "the sun is red",
]


def make_qt(tiny_bert, similarity: str = "dot", tau: float | None = None, **kwargs) -> QuickThoughts:
    torch.manual_seed(0)
    encoder = build_encoder(str(tiny_bert), pooler="avg", max_length=16)
    loss = functools.partial(neighbour_classification, similarity=similarity, tau=tau)
    context = MethodContext(encoder=encoder, loss=loss, augmentation=None,
                            model_name_or_path=str(tiny_bert), max_length=16, seed=5, data={"name": "enwiki_sentences"})
    return QuickThoughts(context, yaml_spec("method", "quickthoughts", **kwargs))


@pytest.mark.parametrize("batch_size,context_size", [(2, 1), (5, 1), (6, 2), (4, 3)])
def test_targets_mark_exactly_the_neighbours(batch_size: int, context_size: int) -> None:
    targets = neighbour_targets(batch_size, context_size)
    for i in range(batch_size):
        neighbours = [j for j in range(batch_size) if j != i and abs(i - j) <= context_size]
        expected = torch.zeros(batch_size)
        expected[neighbours] = 1.0 / len(neighbours)
        torch.testing.assert_close(targets[i], expected)
    assert torch.all(targets.diagonal() == 0)


def test_targets_context_one_by_hand() -> None:
    expected = torch.tensor([
        [0.0, 1.0, 0.0, 0.0],
        [0.5, 0.0, 0.5, 0.0],
        [0.0, 0.5, 0.0, 0.5],
        [0.0, 0.0, 1.0, 0.0],
    ])
    torch.testing.assert_close(neighbour_targets(4, 1), expected)


def test_loss_is_soft_target_cross_entropy_without_the_diagonal() -> None:
    torch.manual_seed(0)
    scores = torch.randn(4, 4)
    targets = neighbour_targets(4, 1)
    by_hand = 0.0
    for i in range(4):
        others = [j for j in range(4) if j != i]
        log_z = torch.logsumexp(scores[i, others], 0)
        by_hand += -sum(targets[i, j] * (scores[i, j] - log_z) for j in others)
    # scores = inputs @ candidatesᵀ with identity candidates: the dot-product loss sees `scores` itself
    identity = torch.eye(4)
    loss = neighbour_classification(scores, identity, targets, similarity="dot", tau=None)
    assert loss.item() == pytest.approx(by_hand.item() / 4, rel=1e-5)
    changed = scores.clone()
    changed.fill_diagonal_(1e4)  # the sentence itself is not a candidate
    assert neighbour_classification(changed, identity, targets, similarity="dot", tau=None).item() == pytest.approx(loss.item(), rel=1e-6)


def test_batches_are_contiguous_runs_covering_the_corpus(tiny_bert) -> None:
    method = make_qt(tiny_bert)
    items = [f"sentence {i}" for i in range(23)]
    batches = list(method.batches(items, 5, torch.Generator().manual_seed(0)))
    assert len(batches) == method.num_batches(len(items), 5) == 5
    for batch in batches:
        numbers = [int(s.split()[1]) for s in batch]
        assert numbers == list(range(numbers[0], numbers[0] + len(batch)))
    assert sorted(s for b in batches for s in b) == sorted(items)
    first_numbers = [int(b[0].split()[1]) for b in batches]
    assert first_numbers != sorted(first_numbers)  # runs come in a seeded random order
    # A last run of one sentence has no neighbour: it is dropped, as num_batches counts.
    assert len(list(method.batches(items[:21], 5, torch.Generator()))) == method.num_batches(21, 5) == 4


def test_two_encoders_are_separate_one_encoder_shares(tiny_bert) -> None:
    two = make_qt(tiny_bert, encoders=2)
    assert two.context_encoder is not None
    assert {id(p) for p in two.encoder.parameters()}.isdisjoint(id(p) for p in two.context_encoder.parameters())
    two.train()
    terms = two.training_step(SENTENCES[:5])
    assert math.isfinite(terms["loss"].item()) and 0.0 <= terms["neighbour_accuracy"].item() <= 1.0
    terms["loss"].backward()
    assert two.encoder.backbone.embeddings.word_embeddings.weight.grad is not None
    assert two.context_encoder.backbone.embeddings.word_embeddings.weight.grad is not None
    one = make_qt(tiny_bert, encoders=1)
    assert one.context_encoder is None and one.candidate_encoder is one.encoder
    assert math.isfinite(one.training_step(SENTENCES[:4])["loss"].item())


def test_cosine_similarity_uses_loss_tau() -> None:
    from cl_bench.losses.neighbour import neighbour_scores

    a, b = torch.randn(3, 8), torch.randn(3, 8)
    torch.testing.assert_close(neighbour_scores(a, b, "cosine", 0.05), cosine_logits(a, b, 0.05))
    torch.testing.assert_close(neighbour_scores(a, b, "dot", None), a @ b.T)
    targets = neighbour_targets(3, 1)
    assert neighbour_classification(a, b, targets, similarity="cosine", tau=0.05).item() != pytest.approx(
        neighbour_classification(a, b, targets, similarity="dot", tau=None).item(), rel=1e-3)


def test_eval_embedding_concat_f_g(tiny_bert, tmp_path: Path) -> None:
    method = make_qt(tiny_bert, encoders=2, embedding="concat")
    with torch.no_grad():  # make g differ from f
        for p in method.context_encoder.parameters():
            p.add_(0.01)
    concat = method.eval_encoder()
    assert isinstance(concat, ConcatEncoder) and concat.hidden_size == 2 * method.encoder.hidden_size
    vectors = concat.encode(SENTENCES[:3], batch_size=2)
    f = method.encoder.encode(SENTENCES[:3])
    g = method.context_encoder.encode(SENTENCES[:3])
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, np.concatenate([f, g], axis=1), rtol=1e-5, atol=1e-6)
    assert make_qt(tiny_bert, embedding="f").eval_encoder() is not None
    only_g = make_qt(tiny_bert, embedding="g")
    assert only_g.eval_encoder() is only_g.context_encoder
    concat.save(tmp_path / "best", {"step": 3})
    meta = json.loads((tmp_path / "best" / ENCODER_META_FILE).read_text())
    assert meta["embedding"] == "concat" and meta["step"] == 3
    reloaded = build_encoder(str(tmp_path / "best" / CONTEXT_ENCODER_DIR), pooler="avg", fresh_mlp=False)
    np.testing.assert_allclose(reloaded.encode(SENTENCES[:3]), g, rtol=1e-5, atol=1e-5)


def test_bad_options_fail_with_the_key() -> None:
    with pytest.raises(ValueError, match="method.encoders"):
        yaml_spec("method", "quickthoughts", encoders=3)
    with pytest.raises(ValueError, match="method.embedding"):
        yaml_spec("method", "quickthoughts", embedding="sum")
    with pytest.raises(ValueError, match="loss.similarity"):
        neighbour_classification(torch.randn(2, 4), torch.randn(2, 4), neighbour_targets(2, 1), similarity="l2", tau=None)


# ----- preset and end-to-end run ----------------------------------------------------------------------
def test_quickthoughts_bert_preset_is_the_paper_recipe(tiny_bert, data_dir) -> None:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=quickthoughts_bert", f"model.name_or_path={tiny_bert}"])
    assert cfg.method._target_ == "cl_bench.methods.quickthoughts.modeling.QuickThoughts"
    assert (cfg.method.encoders, cfg.method.context_size, cfg.method.embedding, cfg.loss.similarity) == (2, 1, "concat", "dot")
    assert cfg.loss.name == "neighbour" and cfg.loss.tau is None
    assert (cfg.train.batch_size, cfg.model.max_length, cfg.data.name, cfg.train.eval_steps) == (400, 30, "enwiki_sentences", 0)
    validate(cfg)


@pytest.mark.slow
def test_real_short_quickthoughts_run_from_minilm(data_dir: Path, tmp_path: Path) -> None:
    """`cl-bench method=quickthoughts` from all-MiniLM-L6-v2 on real contiguous Wikipedia sentences."""
    _, metrics = run_cl_bench([
        "method=quickthoughts", "data=enwiki_sentences", "data.limit=2000", "pooler=avg",
        f"model.name_or_path={minilm_path()}", "train.batch_size=16", "train.max_steps=6", "train.eval_steps=3",
        "train.log_steps=1",
    ], data_dir, tmp_path)
    rows = [m for m in metrics if "train/loss" in m]
    assert all(math.isfinite(m["train/loss"]) and 0 <= m["train/neighbour_accuracy"] <= 1 for m in rows)
    meta = json.loads((tmp_path / "run" / "best_model" / "cl_bench_encoder.json").read_text())
    assert meta["embedding"] == "concat" and (tmp_path / "run" / "best_model" / CONTEXT_ENCODER_DIR).is_dir()
