"""The composed config as the typed objects the trainer receives: :func:`run_specs_from_config` builds a
:class:`cl_bench.run_specs.RunSpecs` (the run groups' dataclasses, the ``eval`` group's
:data:`cl_bench.eval.options.EvalConfig`, and the options' specs) once per job, after the preflight.

Torch-free: the entry point builds it before any model loads.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from cl_bench.config import build_spec, option_spec
from cl_bench.run_specs import PathsConfig, RunSpecs

__all__ = ["RunSpecs", "run_specs_from_config"]

#: the groups whose node is a dataclass of the schema (``CLBenchConfig``): converted as they are
RUN_GROUPS = ("model", "pooler", "data", "train", "eval", "logger")


def run_specs_from_config(cfg: DictConfig) -> RunSpecs:
    """The run's typed specs from its composed config (interpolations resolved).

    The option groups a run does not use are None: all three in ``mode=eval``; the loss or augmentation of a method
    that declares it does not use the group (:attr:`cl_bench.specs.MethodSpec.uses`).

    Raises:
        ConfigError: one line naming the key (an option node whose keys or types do not fit its spec), as the
            preflight says it; after the preflight passed, never.
    """
    groups: dict[str, Any] = {group: OmegaConf.to_object(cfg[group]) for group in RUN_GROUPS}
    method = loss = augmentation = None
    if str(cfg.mode) == "train":
        method = build_spec(cfg.method, "method")
        if "loss" in method.uses:
            loss = option_spec(cfg, "loss")
        if "augmentation" in method.uses and cfg.augmentation.get("_target_"):
            augmentation = option_spec(cfg, "augmentation")
    return RunSpecs(mode=str(cfg.mode), seed=int(cfg.seed), paths=_paths(cfg.paths), method=method, loss=loss,
                    augmentation=augmentation, **groups)


def _paths(node: DictConfig) -> PathsConfig:
    # paths.output_dir is Hydra's run folder (${hydra:runtime.output_dir}): a config composed from Python, outside a
    # Hydra job (tests, notebooks), has none; the trainer is given its run folder as an argument anyway
    output_dir = OmegaConf.select(node, "output_dir", throw_on_resolution_failure=False)
    return PathsConfig(data_dir=str(node.data_dir), output_dir="" if output_dir is None else str(output_dir))
