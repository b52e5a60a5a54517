"""Every option of every config group composes, and every loss, augmentation and pooler option builds its object
through the route the job takes (issue 36, item 3; the methods: tests/config/test_options_act.py trains each one a step)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from cl_bench.commands.cli import register_schemas  # noqa: F401 (importing the CLI registers the schema)
from cl_bench.config import build_spec
from cl_bench.config.catalog import CONF_DIR, GROUPS, options

#: presets composed with `+experiment/points=NAME` (a sweep point added to a preset), the others with group=option
POINTS = "points/"


def _override(group: str, option: str) -> str:
    if group == "experiment" and option.startswith(POINTS):
        return f"+experiment/points={option[len(POINTS):]}"
    return f"{group}={option}"


@functools.cache
def _compose_all(group: str) -> dict[str, object]:
    """Every option of ``group`` composed (once per session: the loss and augmentation tests build from them)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return {option: compose("config", overrides=[_override(group, option)])
                for option in sorted(options(group, internal=True))}


@pytest.mark.parametrize("group", GROUPS)
def test_every_option_of_every_group_composes(group: str, data_dir: Path) -> None:
    """Each ``group=option`` composes against the schema and resolves (no missing or mistyped value)."""
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    composed = _compose_all(group)
    assert composed, group
    for option, cfg in composed.items():
        cfg.paths.output_dir = "run_dir"  # Hydra's run directory (${hydra:runtime.output_dir}): set by a launched job
        container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
        assert isinstance(container, dict) and container["mode"] in ("train", "eval"), (group, option)


def test_every_loss_option_builds_its_function(data_dir: Path) -> None:
    """``loss=NAME``: the job's :func:`cl_bench.train.loop.build_loss` gives a callable for every option."""
    from cl_bench.train.loop import build_loss

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    for option, cfg in _compose_all("loss").items():
        if not cfg.loss.get("_target_"):
            continue  # a method's default that has no loss (its method uses none)
        assert callable(build_loss(build_spec(cfg.loss, "loss"))), option


def test_every_augmentation_option_instantiates(data_dir: Path) -> None:
    """``augmentation=NAME``: the job's route, :func:`cl_bench.specs.build`, builds it from its checked spec (its
    model, if any, loads at ``setup``)."""
    from cl_bench.config import build_spec
    from cl_bench.specs import build

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    for option, cfg in _compose_all("augmentation").items():
        built = build(OmegaConf.to_container(cfg.augmentation, resolve=True))
        assert type(built).__module__.startswith("cl_bench.augment."), option
        assert built.spec == build_spec(cfg.augmentation, "augmentation"), option


@pytest.mark.parametrize("training", [True, False])
def test_every_pooler_option_builds_an_encoder(training: bool, tiny_bert: Path, data_dir: Path) -> None:
    """``pooler=NAME``: :func:`cl_bench.models.encoder.encoder_from_config` (training and ``mode=eval``) builds an
    encoder that pools with it and encodes two sentences."""
    from cl_bench.models.encoder import encoder_from_config

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    for option, cfg in _compose_all("pooler").items():
        cfg.model.name_or_path = str(tiny_bert)
        encoder = encoder_from_config(cfg.model, cfg.pooler, training=training)
        assert encoder.pooler == option
        assert encoder.encode(["a sentence .", "another one ."], batch_size=2).shape == (2, 32), option


def test_each_method_alone_gets_the_loss_its_yaml_names(data_dir: Path) -> None:
    """A method's default loss and augmentation are one mechanism: its YAML's ``override /GROUP@_group_: NAME``
    (conf/config.yaml lists both groups before the method); ``loss=NAME`` on the command line still wins."""
    from cl_bench.config.catalog import default_loss

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for method in sorted(options("method")):
            cfg = compose("config", overrides=[f"method={method}"], return_hydra_config=True)
            assert cfg.hydra.runtime.choices.loss == default_loss(method) == cfg.loss.name, method
            chosen = compose("config", overrides=[f"method={method}", "loss=ntxent"], return_hydra_config=True)
            assert chosen.hydra.runtime.choices.loss == "ntxent" and chosen.loss.name == "ntxent", method
    assert [default_loss(m) for m in ("simcse", "sg_opt", "cert", "sbert", "is_bert")] == [
        "infonce", "sg_opt", "moco", "sbert_softmax", "jsd"]
