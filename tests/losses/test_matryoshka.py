"""Matryoshka: the wrapper against an explicit-loop float64 reference (values and gradients), equal to the
wrapped loss of unit-length embeddings with one full size, checked before any model loads; ``eval.truncate_dim`` scores the first K
dimensions (K = width equals the untruncated figures exactly); ``cl-bench-report`` plots score against dimension."""

from __future__ import annotations

import functools
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import as_built, params_of
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import ConfigError, typed_specs, validate
from cl_bench.eval.options import EvalOptions
from cl_bench.eval.suite import evaluate
from cl_bench.losses.cosent import cosent
from cl_bench.losses.infonce import info_nce
from cl_bench.losses.matryoshka import MatryoshkaLoss
from cl_bench.losses.sbert import sbert_triplet
from cl_bench.run_specs import TrainConfig


def randn(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(True)


def naive_info_nce(a: torch.Tensor, p: torch.Tensor, h: torch.Tensor, tau: float) -> torch.Tensor:
    def cos(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return sum(x[k] * y[k] for k in range(len(x))) / torch.sqrt(sum(x[k] ** 2 for k in range(len(x)))
                                                                 * sum(y[k] ** 2 for k in range(len(y))))
    total = torch.zeros((), dtype=torch.float64)
    for i in range(a.shape[0]):
        candidates = [*p, *h]
        denominator = sum(torch.exp(cos(a[i], c) / tau) for c in candidates)
        total = total - torch.log(torch.exp(cos(a[i], p[i]) / tau) / denominator)
    return total / a.shape[0]


@pytest.mark.parametrize("weights", [None, [1.0, 0.5, 0.25]])
def test_matryoshka_matches_the_explicit_sum(weights: list[float] | None) -> None:
    a, p, h = randn(4, 8, seed=0), randn(4, 8, seed=1), randn(4, 8, seed=2)
    dims = [8, 4, 2]
    loss = MatryoshkaLoss(as_built(info_nce, tau=0.1), dims, weights)(a, p, h)
    w = weights or [1.0] * 3
    reference = sum(wk * naive_info_nce(a[:, :d], p[:, :d], h[:, :d], 0.1) for wk, d in zip(w, dims, strict=False))
    torch.testing.assert_close(loss, reference, rtol=1e-9, atol=1e-10)
    for got, want in zip(torch.autograd.grad(loss, [a, p, h]), torch.autograd.grad(reference, [a, p, h]), strict=False):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-9)


def test_one_full_size_is_the_wrapped_loss_of_unit_embeddings() -> None:
    """Every prefix is L2-normalised, the full size included (sentence-transformers' ``shrink``): the cosine losses
    are unchanged, the Euclidean triplet loss is the loss of the unit-length embeddings."""
    a, p, h = randn(5, 6, seed=3), randn(5, 6, seed=4), randn(5, 6, seed=5)
    scores = torch.tensor([0.2, 0.4, 0.0, 1.0, 0.6], dtype=torch.float64)
    for fn, args in ((as_built(info_nce, tau=0.05), (a, p, h)), (as_built(cosent), (a, p, scores))):
        torch.testing.assert_close(MatryoshkaLoss(fn, [6])(*args), fn(*args), rtol=0, atol=1e-12)
    triplet = functools.partial(sbert_triplet, margin=1.0)
    unit = [torch.nn.functional.normalize(x, dim=1) for x in (a, p, h)]
    assert torch.equal(MatryoshkaLoss(triplet, [6])(a, p, h), triplet(*unit))
    assert not torch.isclose(triplet(a, p, h), triplet(*unit))
    wrapped = MatryoshkaLoss(as_built(info_nce, tau=0.05), [6, 2])
    assert wrapped.keywords == {"tau": 0.05, "hard_negative_alpha": 1.0} and wrapped.func is info_nce  # methods read the loss's keys through it
    with pytest.raises(ValueError, match=r"train.matryoshka_dims: \[8\] exceed the embedding width 6"):
        MatryoshkaLoss(as_built(info_nce), [8, 2])(a, p)


def test_the_loss_built_from_python_runs_the_keys_own_rules() -> None:
    """MatryoshkaLoss defines no rule: it runs train.matryoshka_dims/_weights' (TrainConfig's), in the same words."""
    from cl_bench.losses.infonce import info_nce

    for dims, weights, key in (([], None, "dims"), ([4, 0], None, "dims"), ([4, 4], None, "dims"),
                               ([4, 2], [1.0], "weights"), ([4, 2], [1.0, -1.0], "weights")):
        with pytest.raises(ValueError, match=f"^train.matryoshka_{key}: ") as raised:
            MatryoshkaLoss(as_built(info_nce), dims, weights)
        with pytest.raises(ValueError) as from_config:
            TrainConfig(batch_size=8, matryoshka_dims=dims, matryoshka_weights=weights).check()
        assert str(raised.value) == str(from_config.value)


def _compose(data_dir: Path, overrides: list[str]):
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*overrides, "paths.output_dir=out"])


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        (["method=simcse", "train.matryoshka_dims=[32,16,8]"], None),
        (["method=simcse_sup", "data=nli_snli_devtest", "train.matryoshka_dims=[32,8]", "train.matryoshka_weights=[1,2]"], None),
        (["method=sbert", "loss=cosent", "data=stsb_train", "train.matryoshka_dims=[16]"], None),
        (["method=sbert", "loss=angle_nli", "data=nli_snli_devtest", "train.matryoshka_dims=[32,16]"], None),
        (["method=sbert", "data=snli_labeled", "train.matryoshka_dims=[16]"], "is a classifier loss"),
        (["method=is_bert", "data=nli_sentences", "train.matryoshka_dims=[16]"], "is a local_global loss"),
        (["method=barlow_twins", "train.matryoshka_dims=[16]"], "is a two_view loss"),
        (["method=simcse", "train.matryoshka_dims=[64,16]"], "64 exceeds the model's embedding width 32"),
        (["method=simcse", "train.matryoshka_weights=[1]"], "has no effect on this run: train.matryoshka_dims is null"),
        (["method=simcse", "eval.truncate_dim=64"], "eval.truncate_dim: 64 exceeds the model's embedding width 32"),
        (["method=simcse", "eval.truncate_dim=0"], "eval.truncate_dim: must be >= 1, got 0"),
        (["method=simcse", "eval.tasks=[mteb:STSBenchmark]", "eval.truncate_dim=16"], "eval.truncate_dim: has no effect"),
    ],
)
def test_matryoshka_and_truncation_keys_act_or_are_rejected_before_model_load(
    overrides: list[str], error: str | None, tiny_bert: Path, data_dir: Path
) -> None:
    data = [] if any(o.startswith("data=") for o in overrides) else ["data=wiki1m_head"]
    cfg = _compose(data_dir, [*overrides, *data, f"model.name_or_path={tiny_bert}"])
    if error is None:
        validate(cfg, overrides)
        assert "train.matryoshka_dims" in params_of(cfg)
    else:
        with pytest.raises((ConfigError, Exception), match=error) as err:
            validate(cfg, overrides)
            from cl_bench.eval.tasks import check_eval_config

            check_eval_config(data_dir, list(cfg.eval.tasks), EvalOptions.from_config(cfg.eval))
        assert "\n" not in str(err.value)


