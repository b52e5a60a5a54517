"""BERT-flow (cl_bench/eval/flow.py) and the eval.postprocess option that chooses it.

The flow's log-likelihood is checked against the analytic Gaussian one and against the change of
variables computed with an autograd Jacobian; the inverse reconstructs its inputs; the option is
validated before any model loads and changes the STS figures it labels. The slow test reports
all-MiniLM-L6-v2's STS with flow, whitening and no post-processing.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import HashEncoder, cli_env, minilm_path, write_sts_fixture

from cl_bench.eval import EvalOptions, check_eval_config, evaluate
from cl_bench.eval.flow import FittedFlow, FlowOptions, Glow, standard_normal_log_density
from cl_bench.eval.options import EvalConfigError


def gaussian_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dim = 6
    a = np.diag(np.linspace(0.3, 3.0, dim))
    a[5, 0], a[2, 4] = 1.0, 0.5  # some correlation
    mean = np.arange(dim) - 2.0
    return rng.normal(size=(n, dim)) @ a.T + mean, a @ a.T, mean


def test_fitted_flow_log_likelihood_is_the_analytic_gaussian_one() -> None:
    train, cov, _ = gaussian_data(3000, 0)
    test, _, _ = gaussian_data(3000, 1)
    dim = cov.shape[0]
    analytic = -0.5 * (dim * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1] + dim)  # E[log N(x)]
    fitted = FittedFlow.fit(train, FlowOptions(levels=2, depth=3, epochs=2))
    with torch.no_grad():
        _, log_likelihood = fitted.model(torch.as_tensor(test))
    # held-out mean log-likelihood within 0.02 nats per dimension of the true density's
    assert abs(log_likelihood.mean().item() - analytic) / dim < 0.02
    # and far above what the untrained (identity-initialised) flow would give the raw data
    assert fitted.final_nll_per_dim == pytest.approx(-analytic / dim, abs=0.05)


def test_log_likelihood_is_the_change_of_variables() -> None:
    torch.manual_seed(0)
    flow = Glow(5, levels=3, depth=2, width=8).double()
    x = torch.randn(64, 5, dtype=torch.float64) * 2 + 1
    flow(x)  # data-dependent initialisation
    for parameter in flow.parameters():  # move off the identity-like initialisation
        parameter.data.add_(0.1 * torch.randn_like(parameter))
    z, log_likelihood = flow(x[:4])
    for row in range(4):
        jacobian = torch.autograd.functional.jacobian(lambda v: flow(v[None])[0][0], x[row])
        expected = standard_normal_log_density(z[row : row + 1])[0] + torch.linalg.slogdet(jacobian)[1]
        assert log_likelihood[row].item() == pytest.approx(expected.item(), abs=1e-9)


@pytest.mark.parametrize("dim,levels", [(384, 3), (7, 2), (12, 1)])
def test_inverse_reconstructs_inputs(dim: int, levels: int) -> None:
    x = np.random.default_rng(dim).normal(size=(200, dim)) * 3
    fitted = FittedFlow.fit(x, FlowOptions(levels=levels, epochs=1, batch_size=50))
    z = torch.as_tensor(fitted.transform(x))
    with torch.no_grad():
        back = fitted.model.inverse(z).numpy()
    assert z.shape == (200, dim)
    np.testing.assert_allclose(back, x, rtol=0, atol=1e-5)


def test_constant_channels_are_left_unscaled() -> None:
    """all-MiniLM-L6-v2's mean-pooled embeddings have constant channels (std ~1e-32 on STS-B): the
    official actnorm initialisation would scale them by 1e6 and the likelihood diverged (NaN STS)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 8))
    x[:, 2] = 1e-32
    x[:, 5] = 0.25
    fitted = FittedFlow.fit(x, FlowOptions(levels=2, batch_size=50))
    z = fitted.transform(x)
    assert np.isfinite(z).all() and math.isfinite(fitted.final_nll_per_dim) and fitted.final_nll_per_dim < 3
    with torch.no_grad():
        back = fitted.model.inverse(torch.as_tensor(z)).numpy()
    np.testing.assert_allclose(back, x, rtol=0, atol=1e-5)


