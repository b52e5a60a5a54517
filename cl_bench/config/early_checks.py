"""Every check of a command that needs no model, answered before torch is imported (``cl-bench``, before Hydra's job).

* The command line: an override Hydra's grammar does not read (with the column: :func:`check_override_syntax`), a
  group option that does not exist, a key that does not exist (with the closest valid key), a
  ``+key`` already in the config, a value of the wrong type, a config-only value check (:func:`check_override_keys`),
  each swept value tried; every override string is read by Hydra's parser.
* A single run's composed config: the job's own pass (:func:`cl_bench.config.preflight`, without its file checks and
  what only torch tells), which reads the torch-free specs (:mod:`cl_bench.specs`, :mod:`cl_bench.run_specs`), then
  the model and data files where no network is asked
  (:func:`check_model_and_data`: a local folder's ``config.json``, safetensors headers and recorded encoder class, the
  corpus's content). What only torch or transformers can tell (a GPU behind ``train.device=auto``, a hub
  model's width) is the job's to judge. A multirun's jobs are each checked by the sweep callback before any runs.

The overrides' keys are checked on one composition per swept option (:func:`check_override_keys`), then a single
run's config is composed once more and checked whole.
"""

from __future__ import annotations

import contextlib
import difflib
import itertools
import logging
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from cl_bench.config import (
    ConfigError,
    RunSpecs,
    catalog,
    check_local_paths,
    needed_files,
    preflight,
    tried_data_options,
    use_recorded_pooling,
)
from cl_bench.config.catalog import CONF_DIR, GROUPS
from cl_bench.config.run_folder import check_run_folder
from cl_bench.data.text import DataFileError, check_text_file
from cl_bench.models.hub import ModelLoadError, check_model_reachable, is_local_path, offline, wants_decoder
from cl_bench.specs import registered
from cl_bench.utils.overrides import is_override, override_parser, parsed_overrides, syntax_error


def check_command(argv: Sequence[str], conf_dir: Path = CONF_DIR) -> None:
    """Reject a command (one line naming the key) that the job would reject before its model loads.

    Raises:
        ConfigError: the first rejection, in the job's words.
    """
    argv = list(argv)
    check_override_syntax(argv)
    check_group_choices(argv, conf_dir)  # with every override's key, type and value (each swept value tried)
    cfg = None if any(arg.startswith("-") for arg in argv) else _composed(argv, conf_dir)
    if not isinstance(cfg, DictConfig) or "MULTIRUN" in str(cfg.hydra.get("mode")):
        if isinstance(cfg, Exception):
            raise_keyed_composition_error(cfg)
        return
    run = check_composed(cfg)

    # before Hydra's job writes .hydra/ into it (a resume's comparison with the inert keys the pass found)
    check_run_folder(cfg, Path(str(cfg.hydra.run.dir)), None if run is None else run.inert)
    if run is not None:
        check_model_and_data(run, list(cfg.hydra.overrides.task))


#: Hydra's override grammar, which the syntax errors point at
OVERRIDE_GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic/"


def check_override_syntax(argv: Sequence[str]) -> None:
    """Fail with one line, with the column, for an override Hydra's grammar does not read (``loss.tau=[0.05``), where
    Hydra prints several lines and exits with status 1.

    Raises:
        ConfigError: ``loss.tau=[0.05: not a valid override at column 15: no viable alternative at input '[0.05' ...``.
    """
    for arg in argv:
        if is_override(arg) and (why := syntax_error(arg)) is not None:
            raise ConfigError(f"{arg}: not a valid override at {why} (the grammar: {OVERRIDE_GRAMMAR})"
                              if why.startswith("column") else f"{arg}: not a valid override: {why}")


def _composed(argv: list[str], conf_dir: Path) -> DictConfig | Exception:
    """The job's config (with its ``hydra`` node), or why it does not compose (a sweep's values, a bad key)."""
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            return compose("config", overrides=[arg for arg in argv if is_override(arg)], return_hydra_config=True)
    except Exception as err:  # noqa: BLE001 (what does not compose: check_override_keys names it, else Hydra)
        return err


