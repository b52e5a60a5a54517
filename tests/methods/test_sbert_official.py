"""Sentence-BERT and BSL as their official code ran them (issue 28 points 5-7, 9): the presets' optimiser
and checkpoint selection, and ``method.train_classifier`` (v0.2.0's never-updated softmax classifier)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from conftest import build_objective_method as build
from conftest import params_of
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import ConfigError, validate
from cl_bench.train.loop import make_optimizer
from cl_bench.utils.optim import AdamWNoBiasCorrection


def _preset(data_dir: Path, tiny_bert: Path, overrides: list[str]):  # noqa: ANN202
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[*overrides, f"model.name_or_path={tiny_bert}", "paths.output_dir=out"])
    validate(cfg, overrides)
    return cfg


@pytest.mark.parametrize("preset", ["sbert_nli", "sbert_stsb", "sbert_triplet_nli"])
def test_sbert_presets_train_as_v020_fit(preset: str, tiny_bert: Path, data_dir: Path) -> None:
    """v0.2.0 fit(): AdamW(correct_bias=False, eps=1e-6), weight decay 0.01; dev: best of three similarities."""
    data = "data.train_file=" + {
        "sbert_nli": f"{data_dir}/nli/snli_senteval/s1.dev.gz", "sbert_stsb": f"{data_dir}/sts/STSBenchmark/sts-train.csv",
        "sbert_triplet_nli": f"{data_dir}/nli/snli_devtest_triples_for_simcse.csv.gz"}[preset]
    cfg = _preset(data_dir, tiny_bert, [f"experiment={preset}", data])
    assert (cfg.train.adam_bias_correction, cfg.train.adam_eps, cfg.train.weight_decay, cfg.train.max_grad_norm) == (
        False, 1e-6, 0.01, 1.0)
    assert cfg.train.select_metric == "stsb_dev_max_similarity_no_dot"
    optimizer = make_optimizer(torch.nn.Linear(4, 2), cfg.train)  # any module: the optimiser's class and eps
    assert isinstance(optimizer, AdamWNoBiasCorrection) and optimizer.defaults["eps"] == 1e-6
    # the switch back to torch's AdamW, cosine selection
    back = _preset(data_dir, tiny_bert, [f"experiment={preset}", data, "train.adam_bias_correction=true",
                                         "train.adam_eps=1e-8", "train.select_metric=stsb_dev"])
    optimizer = make_optimizer(torch.nn.Linear(4, 2), back.train)
    assert type(optimizer) is torch.optim.AdamW and optimizer.defaults["eps"] == 1e-8


def test_byol_wiki_selects_and_steps_as_bsl(tiny_bert: Path, data_dir: Path) -> None:
    """BSL: transformers.AdamW with its default eps 1e-6 (bias correction on); the best of four Spearmans."""
    cfg = _preset(data_dir, tiny_bert, ["experiment=byol_wiki", f"data.train_file={data_dir}/corpus/wiki1m_for_simcse.head.txt"])
    assert (cfg.train.adam_eps, cfg.train.adam_bias_correction, cfg.train.select_metric) == (
        1e-6, True, "stsb_dev_max_similarity")


def _train(method, rows, cfg, steps: int = 2) -> None:  # noqa: ANN001
    """``steps`` optimizer steps as the training loop makes them: the preset's optimiser over the method's
    parameters, clipping over the optimiser's parameters, then the after-step hook."""
    optimizer = make_optimizer(method, cfg.train)
    trainable = [p for group in optimizer.param_groups for p in group["params"]]
    method.train()
    for _ in range(steps):
        method.training_step(rows)["loss"].backward()
        assert method.classifier.weight.grad is not None and method.classifier.weight.grad.abs().sum() > 0
        torch.nn.utils.clip_grad_norm_(trainable, cfg.train.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        method.on_after_step()


@pytest.mark.parametrize("train_classifier", [True, False])
def test_train_classifier_switch(train_classifier: bool, tiny_bert: Path, data_dir: Path) -> None:
    """true: the classifier follows its gradient; false (v0.2.0): it gets a gradient (clipped with the
    encoder's) but keeps its initial weights exactly, weight decay included, while the encoder trains."""
    overrides = ["method=sbert", "loss=sbert_softmax", "data=snli_labeled", "data.limit=8", "train.weight_decay=0.01",
                 "train.adam_bias_correction=false", "train.adam_eps=1e-6", "train.lr=1e-3",
                 f"method.train_classifier={str(train_classifier).lower()}"]
    method, cfg = build(tiny_bert, data_dir, overrides)
    rows = method.read_corpus(cfg.data.train_file)
    classifier = [p.detach().clone() for p in method.classifier.parameters()]
    encoder = [p.detach().clone() for p in method.encoder.parameters()]
    _train(method, rows, cfg)
    unchanged = [torch.equal(p, q) for p, q in zip(method.classifier.parameters(), classifier, strict=True)]
    assert unchanged == [not train_classifier] * 2
    assert not all(torch.equal(p, q) for p, q in zip(method.encoder.parameters(), encoder, strict=True))


def test_train_classifier_acts_only_with_a_classifier(tiny_bert: Path, data_dir: Path) -> None:
    acting = _preset(data_dir, tiny_bert, ["method=sbert", "data=snli_labeled", "method.train_classifier=false"])
    assert params_of(acting)["method.train_classifier"] is False
    overrides = ["method=sbert", "loss=sbert_regression", "data=stsb_train", "method.train_classifier=false"]
    with pytest.raises(ConfigError, match=r"^method.train_classifier: has no effect on this run: .+") as err:
        _preset(data_dir, tiny_bert, overrides)
    assert "\n" not in str(err.value)
    bad = ["method=sbert", "data=snli_labeled", "method.train_classifier=sometimes"]
    with pytest.raises(ConfigCompositionException, match="method.train_classifier=sometimes") as err:
        _preset(data_dir, tiny_bert, bad)  # typed by SBERT's spec (its schema): cl-bench says it in one line
    assert "is not a valid bool" in str(err.value.__cause__)