def test_flow_options_are_validated(tmp_path: Path) -> None:
    root = write_sts_fixture(tmp_path / "sts")
    check_eval_config(root, ["stsb"], options=EvalOptions(postprocess="flow", flow={"levels": 2}))
    cases = [
        ({"postprocess": "pca"}, "eval.postprocess: unknown 'pca'"),
        ({"whitening": 8}, "eval.whitening: the kept dimensions act only with eval.postprocess=whitening"),
        ({"flow": {"levels": 2}}, "eval.flow.levels: acts only with eval.postprocess=flow"),
        ({"postprocess": "flow", "flow": {"levels": 0}}, "eval.flow.levels: must be >= 1, got 0"),
        ({"postprocess": "flow", "flow": {"lr": -1.0}}, "eval.flow.lr: must be > 0"),
        ({"postprocess": "flow", "flow": {"levls": 2}}, "eval.flow.levls: unknown key"),
        ({"postprocess": "flow", "flow": {"corpus": str(tmp_path / "none.txt")}}, "eval.flow.corpus: .*no such file"),
    ]
    for options, message in cases:
        with pytest.raises(EvalConfigError, match=message):
            check_eval_config(root, ["stsb"], EvalOptions(**options))
    with pytest.raises(ValueError, match="eval.flow.levels"):
        Glow(4, levels=3)  # 4 -> 2 -> 1 channel: too deep


def test_flow_postprocess_changes_the_figures_it_labels(tmp_path: Path) -> None:
    root = write_sts_fixture(tmp_path / "sts", pairs_per_part=24)
    tasks, common = ["stsb", "sts12"], {"align_uniform": True, "anisotropy": False}
    raw = evaluate(HashEncoder(), root, tasks, EvalOptions(**common))
    hashed = {"fit_mode": "eval", "pooler": "run"}  # HashEncoder has no dropout and no pooler
    flow = evaluate(HashEncoder(), root, tasks,
                    EvalOptions(postprocess="flow", flow={"levels": 2, "epochs": 2, **hashed}, **common))
    white = evaluate(HashEncoder(), root, tasks, EvalOptions(postprocess="whitening", **common))
    for key in ("stsb", "sts12", "align", "uniform"):
        assert len({raw[key], flow[key], white[key]}) == 3, key
    # a named fitting corpus: one flow for every task
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"sentence number {i} about things" for i in range(100)) + "\n")
    named = evaluate(HashEncoder(), root, tasks,
                     EvalOptions(postprocess="flow", flow={"levels": 2, "corpus": str(corpus), **hashed}, **common))
    assert named["stsb"] != flow["stsb"] and math.isfinite(named["sts12"])
    # the corpus flow reads no train split
    (root / "sts/STSBenchmark/sts-train.csv").unlink()
    check_eval_config(root, ["stsb"], EvalOptions(align_uniform_split="test", postprocess="flow",
                                                  flow={"corpus": str(corpus)}))
    with pytest.raises(EvalConfigError, match="sts-train.csv"):
        check_eval_config(root, ["stsb"], options=EvalOptions(align_uniform_split="test", postprocess="flow"))


@pytest.mark.slow
def test_minilm_sts_with_flow_whitening_and_none(tmp_path: Path, data_dir: Path) -> None:
    """all-MiniLM-L6-v2 (avg pooling) on the 7 STS tasks three ways, through the real `cl-bench` command."""
    exe = shutil.which("cl-bench")
    assert exe, "the cl-bench console script is not installed (pip install -e .)"
    figures = {}
    for name in ("default", "whitening", "flow"):
        pooling = ["pooler=avg"] + (["eval.flow.pooler=run"] if name == "flow" else [])
        args = [exe, "mode=eval", f"model.name_or_path={minilm_path()}", *pooling, f"eval={name}",
                "eval.align_uniform=false", "eval.anisotropy=false", "logger=none", f"hydra.run.dir={name}"]
        proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=cli_env(data_dir), timeout=3600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        figures[name] = json.loads((tmp_path / name / "results.json").read_text())
    keys = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "sts_avg")
    print(json.dumps({name: {k: round(r[f"sts/{k}"], 2) for k in keys} for name, r in figures.items()}))
    assert len({r["sts/sts_avg"] for r in figures.values()}) == 3
    assert all(60 < r["sts/sts_avg"] < 90 for r in figures.values())


