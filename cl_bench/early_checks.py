"""The job's choice checks (:func:`cl_bench.config.check_choices`), answered before torch is imported.

A loss of a kind the method does not call, a group the method does not use (``method=sbert
augmentation=eda_delete``), a key a method's constructor does not take, a method's, loss's or
augmentation's own value check (``method=cert method.queue_size=0``, ``loss=mixcse loss.lambd=2``), a
method key that cannot act (``method.mochi_hardest`` with MoCHi off), Matryoshka sizes or
``eval.truncate_dim`` wider than a local model, the ``eval.*`` values (:func:`cl_bench.config.check_eval_options`):
all these depend on code in modules that import torch.
``cl-bench`` runs the job's own :func:`~cl_bench.config.check_choices` on the composed config before
Hydra's job starts, with those modules light-loaded (:mod:`cl_bench.light_load`): the same checks, in
the same order, with the same messages, in about a second instead of after torch, transformers and
MLflow have loaded.

A check that needs what only the real import gives (a tensor, a model's files from the hub cache) stops
the light run with no answer: the job gives its own (that one, or a later one: the checks before it
passed). An answer that touched anything unavailable is never given. A method whose module the light
loader cannot run (an installed package's) gets the rejections its declarations decide, read from the
source (:mod:`cl_bench.declarations`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cl_bench.catalog import CONF_DIR
from cl_bench.config import ConfigError

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from cl_bench.declarations import MethodDeclaration

def check_declared_choices(argv: Sequence[str], conf_dir: Path = CONF_DIR) -> None:
    """Reject a single training run that the job's choice checks reject (one line, names the key), before torch.

    Only a run Hydra would start as one job is judged here, on the config it will get (``mode=eval``: with the
    pooling recorded with the encoder, as the job applies it first): a multirun (``-m``, or a preset that sets
    ``hydra.mode``) records each failed job, as before, and a command line with Hydra flags or one that does not
    compose is left to Hydra. A check that only the real import decides
    stops the light run (the declarations read from the source still decide theirs: :func:`_check`).

    Raises:
        ConfigError: the first rejection of the job's checks before model and data (:func:`check_composed`), in its words.
    """
    if any(arg.startswith("-") for arg in argv):
        return
    overrides = [arg for arg in argv if "=" in arg]
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = compose("config", overrides=overrides, return_hydra_config=True)
    except Exception:  # noqa: BLE001 (what does not compose gets Hydra's own message)
        return
    if "MULTIRUN" in str(cfg.hydra.get("mode")):
        return
    if cfg.mode == "eval":  # the job first takes the pooling recorded with the encoder, then checks the values
        from cl_bench.config import check_values, use_recorded_pooling

        try:
            with _no_warnings():  # the job gives them
                use_recorded_pooling(cfg, list(cfg.hydra.overrides.task))
        except Exception:  # noqa: BLE001 (e.g. an unreadable cl_bench_encoder.json: the job says it as it did)
            return
        check_values(cfg)
    check_composed(cfg)


@contextlib.contextmanager
def _no_warnings() -> Iterator[None]:
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def check_composed(cfg: DictConfig) -> None:
    """:func:`check_declared_choices` on a composed config (with its ``hydra`` node): the job's
    :func:`~cl_bench.config.check_choices`, then its :func:`~cl_bench.config.check_eval_options`.

    Raises:
        ConfigError: the first rejection of those checks, in the job's words.
    """
    from cl_bench import light_load
    from cl_bench.config import check_choices, check_eval_options
    from cl_bench.declarations import NotStatic

    try:
        with light_load.session() as state:
            try:
                light_load.load(str(cfg.method._target_))
            except NotStatic:  # a module the light loader cannot run (an installed package's)
                runs_light = False
            else:
                runs_light = True
                check_choices(cfg, list(cfg.hydra.overrides.task))  # the job's checks, its classes light-loaded
                check_eval_options(cfg)  # the job's next: eval.* values (before it looks for model and data)
    except ConfigError:
        if not state.touched:
            raise
        # the answer used a name only the real import gives: the job's to give
    except (NotStatic, light_load.Unavailable):
        # a check only the real classes decide: the job gives it, or a later one (the checks before it passed)
        pass
    except Exception:  # noqa: BLE001 (e.g. an interpolation that does not resolve: the job says it as it did)
        pass
    else:
        if not runs_light:  # what its source declares, read without running it
            _check_declarations(cfg)
        else:
            check_model_and_data(cfg)


def check_model_and_data(cfg: DictConfig) -> None:
    """The job's next checks (:func:`cl_bench.config.check_model_and_files`): the local paths it names (a corpus outside
    the data root, a ``train.resume`` folder) exist; then, where the job would ask no network and fetch nothing (a local
    model folder, or a hub model under Hugging Face's offline mode, with the data either all there or its downloads
    switched off), the model can be loaded and the data is there (one message names every missing piece), the data
    root and the corpus exist. The backbone options that follow are read by transformers: the job's.

    Raises:
        ConfigError: the job's message.
    """
    from cl_bench.config import _tried_data_options, check_local_paths, needed_files
    from cl_bench.models.hub import (
        ModelLoadError,
        check_model_reachable,
        is_local_path,
        offline,
        wants_decoder,
    )

    check_local_paths(cfg)
    name = str(cfg.model.name_or_path)
    if not (is_local_path(name) or offline()):
        return  # the job probes the hub
    problems = []
    try:
        check_model_reachable(name, wants_decoder(cfg.pooler.get("name"), cfg.model.get("bidirectional")))
    except ModelLoadError as err:
        problems.append(str(err))
    root = Path(cfg.paths.data_dir)
    try:
        wanted = needed_files(cfg)
    except Exception:  # noqa: BLE001 (e.g. an interpolation that does not resolve: the job says it as it did)
        return
    if not all((root / rel).is_file() for _, rel in wanted):
        from cl_bench.data.download import DataDownloadError, downloads_switched_off, ensure_data

        if not downloads_switched_off():
            return  # the job fetches what is missing (first use)
        try:
            ensure_data(root, wanted, tried=_tried_data_options(cfg, list(cfg.hydra.overrides.task)))
        except DataDownloadError as err:
            problems.append(str(err))
    if problems:
        raise ConfigError(" -- and ".join(problems))
    if not root.is_dir():
        return  # the job's message (cl_bench.config.check_model_and_files)
    if cfg.mode == "train" and not Path(str(cfg.data.train_file)).is_file():
        raise ConfigError(f"data.train_file: corpus file not found: {Path(str(cfg.data.train_file))}")


def _check_declarations(cfg: DictConfig) -> None:
    """The rejections the declarations read from the source decide (:func:`_check`), for a method whose module the
    light loader cannot run. (Some of the job's checks come before these and are not run here: with two faults,
    the job may name the other one first.)"""
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
