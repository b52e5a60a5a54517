"""SG-OPT as the official code ran it: BERT_F with dropout (method.frozen_dropout) and the preset's switches."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import yaml_spec
from cl_bench.losses.sg_opt import sg_contrastive_loss
from cl_bench.methods.base import MethodContext
from cl_bench.methods.sg_opt.modeling import SelfGuided
from cl_bench.models.encoder import build_encoder

BATCH = ["a man plays the guitar", "the dog runs in the park", "two children eat food"]


def _method(tiny_bert: Path, frozen_dropout: bool) -> SelfGuided:
    encoder = build_encoder(str(tiny_bert), pooler="cls_before_pooler", dropout=0.3, max_length=16)
    context = MethodContext(encoder=encoder, loss=functools.partial(sg_contrastive_loss, tau=0.01, objective="opt3"),
                            augmentation=None, model_name_or_path=str(tiny_bert))
    return SelfGuided(context, yaml_spec("method", "sg_opt", projection_size=8, frozen_dropout=frozen_dropout))


def _two_views(method: SelfGuided) -> tuple[torch.Tensor, torch.Tensor]:
    features = method.tokenize(BATCH)
    torch.manual_seed(0)
    first = method.layer_views(features)
    return first, method.layer_views(features)


def test_frozen_dropout_draws_new_views_in_training_only(tiny_bert: Path) -> None:
    official = _method(tiny_bert, frozen_dropout=True)
    official.train()
    first, second = _two_views(official)
    assert not torch.allclose(first, second)  # BERT_F's dropout is on
    assert not official.frozen.training or official.training
    official.eval()
    first, second = _two_views(official)
    assert torch.equal(first, second)  # evaluation: no dropout anywhere

    guide = _method(tiny_bert, frozen_dropout=False)
    guide.train()
    first, second = _two_views(guide)
    assert torch.equal(first, second)  # the paper's fixed guide
    assert not guide.frozen.training


def test_sg_opt_preset_is_the_official_behaviour(tiny_bert: Path, data_dir: Path) -> None:
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=sg_opt_bert", f"model.name_or_path={tiny_bert}"])
    assert cfg.method.frozen_dropout is True
    assert (cfg.train.early_stopping_patience, cfg.train.early_stopping_rule, cfg.train.final_weights) == (10, "drops", "last")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        plain = compose("config", overrides=["method=sg_opt", f"model.name_or_path={tiny_bert}"])
    assert plain.method.frozen_dropout is False and plain.train.final_weights == "best"
