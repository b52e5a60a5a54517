"""SG-BERT / SG-OPT: objectives against a naive loop, the frozen copy, the layer views, the regularizer."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import build_spec, validate, yaml_spec
from cl_bench.losses.sg_opt import parameter_drift, sg_contrastive_loss
from cl_bench.methods.base import MethodContext
from cl_bench.methods.sg_opt.modeling import SelfGuided, pool_layers
from cl_bench.models.encoder import build_encoder
from cl_bench.run_specs import TrainConfig
from cl_bench.train.loop import make_optimizer

SENTENCES = ["a man plays the guitar", "the dog runs in the park", "two children sit", "a red car"]


# ------------------------------------------------------------------------------------------------
# Objectives, term by term
# ------------------------------------------------------------------------------------------------
def _phi(u: torch.Tensor, v: torch.Tensor, tau: float) -> float:
    return math.exp(float(torch.nn.functional.cosine_similarity(u, v, dim=0)) / tau)


def naive_row(anchor: torch.Tensor, positive: torch.Tensor, negatives: list[torch.Tensor], tau: float) -> float:
    """-log φ(a, p) / (φ(a, p) + Σ_n φ(a, n))."""
    pos = _phi(anchor, positive, tau)
    return -math.log(pos / (pos + sum(_phi(anchor, n, tau) for n in negatives)))


def naive_c_rows(c: torch.Tensor, h: torch.Tensor, tau: float, with_cc: bool) -> list[float]:
    """c_i-anchored rows: positive h_i; negatives h_j (j≠i) and, with_cc, c_j (j≠i)."""
    b = len(c)
    return [
        naive_row(c[i], h[i], [h[j] for j in range(b) if j != i] + ([c[j] for j in range(b) if j != i] if with_cc else []), tau)
        for i in range(b)
    ]


def naive_h_rows(c: torch.Tensor, h: torch.Tensor, tau: float) -> list[float]:
    """h_i-anchored rows of the symmetric NT-Xent: positive c_i; negatives h_j and c_j (j≠i)."""
    b = len(c)
    return [naive_row(h[i], c[i], [h[j] for j in range(b) if j != i] + [c[j] for j in range(b) if j != i], tau) for i in range(b)]


def naive_opt3(c: torch.Tensor, views: torch.Tensor, tau: float) -> float:
    b, num_layers = views.shape[:2]
    rows = [
        naive_row(c[i], views[i, k], [views[m, n] for m in range(b) if m != i for n in range(num_layers)], tau)
        for i in range(b)
        for k in range(num_layers)
    ]
    return sum(rows) / (b * num_layers)


@pytest.fixture()
def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    c = torch.randn(5, 6, generator=gen)
    views = torch.randn(5, 3, 6, generator=gen)
    return c, views[:, 1], views


@pytest.mark.parametrize("tau", [0.5, 0.05])
def test_each_objective_equals_its_naive_loop(batch, tau: float) -> None:
    c, h, views = batch
    b = len(c)
    base = (sum(naive_c_rows(c, h, tau, with_cc=True)) + sum(naive_h_rows(c, h, tau))) / (2 * b)
    opt1 = sum(naive_c_rows(c, h, tau, with_cc=True)) / b
    opt2 = sum(naive_c_rows(c, h, tau, with_cc=False)) / b
    expected = {"base": base, "opt1": opt1, "opt2": opt2}
    second = torch.ones(b, dtype=torch.long)  # h = views[:, 1]: the sampler picked layer 1 for every sentence
    for objective, value in expected.items():
        assert float(sg_contrastive_loss(c, views, second, tau=tau, objective=objective)) == pytest.approx(value, rel=1e-5), objective
    assert float(sg_contrastive_loss(c, views, second, tau=tau, objective="opt3")) == pytest.approx(naive_opt3(c, views, tau), rel=1e-5)


def test_each_variant_drops_exactly_its_term(batch) -> None:
    c, h, views = batch
    tau, b = 0.5, len(c)
    second = torch.ones(b, dtype=torch.long)
    loss = {o: float(sg_contrastive_loss(c, views, second, tau=tau, objective=o)) for o in ("base", "opt1", "opt2")}
    # opt1 = base minus the h-anchored rows (the only ones holding h_i–h_j repulsion).
    assert 2 * b * loss["base"] - b * loss["opt1"] == pytest.approx(sum(naive_h_rows(c, h, tau)), rel=1e-5)
    # opt2 = opt1 minus the c_i–c_j terms of each denominator.
    dropped = 0.0
    for i in range(b):
        with_h = sum(_phi(c[i], h[j], tau) for j in range(b))
        with_c = sum(_phi(c[i], c[j], tau) for j in range(b) if j != i)
        dropped += math.log(with_h + with_c) - math.log(with_h)
    assert b * (loss["opt1"] - loss["opt2"]) == pytest.approx(dropped, rel=1e-5)
    assert dropped > 0.1  # the term is not negligible, so the check above has teeth
    # opt3 with a single view is opt2; with more views it differs.
    first = torch.zeros(b, dtype=torch.long)
    assert float(sg_contrastive_loss(c, h.unsqueeze(1), first, tau=tau, objective="opt3")) == pytest.approx(loss["opt2"], rel=1e-6)
    assert float(sg_contrastive_loss(c, views, second, tau=tau, objective="opt3")) != pytest.approx(loss["opt2"], rel=1e-3)


def test_objective_errors_name_the_key() -> None:
    c = torch.randn(3, 4)
    pick = torch.zeros(3, dtype=torch.long)
    with pytest.raises(ValueError, match="loss.objective: unknown SG objective 'opt4'"):
        sg_contrastive_loss(c, c.unsqueeze(1), pick, objective="opt4", tau=0.01)
    with pytest.raises(ValueError, match=r"layer_views must be \(b, L, D\)"):
        sg_contrastive_loss(c, c, pick, objective="opt3", tau=0.01)


def test_parameter_drift_is_the_squared_l2_distance() -> None:
    a = {"w": torch.tensor([[1.0, 2.0]]), "b": torch.tensor([3.0])}
    b = {"w": torch.tensor([[0.0, 4.0]]), "b": torch.tensor([1.0])}
    assert float(parameter_drift(a.items(), b)) == pytest.approx(1 + 4 + 4)
    with pytest.raises(KeyError, match="'extra'"):
        parameter_drift([("extra", torch.zeros(1))], b)


# ------------------------------------------------------------------------------------------------
# The method on a tiny random BERT
# ------------------------------------------------------------------------------------------------
def _method(tiny_bert: Path, dropout: float | None = None, objective: str = "opt3", **kwargs) -> SelfGuided:
    encoder = build_encoder(str(tiny_bert), pooler="cls_before_pooler", dropout=dropout, max_length=16)
    loss = functools.partial(sg_contrastive_loss, tau=0.01, objective=objective)
    context = MethodContext(encoder=encoder, loss=loss, augmentation=None, model_name_or_path=str(tiny_bert))
    return SelfGuided(context, yaml_spec("method", "sg_opt", projection_size=kwargs.pop("projection_size", 8), **kwargs))


def test_frozen_copy_never_changes_and_stays_out_of_training(tiny_bert: Path) -> None:
    torch.manual_seed(0)
    method = _method(tiny_bert, objective="opt3", reg_weight=0.1)
    frozen_before = {n: p.detach().clone() for n, p in method.frozen.named_parameters()}
    tuned_before = {n: p.detach().clone() for n, p in method.encoder.backbone.named_parameters()}
    optimizer = make_optimizer(method, TrainConfig(lr=1e-2, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.9, adam_eps=1e-6))
    method.train()
    assert not method.frozen.training  # train() does not switch on BERT_F's dropout
    for _ in range(2):
        terms = method.training_step(SENTENCES)
        terms["loss"].backward()
        optimizer.step()
        optimizer.zero_grad()
    for name, param in method.frozen.named_parameters():
        assert torch.equal(param, frozen_before[name]), name
        assert not param.requires_grad
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert not optimized & {id(p) for p in method.frozen.parameters()}
    assert not any(k.startswith("_frozen") for k in method.state_dict())  # checkpoints hold one BERT
    changed = {n for n, p in method.encoder.backbone.named_parameters() if not torch.equal(p, tuned_before[n])}
    assert "encoder.layer.0.attention.self.query.weight" in changed
    assert not any(n.startswith("embeddings.") for n in changed)  # BERT_T's embedding layer is frozen
    # the regularizer is Σ‖θ_T − θ_F‖² over the tuned (non-embedding) parameters
    drift = sum(
        float((p.detach() - frozen_before[n]).pow(2).sum())
        for n, p in method.encoder.backbone.named_parameters()
        if p.requires_grad
    )
    assert drift > 0
    assert float(method.training_step(SENTENCES)["loss_reg"].detach()) == pytest.approx(drift, rel=1e-4)
    method.to(torch.float64)  # BERT_F moves with the method although it is not a submodule
    assert next(method.frozen.parameters()).dtype == torch.float64


def _naive_pool(states: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    rows = []
    for i in range(states.shape[0]):
        real = states[i, mask[i].bool()]
        rows.append(real.max(dim=0).values if pooling == "max" else real.mean(dim=0))
    return torch.stack(rows)


@pytest.mark.parametrize("pooling", ["max", "mean"])
def test_views_come_from_the_layers_asked_for(tiny_bert: Path, pooling: str) -> None:
    from transformers import AutoModel

    method = _method(tiny_bert, layers=[2, 0], layer_pooling=pooling)
    features = method.tokenize(SENTENCES)
    views = method.layer_views(features)
    assert views.shape == (len(SENTENCES), 2, method.encoder.hidden_size)
    reference = AutoModel.from_pretrained(str(tiny_bert)).eval()
    with torch.no_grad():
        states = reference(**features, output_hidden_states=True).hidden_states
    mask = features["attention_mask"]
    assert (mask == 0).any()  # the batch has padding, which pooling must ignore
    torch.testing.assert_close(views[:, 0], _naive_pool(states[2], mask, pooling))
    torch.testing.assert_close(views[:, 1], _naive_pool(states[0], mask, pooling))
    assert not torch.allclose(views[:, 0], views[:, 1])


def test_pool_layers_rejects_unknown_pooling() -> None:
    with pytest.raises(ValueError, match="method.layer_pooling: unknown pooling 'min'"):
        pool_layers([torch.zeros(1, 2, 3)], torch.ones(1, 2), [0], "min")


def test_sampled_view_comes_from_the_listed_layer(tiny_bert: Path) -> None:
    method = _method(tiny_bert, dropout=0.0, objective="base", layers=[1], reg_weight=0.0)
    method.train()
    terms = method.training_step(SENTENCES)
    features = method.tokenize(SENTENCES)
    with torch.no_grad():
        views = method.head(method.layer_views(features))
        expected = sg_contrastive_loss(
            method.head(method.encoder(features)), views, torch.zeros(len(SENTENCES), dtype=torch.long), tau=0.01,
            objective="base",
        )
    assert float(terms["loss"].detach()) == pytest.approx(float(expected), rel=1e-5)
    assert "loss_reg" not in terms  # λ = 0 skips the regularizer


def test_no_projection_head_and_bad_options(tiny_bert: Path) -> None:
    method = _method(tiny_bert, projection_size=0)
    assert isinstance(method.head, torch.nn.Identity)
    assert torch.isfinite(method.training_step(SENTENCES)["loss"])
    with pytest.raises(ValueError, match=r"method.layers: indices must lie in 0..2"):
        _method(tiny_bert, layers=[3])
    with pytest.raises(ValueError, match="method.layer_pooling"):
        yaml_spec("method", "sg_opt", layer_pooling="min")
    with pytest.raises(ValueError, match="method.reg_weight"):
        yaml_spec("method", "sg_opt", reg_weight=-1)


def test_reads_all_stsb_splits(tiny_bert: Path, data_dir: Path) -> None:
    method = _method(tiny_bert)
    sentences = method.read_corpus(str(data_dir / "sts" / "STSBenchmark" / "sts-train.csv"))
    assert len(sentences) == 2 * (5749 + 1500 + 1379)
    assert sentences[:2] == ["a plane is taking off .", "an air plane is taking off ."]  # sentence1, sentence2 of row 1
    train_only = _method(tiny_bert, stsb_splits=None).read_corpus(str(data_dir / "sts" / "STSBenchmark" / "sts-train.csv"))
    assert len(train_only) == 2 * 5749


# ------------------------------------------------------------------------------------------------
# Configs
# ------------------------------------------------------------------------------------------------
def _compose(data_dir: Path, overrides: list[str]):
    import os

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def test_presets_and_loss_ablation_grid(tiny_bert: Path, data_dir: Path) -> None:
    cfg = _compose(data_dir, ["experiment=sg_opt_bert", f"model.name_or_path={tiny_bert}"])
    validate(cfg)
    assert cfg.loss.objective == "opt3" and cfg.loss.tau == 0.01 and cfg.method.layer_pooling == "max"
    assert cfg.pooler.name == "cls_before_pooler" and cfg.train.batch_size == 16 and cfg.train.adam_beta2 == 0.9
    assert cfg.train.warmup_ratio == 0.1 and cfg.train.eval_steps == 50 and cfg.data.name == "stsb_sentences"
    sweep = _compose(data_dir, ["experiment=ablation_sg_opt_loss", f"model.name_or_path={tiny_bert}"])
    assert str(sweep.hydra.mode) == "RunMode.MULTIRUN"
    assert sorted(sweep.hydra.sweeper.params["loss.objective"].split(",")) == ["base", "opt1", "opt2", "opt3"]
    bert = _compose(data_dir, ["method=sg_opt", "loss=sg", f"model.name_or_path={tiny_bert}"])
    build_spec(bert.method, "method")
    assert bert.loss.objective == "base" and bert.loss.tau == 0.01
    assert _compose(data_dir, ["method=sg_opt"]).loss.name == "sg_opt"  # the method's default loss


# ------------------------------------------------------------------------------------------------
# A real short run through the console command
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_short_real_run_from_minilm(data_dir: Path, tmp_path: Path) -> None:
    from conftest import cl_bench_process as _cl_bench
    from conftest import minilm_path

    _cl_bench(
        [
            "experiment=sg_opt_bert", f"model.name_or_path={minilm_path()}", "model.max_length=32", "data.limit=96",
            "method.projection_size=256", "train.max_steps=3", "train.eval_steps=0", "train.progress_bar=false",
            "train.num_threads=2", "eval.tasks=[stsb]", "eval.align_uniform=false", "eval.anisotropy=false",
            "hydra.run.dir=run",
        ],
        tmp_path, data_dir,
    )
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert -100 <= results["sts/stsb"] <= 100 and math.isfinite(results["select/best_stsb_dev"])
    losses = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(math.isfinite(v) for m in losses for k, v in m.items() if k.startswith("train/loss"))
    assert (tmp_path / "run" / "best_model" / "config.json").is_file()
