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
from conftest import cli_env, minilm_path
from test_eval_sts import HashEncoder, write_sts_fixture

from cl_bench.eval import check_eval_config, evaluate
from cl_bench.eval.flow import FittedFlow, FlowOptions, Glow, standard_normal_log_density
from cl_bench.eval.tasks import EvalConfigError


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
    check_eval_config(root, ["stsb"], postprocess="flow", flow={"levels": 2})
    cases = [
        ({"postprocess": "pca"}, "eval.postprocess: unknown 'pca'"),
        ({"whitening": 8}, "eval.whitening: the kept dimensions act only with eval.postprocess=whitening"),
        ({"flow": {"levels": 2}}, "eval.flow.levels: acts only with eval.postprocess=flow"),
        ({"postprocess": "flow", "flow": {"levels": 0}}, "eval.flow.levels: must be an integer >= 1"),
        ({"postprocess": "flow", "flow": {"lr": -1.0}}, "eval.flow.lr: must be > 0"),
        ({"postprocess": "flow", "flow": {"levls": 2}}, "eval.flow.levls: unknown key"),
        ({"postprocess": "flow", "flow": {"corpus": str(tmp_path / "none.txt")}}, "eval.flow.corpus: .*no such file"),
    ]
    for options, message in cases:
        with pytest.raises(EvalConfigError, match=message):
            check_eval_config(root, ["stsb"], **options)
    with pytest.raises(ValueError, match="eval.flow.levels"):
        Glow(4, levels=3)  # 4 -> 2 -> 1 channel: too deep


def test_flow_postprocess_changes_the_figures_it_labels(tmp_path: Path) -> None:
    root = write_sts_fixture(tmp_path / "sts", pairs_per_part=24)
    common = {"tasks": ["stsb", "sts12"], "align_uniform": True, "anisotropy": False}
    raw = evaluate(HashEncoder(), root, **common)
    flow = evaluate(HashEncoder(), root, postprocess="flow", flow={"levels": 2, "epochs": 2}, **common)
    white = evaluate(HashEncoder(), root, postprocess="whitening", **common)
    for key in ("stsb", "sts12", "align", "uniform"):
        assert len({raw[key], flow[key], white[key]}) == 3, key
    # a named fitting corpus: one flow for every task
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"sentence number {i} about things" for i in range(100)) + "\n")
    named = evaluate(HashEncoder(), root, postprocess="flow", flow={"levels": 2, "corpus": str(corpus)}, **common)
    assert named["stsb"] != flow["stsb"] and math.isfinite(named["sts12"])
    # the corpus flow reads no train split
    (root / "sts/STSBenchmark/sts-train.csv").unlink()
    check_eval_config(root, ["stsb"], align_uniform_split="test", postprocess="flow", flow={"corpus": str(corpus)})
    with pytest.raises(EvalConfigError, match="sts-train.csv"):
        check_eval_config(root, ["stsb"], align_uniform_split="test", postprocess="flow")


@pytest.mark.slow
def test_minilm_sts_with_flow_whitening_and_none(tmp_path: Path, data_dir: Path) -> None:
    """all-MiniLM-L6-v2 (avg pooling) on the 7 STS tasks three ways, through the real `cl-bench` command."""
    exe = shutil.which("cl-bench")
    assert exe, "the cl-bench console script is not installed (pip install -e .)"
    figures = {}
    for name in ("default", "whitening", "flow"):
        args = [exe, "mode=eval", f"model.name_or_path={minilm_path()}", "pooler=avg", f"eval={name}",
                "eval.align_uniform=false", "eval.anisotropy=false", "logger=none", f"hydra.run.dir={name}"]
        proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=cli_env(data_dir), timeout=3600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        figures[name] = json.loads((tmp_path / name / "results.json").read_text())
    keys = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "sts_avg")
    print(json.dumps({name: {k: round(r[k], 2) for k in keys} for name, r in figures.items()}))
    assert len({r["sts_avg"] for r in figures.values()}) == 3
    assert all(60 < r["sts_avg"] < 90 for r in figures.values())


def test_inert_post_processing_overrides_are_rejected(data_dir: Path) -> None:
    from hydra import compose, initialize_config_dir

    from cl_bench.cli import CONF_DIR
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
    cfg = check([*base, "eval=flow", "eval.flow.levels=2"])
    inert = inert_keys(cfg)  # left out of the MLflow params as well
    assert "eval.flow" not in inert and "eval.whitening" in inert