def raise_keyed_composition_error(err: Exception) -> None:
    """Hydra's composition error about one key, e.g. a preset setting a key its option's schema (its spec) does not
    have, as one line naming the key and the file: ``method.mlm_wieght: unknown key (set in experiment/typo); closest
    valid key: method.mlm_weight``. Any other composition error is left to Hydra's own message.

    Raises:
        ConfigError: the one line.
    """
    text = str(err)
    key = re.search(r"full_key: (\S+)", text)
    if key is None:
        return
    key = key.group(1)
    where = re.match(r"In '([^']+)'", text)
    source = f" (set in {where.group(1)})" if where else ""
    reason = next((line for line in text.splitlines()[1:] if line.strip() and not line.startswith(" ")), "")
    unknown = re.match(r"Key '[^']+' not in '(\w+)'", reason)
    spec = next((s for s in registered().values() if unknown and s.__name__ == unknown.group(1)), None)
    if spec is None:
        raise ConfigError(f"{key}: {reason.rstrip('.')}{source}")
    group = key.split(".")[0]
    valid = {f"{group}.{name}" for name in spec.keys() if name != "name"}  # name: a label, not a setting
    hint = _closest_key_hint(key, valid) or f"; valid keys: {', '.join(sorted(valid))}"
    raise ConfigError(f"{key}: unknown key{source}{hint}")


@contextlib.contextmanager
def _no_warnings() -> Iterator[None]:
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def check_composed(cfg: DictConfig) -> RunSpecs | None:
    """The job's pass before its model loads (:func:`cl_bench.config.preflight`, before torch and without the files) on
    a composed config (with its ``hydra`` node); ``mode=eval`` first takes the pooling recorded with the encoder (as
    the job does). Returns the run's typed specs, or None where the job must judge (an interpolation that does not
    resolve, an unreadable ``cl_bench_encoder.json``: the job says it as it did).

    Raises:
        ConfigError: the first rejection, in the job's words.
    """
    try:
        if cfg.mode == "eval":
            with _no_warnings():  # the job gives them
                use_recorded_pooling(cfg, list(cfg.hydra.overrides.task))
        return preflight(cfg, list(cfg.hydra.overrides.task), before_torch=True, files=False)
    except ConfigError:
        raise
    except Exception:  # noqa: BLE001 (the job says it as it did)
        return None


def check_model_and_data(run: RunSpecs, overrides: Sequence[str]) -> None:
    """The job's next checks (:func:`cl_bench.config.check_model_and_files`): the local paths it names (a corpus outside
    the data root, a ``train.resume`` folder) exist; then, where the job would ask no network and fetch nothing (a local
    model folder, or a hub model under Hugging Face's offline mode, with the data either all there or its downloads
    switched off), the model can be loaded and the data is there (one message names every missing piece), the data
    root and the corpus exist. The backbone options that follow are read by transformers: the job's.

    Raises:
        ConfigError: the job's message.
    """
    check_local_paths(run)
    name = str(run.model.name_or_path)
    if not (is_local_path(name) or offline()):
        return  # the job probes the hub
    problems = []
    try:
        check_model_reachable(name, wants_decoder(run.pooler.name, run.model.bidirectional))
    except ModelLoadError as err:
        problems.append(str(err))
    root = Path(run.paths.data_dir)
    wanted = needed_files(run)
    if not all((root / rel).is_file() for _, rel in wanted):
        from cl_bench.data.download import DataDownloadError, downloads_switched_off, ensure_data

        if not downloads_switched_off():
            return  # the job fetches what is missing (first use)
        try:
            ensure_data(root, wanted, tried=tried_data_options(run, overrides))
        except DataDownloadError as err:
            problems.append(str(err))
    if problems:
        raise ConfigError(" -- and ".join(problems))
    if not root.is_dir():
        return  # the job's message (cl_bench.config.check_model_and_files)
    if run.training:  # the corpus's format and content, as the job checks it (no model needed)

        try:
            check_text_file(str(run.data.train_file), run.data.limit)
        except DataFileError as err:
            raise ConfigError(str(err)) from err


def _choices(override: Any) -> list[str] | None:
    """The option names a group override picks (``method=simcse,sg_opt``, ``method=choice(a,b)``: both); None when it
    names none (``null``, an empty value, a glob)."""
    try:
        if override.is_sweep_override():
            return [str(choice) for choice in override.sweep_string_iterator()]
    except Exception:  # noqa: BLE001 (a glob: its options are Hydra's to list)
        return None
    value = override.value()
    return None if value is None or value == "" else [override.get_value_element_as_str()]


