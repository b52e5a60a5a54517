"""The rejections that depend on a method's or loss's declarations, answered before torch is imported.

A loss of a kind the method does not call, a group the method does not use (``method=sbert
augmentation=eda_delete``), a prompt key the method sets itself, a key its constructor does not take
or a value of the wrong type depend on what the method's class and the loss's function declare
(``Method.uses``, ``Method.loss_kinds``, the ``loss_kind`` mark, the keyword parameters). The job's
validation (:func:`cl_bench.config.check_choices`) decides them with the same functions used here;
these read the declarations from the source (:mod:`cl_bench.declarations`), so ``cl-bench`` runs them
on the composed config before Hydra's job starts and a wrong choice answers in about a second, not
after torch, transformers and MLflow have loaded.

The checks that run the method's, loss's or augmentation's own code (``check_config``, ``check_setting``,
``inert_keys``) stay in the job: they need the imported class.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cl_bench.catalog import CONF_DIR
from cl_bench.config import ConfigError

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from cl_bench.declarations import MethodDeclaration

#: the groups (and their keys) whose override can meet a rejection decided here
_DECIDING = ("method", "loss", "augmentation", "pooler", "model", "experiment")


def check_declared_choices(argv: Sequence[str], conf_dir: Path = CONF_DIR) -> None:
    """Reject a single training run whose choices the declarations already rule out (one line, names the key).

    Only a run Hydra would start as one job is judged here, on the config it will get: a multirun (``-m``,
    or a preset that sets ``hydra.mode``) records each failed job, as before, and a command line with
    Hydra flags or one that does not compose is left to Hydra. A declaration that cannot be read without
    importing its module (a computed value) leaves the check to the job.

    Raises:
        ConfigError: the first rejection of :func:`cl_bench.config.check_overrides_act` that the
            declarations decide (loss kind, unused group, prompt key, a pooler's own key).
    """
    if any(arg.startswith("-") for arg in argv):
        return
    overrides = [arg for arg in argv if "=" in arg]
    if not any(arg.split("=", 1)[0].lstrip("+~").split(".")[0].split("/")[0] in _DECIDING for arg in overrides):
        return  # the defaults fit one another: only these groups can bring a choice the declarations rule out
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = compose("config", overrides=overrides, return_hydra_config=True)
    except Exception:  # noqa: BLE001 (what does not compose gets Hydra's own message)
        return
    if "MULTIRUN" in str(cfg.hydra.get("mode")) or cfg.mode != "train":
        return  # mode=eval: the job first reads the pooling recorded with the encoder
    from cl_bench.declarations import NotStatic, loss_declaration, method_declaration

    try:
        method = method_declaration(str(cfg.method._target_), static=True)
        if "loss" in method.uses and cfg.loss.get("_target_"):
            loss_declaration(str(cfg.loss._target_), static=True)
    except (NotStatic, ImportError, AttributeError, ValueError, SyntaxError):
        return  # the job imports them and judges
    try:
        _check(cfg, method)
    except ConfigError:
        raise
    except Exception:  # noqa: BLE001 (e.g. an interpolation that does not resolve: the job says it as it did)
        return


def _check(cfg: DictConfig, method: MethodDeclaration) -> None:
    """The checks of :func:`check_declared_choices` on the composed config."""
    from cl_bench.config import (
        _covered,
        check_loss_kind,
        check_node_against,
        check_prompt_options,
        loss_inert_keys,
        override_keys,
        pooler_inert_keys,
        prompt_inert_keys,
        unused_groups,
    )
    from cl_bench.declarations import NotStatic, loss_declaration, signature, supplied_inputs

    check_prompt_options(cfg)  # the job's first check (cl_bench.config.check_choices)
    # each option's keys and value types against its target's parameters, in the job's order (loss,
    # augmentation, method: cl_bench.config.check_choices); a signature only code tells is the job's to read
    for group, skip in (("loss", ("name",)), ("augmentation", ()), ("method", ("name",))):
        if group != "method" and (group not in method.uses or not cfg[group].get("_target_")):
            continue
        try:
            found = signature(str(cfg[group]._target_))
        except (NotStatic, ImportError, AttributeError, ValueError, SyntaxError):
            continue
        check_node_against(cfg[group], group, skip, found.params, found.accepts_kwargs, found.hints)
    if "loss" in method.uses:
        check_loss_kind(cfg)
    # the job's inert keys that the declarations and the config decide. The job's others are other keys
    # (method.* from code, eval.*, model.lora.*, train.*), so a key covered here is covered by the same
    # entry in the job and gets the job's own reason
    inert = unused_groups(cfg)
    if "loss" in method.uses and cfg.loss.get("_target_"):
        try:
            supplied: frozenset[str] | None = supplied_inputs(str(cfg.method._target_))
        except (NotStatic, AttributeError):
            supplied = None  # computed from the method's values: the job judges those needs
        name = cfg.method.get("name", method.class_name)
        inert.update(loss_inert_keys(cfg, name, loss_declaration(str(cfg.loss._target_)).needs, supplied))
    inert.update({k: v for k, v in pooler_inert_keys(cfg).items() if k not in inert})
    inert.update({k: v for k, v in prompt_inert_keys(cfg).items() if _covered(k, inert) is None})
    for key in override_keys(list(cfg.hydra.overrides.task)):
        reason = _covered(key, inert)
        if reason is not None:
            raise ConfigError(f"{key}: has no effect on this run: {reason}")