def test_a_matryoshka_training_step(tiny_bert: Path, data_dir: Path) -> None:
    from cl_bench.train import loop

    cfg = _compose(data_dir, ["method=simcse_sup", "data=nli_snli_devtest", f"model.name_or_path={tiny_bert}",
                              "model.max_length=16", "train.matryoshka_dims=[32,8]", "data.limit=8"])
    torch.manual_seed(0)
    method = loop.build_method(typed_specs(cfg), torch.device("cpu"))
    assert isinstance(method.loss_fn, MatryoshkaLoss)
    seen: list[int] = []
    inner = method.loss_fn.loss
    method.loss_fn.loss = lambda *a, **k: (seen.append(a[0].shape[1]), inner(*a, **k))[1]
    batch = next(iter(method.batches(method.read_corpus(cfg.data.train_file), 4, torch.Generator().manual_seed(0))))
    terms = method.training_step(batch)
    assert torch.isfinite(terms["loss"]) and seen == [32, 8]
    terms["loss"].backward()


class FixedEncoder:
    """Deterministic embeddings of width 12: a sum of fixed random word vectors."""

    def __init__(self) -> None:
        self.words: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(0)

    def encode(self, sentences, batch_size: int = 128) -> np.ndarray:
        out = np.zeros((len(sentences), 12), dtype=np.float32)
        for row, text in enumerate(sentences):
            for word in text.lower().split():
                if word not in self.words:
                    self.words[word] = self.rng.standard_normal(12)
                out[row] += self.words[word]
        return out