def check_group_choices(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Fail with one line when a ``group=option`` override names an option that does not exist, then check every
    override's key, type and value (:func:`check_override_keys`).

    Hydra would also fail, but with a multi-line message after composing; this names the key and
    the valid options first.
    """
    for _, override in parsed_overrides(argv):
        key = override.key_or_group
        if key not in GROUPS or override.is_delete():
            continue
        options = sorted(catalog.options(key, internal=True))
        for choice in _choices(override) or []:
            if choice not in options:
                raise ConfigError(f"{key}: unknown {key} '{choice}'; valid: {', '.join(options)}")
    check_override_keys(argv, conf_dir)


def is_group(key: str) -> bool:
    """``method``, ``experiment/points``, ``hydra/launcher``: a config group, not a key."""
    return key in GROUPS or "/" in key


def check_override_keys(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Fail with one line, naming the closest valid key, when a ``key=value`` override names no key.

    Hydra would fail too, with several lines suggesting ``+key``. The keys of ``method``, ``loss``
    and ``augmentation`` depend on the chosen options, so the config is composed with the group
    choices of ``argv`` (one composition per option of a swept group; the union of their keys is
    valid). Nothing is composed when no key is overridden. ``+key`` (add) of a key the config has
    gets one line too; ``+key`` of a new key and ``~key`` (delete) are Hydra's to judge, and so is
    anything that does not compose. The values are then checked (types, and the config-only checks).
    """
    keys, groups, search_path, added = [], [], [], []
    forced = False
    for arg, override in parsed_overrides(argv):
        key = override.key_or_group
        if key == "hydra.searchpath":  # user config folders: their options' keys are valid too
            search_path.append(arg)
        if key == "hydra" or key.startswith(("hydra.", "hydra/")) or override.is_delete():
            continue
        forced |= override.is_force_add()
        if is_group(key):
            groups.append((override.get_key_element(), _choices(override) or [override.get_value_string()]))
        elif override.is_add():
            added.append((key, override.get_value_string()))
        elif not override.is_force_add():
            keys.append(key)
    if not keys and not added and not forced:
        return
    variants = [[*search_path, *(f"{raw}={options[0]}" for raw, options in groups)]]
    for index, (raw, options) in enumerate(groups):
        for option in options[1:]:
            variant = list(variants[0])
            variant[len(search_path) + index] = f"{raw}={option}"
            variants.append(variant)
    valid: set[str] = set()
    composed: list[DictConfig] = []
    try:
        from hydra import compose, initialize_config_dir

        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            for overrides in variants:
                composed.append(compose("config", overrides=overrides))
                valid |= _dotted_keys(OmegaConf.to_container(composed[-1], resolve=False))
    except Exception as err:  # noqa: BLE001 (a config that does not compose gets Hydra's own message, or one line)
        raise_keyed_composition_error(err)
        return
    for key in keys:
        if key in valid or any(key.startswith(f"{leaf[:-2]}.") for leaf in valid if leaf.endswith("[]")):
            continue
        raise ConfigError(_unknown_key_message(key, valid, dict(groups)))
    for key, value in added:  # Hydra: "Could not append to config. An item is already at ..." and three more lines
        if key in valid and all(OmegaConf.select(cfg, key, default=None) is not None for cfg in composed):
            raise ConfigError(f"+{key}: {key} is already in the config; set it without '+': {key}={value}")
    _check_override_types(argv, composed)
    _check_override_values(argv, composed)


#: groups whose options are ``_target_`` nodes: each option has its own keys
TARGET_GROUPS = ("method", "loss", "augmentation")


def _unknown_key_message(key: str, valid: set[str], groups: dict[str, list[str]]) -> str:
    """``dropuot: unknown key; closest valid key: dropout``. A key of a method, loss or augmentation is
    compared with the chosen option's own keys, which the message lists (``augmentation.p`` under
    ``augmentation=eda_delete``: its one key is ``augmentation.alpha``)."""
    group = key.split(".")[0]
    if group not in TARGET_GROUPS or "." not in key:
        return f"{key}: unknown key{_closest_key_hint(key, valid)}"
    own = sorted(k for k in valid if k.startswith(f"{group}.") and k.count(".") == 1 and not k.endswith("[]")
                 and not k.split(".")[1].startswith("_") and k != f"{group}.name")
    chosen = groups.get(group) or groups.get(f"+{group}")
    option = f"{group}={','.join(chosen)}" if chosen else f"the default {group}"
    listing = ", ".join(own) or "none"
    leaves = {k.split(".", 1)[1]: k for k in own}
    near = difflib.get_close_matches(key.split(".", 1)[1].split(".")[0], sorted(leaves), n=1, cutoff=0.6)
    if near:
        return f"{key}: unknown key; closest valid key: {leaves[near[0]]} ({option} takes: {listing})"
    return f"{key}: unknown key for {option}; valid keys: {listing}"


def _closest_key_hint(key: str, valid: set[str]) -> str:
    """``; closest valid key: loss.tau`` for ``tau``: a key whose last part is the one typed comes first
    (spelling similarity alone would offer ``data``), then the closest spelling of the whole key or of
    a last part."""
    keys = sorted(k for k in valid if not k.endswith("[]"))
    typo = difflib.get_close_matches(key, keys, n=1, cutoff=0.8)
    if typo:
        return f"; closest valid key: {typo[0]}"
    same_leaf = sorted((k for k in keys if k.split(".")[-1] == key.split(".")[-1] and k != key), key=len)
    if same_leaf:
        return f"; closest valid key: {' or '.join(same_leaf[:3])}"
    closest = difflib.get_close_matches(key, keys, n=1, cutoff=0.5)
    if not closest:
        leaves = {k.split(".")[-1]: k for k in sorted(keys, key=len, reverse=True)}
        near = difflib.get_close_matches(key.split(".")[-1], sorted(leaves), n=1, cutoff=0.75)
        closest = [leaves[near[0]]] if near else []
    return f"; closest valid key: {closest[0]}" if closest else ""


def _value_overrides(argv: list[str]) -> Iterator[tuple[str, list[Any]] | None]:
    """``(key, values)`` of each ``key=value`` (or ``++key=value``) override that sets a config value, a
    sweep's values listed; None for one Hydra's parser does not take. Group choices, ``+key`` (an added
    key, judged with the unknown keys), ``~key`` (a deletion) and flags are left out."""
    for arg in argv:
        if not is_override(arg):
            continue
        try:
            override = override_parser().parse_override(arg)
            if override.is_add() or override.is_delete() or is_group(override.key_or_group):
                continue
            values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
        except Exception:  # noqa: BLE001 (the caller decides: Hydra's own message follows)
            yield None
            continue
        yield override.key_or_group, values


def _check_override_types(argv: list[str], composed: list[DictConfig]) -> None:
    """One line for a value of the wrong type (``train.lr=abc``) instead of Hydra's five-line merge error.

    The value is set on the composed config (typed by the schema) as Hydra would; a sweep's values
    are each tried. Anything the parser does not take is left to Hydra.
    """
    from omegaconf.errors import OmegaConfBaseException

    for parsed in _value_overrides(argv):
        if parsed is None:
            continue  # Hydra's own message for what it cannot parse
        key, values = parsed
        for cfg in composed:
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            typed = node._get_node(leaf) if isinstance(node, DictConfig) and leaf in node else None
            if isinstance(typed, ListConfig):  # a list, null by default or not (train.matryoshka_dims)
                for value in values:
                    if value is not None and not isinstance(value, list | tuple):
                        raise ConfigError(f"{key}: must be a list, e.g. {key}=[{value}]; got {value!r}")
            if OmegaConf.select(cfg, key, throw_on_missing=False) is None:
                continue  # absent (unknown keys are judged above) or a null default that takes any type
            for value in values:
                try:
                    OmegaConf.update(cfg, key, value, merge=True)
                except OmegaConfBaseException as err:  # OmegaConf's sentence, without its key/type lines
                    raise ConfigError(f"{key}: {str(err).splitlines()[0].rstrip('.')}") from None
                except Exception:  # noqa: BLE001
                    break


def _check_override_values(argv: list[str], composed: list[DictConfig]) -> None:
    """The job's pass without its files (:func:`cl_bench.config.preflight`) on the config the job will get, here
    before Hydra's job starts: ``train.eval_steps=-5`` answers before any of torch loads.

    Each swept value is tried (every combination, for a small sweep).
    """
    settings: list[tuple[str, list[Any]]] = []
    for parsed in _value_overrides(argv):
        if parsed is None:
            return  # Hydra's own message for what it cannot parse
        if not parsed[0].startswith("hydra."):
            settings.append(parsed)
    if not settings or math.prod(len(values) for _, values in settings) > 256:
        return  # a large sweep: each job checks its own values
    for cfg in composed:
        for combination in itertools.product(*(values for _, values in settings)):
            job = cfg.copy()
            try:
                for (key, _), value in zip(settings, combination, strict=True):
                    OmegaConf.update(job, key, value, merge=True)
                preflight(job, before_torch=True, files=False)
            except ConfigError:
                raise
            except Exception:  # noqa: BLE001 (what the value check cannot read, the job's validation judges)
                continue


def _dotted_keys(node: Any, prefix: str = "") -> set[str]:
    """Every key path of a nested config (``train``, ``train.lr``, …); a list value adds ``path[]``."""
    keys: set[str] = set()
    if isinstance(node, dict):
        for name, value in node.items():
            path = f"{prefix}{name}"
            keys.add(path)
            keys |= _dotted_keys(value, f"{path}.")
    elif isinstance(node, list) and prefix:
        keys.add(prefix[:-1] + "[]")  # list items are addressed as path.0, path.1, …
    return keys