def test_inert_post_processing_overrides_are_rejected(data_dir: Path) -> None:
    from hydra import compose, initialize_config_dir

    from cl_bench.commands.cli import CONF_DIR
    from cl_bench.config import ConfigError, inert_keys, validate

    def check(overrides: list[str]):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        validate(cfg, overrides)
        return cfg

    base = ["mode=eval", f"model.name_or_path={minilm_path()}", f"paths.data_dir={data_dir}"]
    for override, message in [
        ("eval.flow.levels=2", "eval.flow.levels: has no effect on this run: only eval.postprocess=flow"),
        ("eval.whitening=8", "eval.whitening: has no effect on this run: only eval.postprocess=whitening"),
    ]:
        with pytest.raises(ConfigError, match=message):
            check([*base, override])
    with pytest.raises(ConfigError, match=r"pooler: has no effect on this run: eval.flow.pooler=official pools as BERT-flow"):
        check([*base, "eval=flow", "pooler=avg"])
    check([*base, "eval=flow", "pooler=avg", "eval.flow.pooler=run"])
    for key in ("fit_mode=eval", "adam_bias_correction=true", "loss=nats_mean", "init_batch_size=0"):
        check([*base, "eval=flow", f"eval.flow.{key}"])
        with pytest.raises(ConfigError, match=f"eval.flow.{key.split('=')[0]}: has no effect"):
            check([*base, f"eval.flow.{key}"])
    cfg = check([*base, "eval=flow", "eval.flow.levels=2"])
    inert = inert_keys(cfg)  # left out of the MLflow params as well
    assert "eval.flow" not in inert and "eval.whitening" in inert


# ------------------------------------------------------------------------------------------------
# issue 28: the official run's fit (dropout embeddings, avg-last-2, no bias correction, bits, init)
# ------------------------------------------------------------------------------------------------
def _flow_data(n: int = 128, dim: int = 8, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.normal(size=(n, dim)) * scale @ np.triu(np.ones((dim, dim)))


def _params(fitted: FittedFlow) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in fitted.model.parameters()])


def test_flow_optimiser_switch_acts(monkeypatch: pytest.MonkeyPatch) -> None:
    from cl_bench.eval import flow as flow_module
    from cl_bench.utils.optim import AdamWNoBiasCorrection

    steps: list[str] = []
    for cls in (AdamWNoBiasCorrection, torch.optim.AdamW):
        original = cls.step
        monkeypatch.setattr(cls, "step", lambda self, *a, _o=original, _n=cls.__name__, **k: (steps.append(_n), _o(self, *a, **k))[1])
    x = _flow_data()
    official = FittedFlow.fit(x, FlowOptions(levels=2, depth=1))
    assert set(steps) == {"AdamWNoBiasCorrection"}
    steps.clear()
    corrected = FittedFlow.fit(x, FlowOptions(levels=2, depth=1, adam_bias_correction=True))
    assert set(steps) == {"AdamW"}
    assert not torch.allclose(_params(official), _params(corrected))
    assert flow_module.AdamWNoBiasCorrection is AdamWNoBiasCorrection  # one implementation, shared with training


def test_flow_loss_scale_switch_changes_when_the_clip_acts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The official loss is 2/ln 2 x cl-bench's nats mean: Adam ignores the scale, the norm clip at 1 does not."""
    norms: dict[str, list[float]] = {}
    clip = torch.nn.utils.clip_grad_norm_
    x = _flow_data()
    for loss in ("bits_pair_sum", "nats_mean"):
        seen = norms.setdefault(loss, [])
        monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda p, m, _s=seen: _s.append(float(clip(p, m))) or _s[-1])
        FittedFlow.fit(x, FlowOptions(levels=2, depth=1, loss=loss))
    # the same first step (same initialisation and batch): the gradient norms are 2 / ln 2 apart
    assert norms["bits_pair_sum"][0] / norms["nats_mean"][0] == pytest.approx(2 / math.log(2), rel=1e-9)
    clipped = {loss: sum(n > 1.0 for n in seen) for loss, seen in norms.items()}
    assert clipped["bits_pair_sum"] > clipped["nats_mean"], (clipped, norms)


