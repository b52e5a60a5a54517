"""Ablation presets: each composes into the paper's grid, every job's config is valid, seeds multiply it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import job_config, sweep_jobs
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import validate, yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder
from cl_bench.reporting.reference_results import load_ablations

MINE = ("ablation_dropout", "ablation_batch_size", "ablation_pooling", "ablation_mlm_weight", "ablation_tau",
        "ablation_augmentation", "cpu_repro")


@pytest.mark.parametrize(
    ("experiment", "jobs"),
    [("ablation_dropout", 8), ("ablation_batch_size", 5), ("ablation_pooling", 4), ("ablation_mlm_weight", 4),
     ("ablation_tau", 5), ("ablation_augmentation", 11), ("cpu_repro", 12)],
)
def test_preset_grid_size_and_seeds(experiment: str, jobs: int) -> None:
    assert len(sweep_jobs(experiment)) == jobs
    with_seeds = sweep_jobs(experiment, ["seed=42,43,44"])
    assert len(with_seeds) == 3 * jobs
    assert sorted({arg for job in with_seeds for arg in job if arg.startswith("seed=")}) == ["seed=42", "seed=43", "seed=44"]


def test_dropout_grid_is_table_3_with_a_real_fixed_mask(data_dir: Path, tiny_bert: Path) -> None:
    seen = []
    for job in sweep_jobs("ablation_dropout"):
        cfg = job_config(job, data_dir, tiny_bert)
        validate(cfg)  # e.g. method.fixed_dropout_mask is a real SimCSE keyword argument
        seen.append((cfg.dropout, cfg.model.dropout, bool(cfg.method.fixed_dropout_mask), cfg.loss.tau))
        assert cfg.logger.experiment_name == "ablation_dropout" and cfg.pooler.mlp_only_train
    assert seen == [(p, p, False, 0.05) for p in (0.0, 0.01, 0.05, 0.1, 0.15, 0.2, 0.5)] + [(0.1, 0.1, True, 0.05)]


def test_pooling_grid_is_table_6(data_dir: Path, tiny_bert: Path) -> None:
    seen = []
    for job in sweep_jobs("ablation_pooling"):
        cfg = job_config(job, data_dir, tiny_bert)
        validate(cfg)
        # only the pooler keys that act on each point (the MLP for cls, the first layer for avg_first_last)
        seen.append((cfg.pooler.name, cfg.pooler.mlp_only_train if cfg.pooler.name == "cls" else None,
                     cfg.pooler.first_layer if cfg.pooler.name == "avg_first_last" else None))
    assert seen == [("cls", False, None), ("cls", True, None), ("cls_before_pooler", None, None), ("avg_first_last", None, 0)]
    # the same points on the supervised recipe (Table 6's sup column)
    cfg = job_config(["experiment=simcse_sup_bert", "+experiment/points=pooling_cls_no_mlp"], data_dir, tiny_bert)
    assert cfg.method.name == "simcse_sup" and cfg.pooler.name == "cls_before_pooler"


@pytest.mark.parametrize(
    ("experiment", "key", "values"),
    [
        ("ablation_batch_size", "batch_size", [32, 64, 128, 256, 512]),
        ("ablation_mlm_weight", "method.mlm_weight", [0.0, 0.01, 0.1, 1.0]),
        ("ablation_tau", "loss.tau", [0.001, 0.01, 0.05, 0.1, 1.0]),
    ],
)
def test_supervised_grids(experiment: str, key: str, values: list, data_dir: Path, tiny_bert: Path) -> None:
    from omegaconf import OmegaConf

    seen = []
    for job in sweep_jobs(experiment):
        cfg = job_config(job, data_dir, tiny_bert)
        assert cfg.method.name == "simcse_sup" and cfg.logger.experiment_name == experiment
        seen.append(OmegaConf.select(cfg, key))
    assert seen == values


def test_augmentation_reuses_the_table_1_grid(data_dir: Path, tiny_bert: Path) -> None:
    jobs = sweep_jobs("ablation_augmentation")
    assert jobs == [[*job[:-1], "experiment=ablation_augmentation"] for job in sweep_jobs("augmentation_comparison")]
    cfg = job_config(jobs[0], data_dir, tiny_bert)
    assert cfg.logger.experiment_name == "ablation_augmentation" and cfg.method.augment_both_views is False


def test_cpu_repro_is_the_union_of_the_dropout_and_tau_grids(data_dir: Path, tiny_bert: Path) -> None:
    points = []
    for job in sweep_jobs("cpu_repro"):
        cfg = job_config(job, data_dir, tiny_bert)
        validate(cfg)
        assert cfg.train.device == "cpu" and cfg.data.name == "wiki1m_head" and cfg.pooler.name == "avg"
        points.append((cfg.dropout, bool(cfg.method.fixed_dropout_mask), cfg.loss.tau))
    dropout_table = [(p, False, 0.05) for p in (0.0, 0.01, 0.05, 0.1, 0.15, 0.2, 0.5)] + [(0.1, True, 0.05)]
    tau_table = [(0.1, False, t) for t in (0.001, 0.01, 0.1, 1.0)]
    assert points == dropout_table + tau_table
    # the preset points at the shared MiniLM beside the data root
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=cpu_repro"])
    assert Path(cfg.model.name_or_path).resolve() == (data_dir / ".." / "models" / "all-MiniLM-L6-v2").resolve()


@pytest.mark.parametrize(
    ("experiment", "seed", "batch_size"),
    [("simcse_sup_bert", 42, 512), ("sg_opt_bert", 1, 16), ("cpu_repro", 42, 32), ("quickthoughts_bert", 42, 400)],
)
def test_presets_set_top_level_shortcuts_and_the_command_line_wins(
    experiment: str, seed: int, batch_size: int, data_dir: Path, tiny_bert: Path
) -> None:
    # `_self_` comes first in config.yaml, so a preset's seed/batch_size/dropout override its defaults,
    # the logged shortcut and the trained value agree, and the command line still wins over the preset.
    cfg = job_config([f"experiment={experiment}"], data_dir, tiny_bert)
    assert (cfg.seed, cfg.batch_size, cfg.train.batch_size) == (seed, batch_size, batch_size)
    cfg = job_config([f"experiment={experiment}", "batch_size=8", "seed=7", "dropout=0.2"], data_dir, tiny_bert)
    assert (cfg.seed, cfg.train.batch_size, cfg.model.dropout) == (7, 8, 0.2)


@pytest.mark.slow  # ~20 s: composes every job of every ablation grid
def test_every_point_of_every_grid_has_a_paper_row(data_dir: Path, tiny_bert: Path) -> None:
    # The report can compare every job of the presets to a figure of the paper.
    ablations = load_ablations()
    for experiment in MINE:
        specs = [s for s in ablations.values() if experiment in s.experiments]
        assert specs, experiment
        for job in sweep_jobs(experiment):
            cfg = job_config(job, data_dir, tiny_bert)
            run = _as_run_row(cfg, experiment, job)
            matched = [s.point_of(run) for s in specs if s.selects(run)]
            assert any(p is not None and p.paper is not None for p in matched), (experiment, job)


def _as_run_row(cfg: DictConfig, experiment: str, job: list[str]) -> dict[str, str]:
    """What cl-bench logs to MLflow for this config: flattened resolved params and the tags the report reads."""
    from omegaconf import OmegaConf

    from cl_bench.tracking.params import flatten

    # paths.output_dir needs a running Hydra job to resolve; the report never reads it
    resolvable = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "paths"])
    row = {f"params.{k}": str(v) for k, v in flatten(OmegaConf.to_container(resolvable, resolve=True)).items()}
    augmentation = next((a.split("=", 1)[1] for a in job if a.startswith("augmentation=")), "dropout")
    row.update({"tags.method": cfg.method.name, "tags.experiment": experiment, "tags.augmentation": augmentation})
    return row


def _simcse(tiny_bert: Path, fixed: bool) -> SimCSE:
    import functools

    torch.manual_seed(0)
    encoder = build_encoder(str(tiny_bert), pooler="cls", dropout=0.1, max_length=16, mlp_only_train=True)
    context = MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0), augmentation=Dropout(DropoutSpec()))
    method = SimCSE(context, yaml_spec("method", "simcse", fixed_dropout_mask=fixed))
    method.train()
    return method


def test_fixed_dropout_mask_gives_identical_views(tiny_bert: Path) -> None:
    sentences = ["a man plays the guitar", "the dog runs in the park", "two children sit at a table"]
    independent = _simcse(tiny_bert, fixed=False)
    z1, z2, _ = independent.embed_views(sentences, sentences)
    assert not torch.allclose(z1, z2, atol=1e-4)  # dropout on: the two views differ
    fixed = _simcse(tiny_bert, fixed=True)
    torch.manual_seed(7)
    z1, z2, _ = fixed.embed_views(sentences, sentences)
    assert torch.equal(z1, z2)  # the same mask: bit-identical views
    assert fixed.training_step(sentences)["loss"].requires_grad
    # ... and a mask is still applied: in eval mode (no dropout) the embedding is another one
    fixed.eval()
    with torch.no_grad():
        clean = fixed.encoder(fixed.tokenize(sentences), apply_mlp=True)
    assert not torch.allclose(clean, z1.detach(), atol=1e-4)
    # the RNG advances as if one view had been encoded: the next draw matches a single forward
    torch.manual_seed(7)
    fixed.train()
    fixed.encoder(fixed.tokenize(sentences))
    expected = torch.rand(3)
    torch.manual_seed(7)
    fixed.embed_views(sentences, sentences)
    assert torch.equal(torch.rand(3), expected)
