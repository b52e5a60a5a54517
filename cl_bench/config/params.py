"""A composed config's MLflow params, given the keys that cannot act on it (the preflight's
:attr:`cl_bench.run_specs.RunSpecs.inert`): the job's records, a resume's comparison and a sweep's key collection all
take the inert keys their preflight found, so none builds the specs again. Torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from cl_bench.tracking.params import flat_params


def acting_params(cfg: DictConfig, inert: Mapping[str, str]) -> dict[str, Any]:
    """The params of ``cfg`` for MLflow: :func:`cl_bench.tracking.params.flat_params` of its resolved values, less
    the ``inert`` keys (:func:`cl_bench.config.inert_keys` finds them from a composed config)."""
    return flat_params(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True), inert)