def test_flow_init_batch_switch_acts(monkeypatch: pytest.MonkeyPatch) -> None:
    from cl_bench.eval import flow as flow_module

    sizes: list[int] = []
    original = flow_module.ActNorm._initialize
    monkeypatch.setattr(flow_module.ActNorm, "_initialize", lambda self, x: (sizes.append(x.shape[0]), original(self, x))[1])
    x = _flow_data()
    own = FittedFlow.fit(x, FlowOptions(levels=1, depth=1, batch_size=64))
    assert set(sizes) == {32}  # the official GlowInitHook's draw: one side of 32 pairs
    sizes.clear()
    first = FittedFlow.fit(x, FlowOptions(levels=1, depth=1, batch_size=64, init_batch_size=0))
    assert set(sizes) == {64}
    assert not torch.allclose(_params(own), _params(first))


def _tiny_encoder(tiny_bert: Path, pooler: str = "cls", first_layer: int = 1):
    from cl_bench.models.encoder import build_encoder

    return build_encoder(str(tiny_bert), pooler=pooler, dropout=0.1, first_layer=first_layer, fresh_mlp=False)


def test_flow_fit_mode_fits_on_dropout_embeddings(tiny_bert: Path, tmp_path: Path) -> None:
    from cl_bench.eval.postprocess import PostProcess, dropout_embedder

    encoder = _tiny_encoder(tiny_bert, "avg").eval()
    sentences = [f"the {w} sat on a mat number {i}" for i, w in enumerate(["cat", "dog", "bird", "fox"] * 16)]
    clean = encoder.encode(sentences)
    sampler = dropout_embedder(encoder, batch_size=16, seed=3)
    noisy = sampler(sentences)
    assert not encoder.training  # restored
    assert np.abs(noisy - clean).max() > 1e-3  # dropout was on
    np.testing.assert_array_equal(noisy, dropout_embedder(encoder, 16, 3)(sentences))  # seeded
    fitted_on: list[np.ndarray] = []
    original = FittedFlow.fit.__func__

    def spy(cls, x, options=None):
        fitted_on.append(np.asarray(x))
        return original(cls, x, options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FittedFlow, "fit", classmethod(spy))
        table = lambda s: encoder.encode(s)  # noqa: E731
        PostProcess("flow", None, FlowOptions(levels=1), fit_embed=sampler).transform_for(table, sentences)
        PostProcess("flow", None, FlowOptions(levels=1, fit_mode="eval"), fit_embed=sampler).transform_for(table, sentences)
    np.testing.assert_allclose(fitted_on[0], noisy, atol=1e-6)
    np.testing.assert_allclose(fitted_on[1], clean, atol=1e-6)


def test_flow_official_pooling_is_avg_last_2(tiny_bert: Path, tmp_path: Path) -> None:
    root = write_sts_fixture(tmp_path / "sts", pairs_per_part=12)
    common = {"align_uniform": False, "anisotropy": False, "cache": False, "postprocess": "flow"}
    fast = {"levels": 1, "depth": 1, "epochs": 0.5}
    official = evaluate(_tiny_encoder(tiny_bert, "cls"), root, ["stsb"], EvalOptions(flow=fast, **common))
    by_hand = evaluate(_tiny_encoder(tiny_bert, "avg_first_last", 1), root, ["stsb"],
                       EvalOptions(flow={**fast, "pooler": "run"}, **common))
    run_cls = evaluate(_tiny_encoder(tiny_bert, "cls"), root, ["stsb"],
                       EvalOptions(flow={**fast, "pooler": "run"}, **common))
    assert official["stsb"] == pytest.approx(by_hand["stsb"], abs=1e-9)
    assert run_cls["stsb"] != official["stsb"]
    encoder = _tiny_encoder(tiny_bert, "cls")
    evaluate(encoder, root, ["stsb"], EvalOptions(flow=fast, **common))
    assert (encoder.pooler, encoder.first_layer) == ("cls", 1)  # restored
    with pytest.raises(EvalConfigError, match=r"eval.flow.pooler=official: needs a cl-bench SentenceEncoder"):
        evaluate(HashEncoder(), root, ["stsb"], EvalOptions(flow={"fit_mode": "eval"}, **common))
    with pytest.raises(EvalConfigError, match=r"eval.flow.fit_mode=train: needs a cl-bench SentenceEncoder"):
        evaluate(HashEncoder(), root, ["stsb"], EvalOptions(flow={"pooler": "run"}, **common))