def test_truncate_dim_scores_the_first_k_dimensions(data_dir: Path) -> None:
    encoder = FixedEncoder()
    options = EvalOptions(anisotropy=False, cache=False, backend="torch", align_uniform_split="test")
    full = evaluate(encoder, data_dir, ["stsb"], options)
    assert evaluate(encoder, data_dir, ["stsb"],
                    replace(options, truncate_dim=12)) == full  # K = width: exactly the same

    class Prefix:
        def encode(self, sentences, batch_size: int = 128) -> np.ndarray:
            return encoder.encode(sentences)[:, :4]

    four = evaluate(encoder, data_dir, ["stsb"], replace(options, truncate_dim=4))
    assert four == evaluate(Prefix(), data_dir, ["stsb"], options) and four["stsb"] != full["stsb"]
    assert four["align"] != full["align"]  # alignment/uniformity are scored on the prefix too
    from cl_bench.eval.options import EvalConfigError

    with pytest.raises(EvalConfigError, match="eval.truncate_dim: 13 exceeds the embedding width 12"):
        evaluate(encoder, data_dir, ["stsb"], replace(options, truncate_dim=13))


def test_report_plots_score_against_dimension(tmp_path: Path) -> None:
    from cl_bench.reporting.report import write_report

    rows = []
    for matryoshka in ("None", "[32, 16, 8]"):
        for dim in (32, 16, 8):
            for seed in (1, 2):
                score = 80 - (32 / dim) * (1 if matryoshka != "None" else 3) + seed * 0.1
                rows.append({"run_id": f"{matryoshka}{dim}{seed}", "status": "FINISHED",
                             "tags.mlflow.runName": f"m={matryoshka} k={dim} s={seed}",
                             "params.train.matryoshka_dims": matryoshka, "params.eval.truncate_dim": str(dim),
                             "params.seed": str(seed), "metrics.sts_avg": score, "metrics.stsb": score})
    report = write_report(pd.DataFrame(rows), tmp_path)
    assert (tmp_path / "truncation.png").is_file() and tmp_path / "truncation.png" in report.files
    assert "Score against embedding dimension" in (tmp_path / "report.md").read_text()
    points = report.sweep.points
    plain_8 = points[(points["eval.truncate_dim"] == 8) & points["train.matryoshka_dims"].isna()]
    assert math.isclose(plain_8["mean"].iloc[0], 80 - 12 + 0.15)


@pytest.mark.slow
def test_minilm_at_its_full_width_scores_exactly_as_untruncated(data_dir: Path) -> None:
    """all-MiniLM-L6-v2, STS-B test: K = 384 is the untruncated figure to the last digit; K = 64 is lower."""
    from cl_bench.models.encoder import build_encoder

    encoder = build_encoder(str(data_dir.parent / "models" / "all-MiniLM-L6-v2"), pooler="avg", fresh_mlp=False)
    options = EvalOptions(anisotropy=False, align_uniform_split="test", backend="torch", cache=True, cache_dir=None)
    full = evaluate(encoder, data_dir, ["stsb"], options)
    assert evaluate(encoder, data_dir, ["stsb"], replace(options, truncate_dim=384))["stsb"] == full["stsb"]
    assert evaluate(encoder, data_dir, ["stsb"], replace(options, truncate_dim=64))["stsb"] < full["stsb"]
