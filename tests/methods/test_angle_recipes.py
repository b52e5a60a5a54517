"""AnglE's recipes: ``method.score_max`` feeds STS-B labels on AnglE's scale (raw 0-5) or SBERT's ([0, 1]),
``method.scored_pairs=nli`` reads NLI triples as AnglE's format-A pairs, ``method.loss_block`` averages per-block
losses (GPUs x accumulation steps) and trains with GradCache to the same loss and gradients, ``experiment=angle_nli``
is the official NLI command's objective, and the keys act or are rejected before any model loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from conftest import params_of
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import ConfigError, typed_specs, validate
from cl_bench.data.senteval import read_stsb_split
from cl_bench.losses.angle import angle
from cl_bench.train.loop import build_method


def compose_run(tiny_bert: Path, data_dir: Path, overrides: list[str]):  # noqa: ANN201
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*overrides, f"model.name_or_path={tiny_bert}", "paths.output_dir=out"])


@pytest.mark.parametrize("score_max", [1.0, 5.0])
def test_score_max_rescales_the_stsb_gold_scores(score_max: float, tiny_bert: Path, data_dir: Path) -> None:
    overrides = ["method=sbert", "loss=angle", "data=stsb_train", "data.limit=64", f"method.score_max={score_max}"]
    cfg = compose_run(tiny_bert, data_dir, overrides)
    validate(cfg, overrides)
    method = build_method(typed_specs(cfg), torch.device("cpu"))
    rows = method.read_corpus(cfg.data.train_file)
    gold = [float(g) for g in read_stsb_split(cfg.data.train_file).gold[:64]]
    if score_max == 5.0:  # AnglE's STS-B example: the raw gold scores, exactly
        assert [row[2] for row in rows] == gold
    else:  # SBERT's scale
        assert [row[2] for row in rows] == [g / 5.0 for g in gold]


def test_the_stsb_preset_is_the_readmes_stsb_example(tiny_bert: Path, data_dir: Path) -> None:
    """experiment=angle_stsb: AnglE's README STS-B example (raw 0-5 labels, cosine_w 1, ibn_w 1, angle_w 0.02, taus
    20, batch 32, lr 2e-5, no warm-up, 5 epochs, [CLS], max length 128, the last weights); its rows carry the raw
    gold scores."""
    overrides = ["experiment=angle_stsb", "data.limit=64"]
    cfg = compose_run(tiny_bert, data_dir, overrides)
    validate(cfg, overrides)
    assert cfg.method.name == "sbert" and cfg.loss.name == "angle" and cfg.method.score_max == 5.0
    assert (cfg.loss.cosine_w, cfg.loss.ibn_w, cfg.loss.angle_w) == (1.0, 1.0, 0.02)
    assert (cfg.loss.cosine_tau, cfg.loss.ibn_tau, cfg.loss.angle_tau) == (20.0, 20.0, 20.0)
    assert cfg.batch_size == 32 and cfg.train.lr == 2e-5 and cfg.train.epochs == 5 and cfg.train.warmup_ratio == 0.0
    assert cfg.pooler.name == "cls_before_pooler" and cfg.model.max_length == 128 and cfg.train.final_weights == "last"
    method = build_method(typed_specs(cfg), torch.device("cpu"))
    rows = method.read_corpus(cfg.data.train_file)
    assert [row[2] for row in rows] == [float(g) for g in read_stsb_split(cfg.data.train_file).gold[:64]]


def test_scored_pairs_nli_reads_format_a_pairs_and_the_preset_is_the_official_objective(
    tiny_bert: Path, data_dir: Path
) -> None:
    """experiment=angle_nli: (premise, entailment, 1) and (premise, contradiction, 0) pairs; the loss of a batch is
    AnglE's format A with ibn_w 30, cosine_w 0, angle_w 1, angle_tau 20, ibn_tau 20."""
    overrides = ["experiment=angle_nli", "data=nli_snli_devtest", "data.limit=4", "pooler=avg", "model.max_length=16",
                 "dropout=0"]
    cfg = compose_run(tiny_bert, data_dir, overrides)
    validate(cfg, overrides)
    assert params_of(cfg)["method.scored_pairs"] == "nli" and "method.score_max" not in params_of(cfg)
    assert cfg.loss.name == "angle" and cfg.batch_size == 16384 and cfg.train.gradcache_chunk == 128
    assert cfg.method.loss_block == 128 and cfg.pooler.name == "avg"  # (the preset's cls_before_pooler: overridden here)
    method = build_method(typed_specs(cfg), torch.device("cpu"))
    rows = method.read_corpus(cfg.data.train_file)
    from cl_bench.data.nli import read_nli_triples

    triples = read_nli_triples(cfg.data.train_file, limit=4)
    assert rows == [pair for p, e, c in triples for pair in ((p, e, 1.0), (p, c, 0.0))]
    method.train()
    loss = method.training_step(rows)["loss"]
    prepared = method.prepare(rows, method.rng)
    with torch.no_grad():
        u, v = method.encoder(prepared.features).split(prepared.size)
    expected = angle(u, v, torch.tensor([r[2] for r in rows]), cosine_w=0.0, ibn_w=30.0, angle_w=1.0,
                     cosine_tau=20.0, ibn_tau=20.0, angle_tau=20.0, angle_pooling="sum")
    torch.testing.assert_close(loss.detach(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["scored_pair", "triplet"])
def test_loss_block_is_the_mean_of_the_blocks_losses_and_gradcache_agrees(
    kind: str, tiny_bert: Path, data_dir: Path
) -> None:
    from cl_bench.train.gradcache import GradCache

    overrides = ["method=sbert", "data=nli_snli_devtest", "data.limit=4", "method.loss_block=3", "model.max_length=16",
                 "dropout=0", "pooler=avg"]
    overrides += ["loss=angle", "method.scored_pairs=nli"] if kind == "scored_pair" else ["loss=angle_nli"]
    cfg = compose_run(tiny_bert, data_dir, overrides)
    validate(cfg, overrides)
    method = build_method(typed_specs(cfg), torch.device("cpu")).to(torch.float64)
    method.train()
    rows = method.read_corpus(cfg.data.train_file)  # 8 pairs or 4 triples: blocks of 3, 3, 2 or 3, 1
    terms = method.training_step(rows)
    prepared = method.prepare(rows, method.rng)
    with torch.no_grad():
        columns = method.encoder(prepared.features).split(prepared.size)
    inputs = (*columns, prepared.targets.to(torch.float64)) if kind == "scored_pair" else columns
    blocks = [method.loss_fn(*(x[i : i + 3] for x in inputs)) for i in range(0, len(rows), 3)]
    torch.testing.assert_close(terms["loss"].detach(), torch.stack(blocks).mean(), rtol=0, atol=1e-10)
    assert not torch.isclose(terms["loss"].detach(), method.loss_fn(*inputs))  # the blocks acted
    terms["loss"].backward()
    uncached = {n: p.grad.clone() for n, p in method.named_parameters() if p.grad is not None}
    method.zero_grad(set_to_none=True)
    cache = GradCache(method, 2)
    cached = cache.forward(rows)
    cache.backward(cached["loss"])
    torch.testing.assert_close(cached["loss"], terms["loss"], rtol=0, atol=1e-10)
    for name, grad in uncached.items():
        torch.testing.assert_close(dict(method.named_parameters())[name].grad, grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        (["loss=angle", "data=stsb_train", "method.score_max=5"], None),
        (["loss=cosent", "data=stsb_train", "method.score_max=5"], None),
        (["loss=angle", "data=stsb_train", "method.score_max=0"], r"^method.score_max: must be > 0, got 0"),
        (["loss=sbert_regression", "data=stsb_train", "method.score_max=5"],
         r"^method.score_max: loss=sbert_regression regresses the cosine on the score in \[0, 1\]"),
        (["loss=angle", "data=nli_snli_devtest", "method.scored_pairs=nli", "method.score_max=5"],
         r"^method.score_max: has no effect on this run: method.scored_pairs=nli"),
        (["loss=sbert_triplet", "data=nli_snli_devtest", "method.scored_pairs=nli"],
         r"^method.scored_pairs: has no effect on this run: only a scored_pair loss"),
        (["loss=angle", "data=stsb_train", "method.loss_block=-1"], r"^method.loss_block: must be >= 0 \(0: one loss over the batch\), got -1"),
        (["loss=sbert_softmax", "data=snli_labeled", "method.loss_block=128"],
         r"^method.loss_block: has no effect on this run: a classifier loss"),
    ],
)
def test_angle_keys_act_or_are_rejected_before_model_load(
    overrides: list[str], error: str | None, tiny_bert: Path, data_dir: Path
) -> None:
    overrides = ["method=sbert", *overrides]
    cfg = compose_run(tiny_bert, data_dir, overrides)
    if error is None:
        validate(cfg, overrides)
        assert params_of(cfg)["method.score_max"] == 5
    else:
        with pytest.raises(ConfigError, match=error) as err:
            validate(cfg, overrides)
        assert "\n" not in str(err.value)


def test_an_unknown_scored_pairs_source_does_not_compose(tiny_bert: Path, data_dir: Path) -> None:
    with pytest.raises(Exception, match="method.scored_pairs=sts") as err:  # a StrEnum key of SBERT's spec
        compose_run(tiny_bert, data_dir, ["method=sbert", "loss=angle", "data=stsb_train", "method.scored_pairs=sts"])
    assert "expected one of [stsb, nli]" in str(err.value.__cause__)