def test_flow_new_keys_are_validated() -> None:
    for options, message in [({"fit_mode": "test"}, "eval.flow.fit_mode: must be one of train, eval"), ({"pooler": "cls"}, "eval.flow.pooler: must be one of official, run"),
                             ({"loss": "bits"}, "eval.flow.loss: must be one of bits_pair_sum, nats_mean"), ({"init_batch_size": -1}, "eval.flow.init_batch_size"),
                             ({"adam_bias_correction": "no"}, "eval.flow.adam_bias_correction")]:
        with pytest.raises(ValueError, match=message):
            FlowOptions.from_mapping(options)


def test_flow_dropout_embeddings_are_cached_as_recomputed(tiny_bert: Path, tmp_path: Path) -> None:
    """With the embedding cache on, the dropout embeddings of a fit are stored and served bit for bit
    as a recomputation gives them (the masks are seeded); any of seed, batch size or a dropout rate
    changed is another entry."""
    from cl_bench.eval.postprocess import dropout_embedder
    from cl_bench.models.inference import EncodingSettings, encoding

    encoder = _tiny_encoder(tiny_bert, "avg").eval()
    sentences = [f"a {w} ran past house {i}" for i, w in enumerate(["cat", "dog", "bird", "fox", "owl"] * 8)]
    recomputed = dropout_embedder(encoder, 16, 3)(sentences)  # outside an encoding context: no cache
    entries = lambda: sorted((tmp_path / "embeddings").glob("*.npy"))  # noqa: E731
    with encoding(EncodingSettings(cache=True, cache_dir=tmp_path)):
        stored = dropout_embedder(encoder, 16, 3)(sentences)
        assert len(entries()) == 1
        with pytest.MonkeyPatch.context() as patch:  # a hit encodes nothing
            patch.setattr(encoder, "tokenize", lambda *a, **k: pytest.fail("encoded although cached"))
            served = dropout_embedder(encoder, 16, 3)(sentences)
        np.testing.assert_array_equal(stored, recomputed)
        np.testing.assert_array_equal(served, recomputed)
        other_seed = dropout_embedder(encoder, 16, 4)(sentences)
        other_batch = dropout_embedder(encoder, 8, 3)(sentences)
        for module in encoder.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.2
        other_rate = dropout_embedder(encoder, 16, 3)(sentences)
        assert len(entries()) == 4
    for other in (other_seed, other_batch, other_rate):
        assert np.abs(other - recomputed).max() > 1e-4


def test_flow_evaluation_caches_its_dropout_embeddings(tiny_bert: Path, tmp_path: Path) -> None:
    """Through ``evaluate`` (whose per-task fits run after its encoding context): the first flow evaluation
    stores the dropout embeddings with the scored ones, the second encodes nothing and gives the same figures."""
    root = write_sts_fixture(tmp_path / "sts", pairs_per_part=12)
    options = EvalOptions(align_uniform=False, anisotropy=False, postprocess="flow", cache=True,
                          cache_dir=str(tmp_path / "cache"), backend="torch", flow={"levels": 1, "depth": 1, "epochs": 0.5})
    encoder = _tiny_encoder(tiny_bert, "avg")
    first = evaluate(encoder, root, ["stsb"], options)
    assert len(list((tmp_path / "cache" / "embeddings").glob("*.npy"))) == 2  # scored + dropout embeddings
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(encoder, "tokenize", lambda *a, **k: pytest.fail("dropout embeddings encoded although cached"))
        second = evaluate(encoder, root, ["stsb"], options)
    assert second["stsb"] == first["stsb"]
