"""cl-bench's checks before Hydra's job (cl_bench/config/early_checks.py) give the job's own first rejection, or none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from cl_bench.config import ConfigError, catalog, register_schemas, use_recorded_pooling, validate
from cl_bench.config.catalog import CONF_DIR
from cl_bench.config.early_checks import check_command
from cl_bench.utils.rundir import ENCODER_META_FILE

register_schemas()  # as cl_bench.commands.cli does on import: config.yaml extends the schema


def _composed(argv: list[str]) -> Any:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=argv, return_hydra_config=True)


def _job(cfg: Any) -> str | None:
    """The job's first rejection: for ``mode=eval`` the recorded pooling first, then :func:`cl_bench.config.validate`."""
    try:
        if cfg.mode == "eval":
            use_recorded_pooling(cfg, list(cfg.hydra.overrides.task))
        validate(cfg, list(cfg.hydra.overrides.task))
    except ConfigError as err:
        return str(err)
    return None


def _command_line_answer(argv: list[str]) -> str | None:
    try:
        check_command(argv)
    except ConfigError as err:
        return str(err)
    return None


ARGVS = [[f"experiment={name}"] for name in sorted(catalog.options("experiment"))] + [
    ["method=diffcse", "method.generator=null", "pooler=avg", "method.projector=mlp"],  # inert off pooler=cls
    ["method=sncse", "augmentation=negation"], ["method=cert", "method.mochi_synthetic=4", "method.mochi_hardest=5"],
    ["method=promptbert", "method.supervised=true", "loss.hard_negative_alpha=0.5"],
    ["method=simcse_sup", "loss.hard_negative_alpha=0.5"], ["train.matryoshka_dims=[64,32]", "loss=infonce"],
    ["method=sbert", "train.matryoshka_dims=[64]"], ["eval.tasks=[transfer]", "eval.seed=3"],
    ["train.num_workers=2", "augmentation=mlm_replace", "train.device=cpu"],
    ["eval.tasks=[transfer]", "eval.transfer_classifier=svm"], ["eval.tasks=[sts,mteb:STS22]", "eval.backend=x"],
    ["eval.postprocess=whitening", "eval.whitening=0"], ["eval.precision=bf16", "train.device=cpu"],
    ["mode=eval", "eval.tasks=[transfer]", "eval.transfer_config=x"], ["mode=eval", "pooler=avg_first_last"],
    ["mode=eval", "loss.tau=0.1"], ["mode=eval", "eval.truncate_dim=0"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) for a in ARGVS])
def test_the_early_answer_is_the_jobs_or_none(argv: list[str]) -> None:
    """On every experiment preset and a few combinations, cl-bench's early check gives the job's first rejection:
    it never rejects what the job accepts, nor names another key, and leaves to the job only what needs a model's
    files (DiffCSE's generator on the hub) or the hardware (bf16)."""
    cfg = _composed(argv)
    if "MULTIRUN" in str(cfg.hydra.get("mode")):
        assert check_command(argv) is None, argv  # a sweep preset: each job is checked by the sweep callback
        return
    early, job = _command_line_answer(argv), _job(cfg)
    assert early == job or (early is None and ("cannot load" in str(job) or "bf16" in str(job))), (argv, early, job)


def test_mode_eval_is_judged_with_the_pooling_recorded_with_the_encoder(tmp_path: Path) -> None:
    """``mode=eval`` of a checkpoint trained with ``avg_first_last``: ``pooler.first_layer=0`` acts there (the config's
    default pooler, ``cls``, would make it inert) and ``pooler.first_layer=5`` gets the job's value error."""
    (tmp_path / "config.json").write_text('{"model_type": "bert", "hidden_size": 32}')
    (tmp_path / ENCODER_META_FILE).write_text('{"pooler": "avg_first_last", "mlp_only_train": false, "first_layer": 1}')
    model = f"model.name_or_path={tmp_path}"
    assert _command_line_answer(["mode=eval", model, "pooler.first_layer=0"]) is None
    assert _job(_composed(["mode=eval", model, "pooler.first_layer=0"])) is None
    argv = ["mode=eval", model, "pooler.first_layer=5"]
    assert _command_line_answer(argv) == _job(_composed(argv)) == "pooler.first_layer: must be 0 or 1, got 5"
    argv = ["mode=eval", model, "eval.truncate_dim=33"]
    assert _command_line_answer(argv) == _job(_composed(argv)) == \
        "eval.truncate_dim: 33 exceeds the model's embedding width 32"


def test_local_model_width_is_what_transformers_reads() -> None:
    """Each model type's width key is the one transformers maps ``hidden_size`` to; the MiniLM's width read from its
    config.json equals ``AutoConfig``'s."""
    from conftest import minilm_path
    from transformers import CONFIG_MAPPING, AutoConfig

    from cl_bench.config import WIDTH_KEYS, local_model_width

    for model_type, key in WIDTH_KEYS.items():
        assert CONFIG_MAPPING[model_type].attribute_map.get("hidden_size", "hidden_size") == key, model_type
    minilm = minilm_path()
    assert local_model_width(str(minilm)) == AutoConfig.from_pretrained(str(minilm)).hidden_size == 384
    assert local_model_width("bert-base-uncased") is None
