"""A run's MLflow params from plain dicts: the resolved config's values that acted, named as on the command line.

The job computes them once from the config it ran and the inert keys its preflight found
(:attr:`cl_bench.run_specs.RunSpecs.inert`); a resume compares them with the run's ``params.json``
(:mod:`cl_bench.config.run_folder`). Neither omegaconf nor a spec is read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cl_bench.specs import covered

#: keys whose value is the top-level shortcut they interpolate (logged once, as the shortcut)
SHORTCUT_COPIES = {"model.dropout": "dropout", "train.batch_size": "batch_size"}
#: config groups whose choice is a knob of the run, logged as a param under the group's name (``method=simcse``)
KNOB_GROUPS = ("method", "loss", "augmentation", "model", "pooler", "data", "train", "eval", "experiment")
#: param prefixes that say how a run is recorded, not what it trains or how it is scored (the logged config file
#: ``config.yaml`` keeps them)
_RECORDING_PREFIXES = ("logger.", "paths.")


def flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten a nested config into ``a.b.c`` keys (lists stay values), for MLflow params."""
    import pandas as pd

    return pd.json_normalize(dict(config), sep=".").iloc[0].to_dict() if config else {}


def flat_params(config: Mapping[str, Any], inert: Mapping[str, str]) -> dict[str, Any]:
    """The run's params for MLflow: ``config`` (the resolved config as plain containers) flattened to dotted keys,
    without the ``inert`` keys, the shortcut copies (``model.dropout``, ``train.batch_size``) and Hydra's
    ``_partial_`` markers."""
    flat = flatten(config)
    for copy, shortcut in SHORTCUT_COPIES.items():  # the value that acted: `train.batch_size=8` given directly
        if copy in flat and shortcut in flat:      # (not through the shortcut) is logged as batch_size 8
            flat[shortcut] = flat[copy]
    return {
        k: v for k, v in flat.items()
        if covered(k, inert) is None and k not in SHORTCUT_COPIES and not k.endswith("._partial_")
    }


def knob_params(acting: Mapping[str, Any], choices: Mapping[str, Any]) -> dict[str, Any]:
    """The MLflow params of a run: the knobs a researcher turns, named as on the command line.

    From :func:`flat_params` (``acting``): each acting config group's choice under the group's name
    (``method: simcse``, ``loss: infonce``, ``model: bert_base_uncased``, from Hydra's ``runtime.choices``), then
    the scalar keys (``loss.tau``, ``train.lr``, ``dropout``). Left out (the run's ``config.yaml`` artifact keeps
    them): import paths and other Hydra internals (a key part starting with ``_``: ``loss._target_``), a group's
    ``name`` key (its choice stands for it), and the recording keys (``logger.*``, ``paths.*``). A group acts when
    one of its keys does (an augmentation a method does not use is inert and gets no param).
    """
    groups = {g: str(choices[g]) for g in KNOB_GROUPS
              if choices.get(g) is not None and any(k.startswith(f"{g}.") for k in acting)}
    scalars = {k: v for k, v in acting.items()
               if not any(part.startswith("_") for part in k.split("."))
               and not k.startswith(_RECORDING_PREFIXES)
               and not (k.endswith(".name") and k.count(".") == 1 and k.split(".")[0] in groups)}
    return {**groups, **scalars}
