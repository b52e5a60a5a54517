"""Structured-config schemas (registered with Hydra) and the pre-flight validation.

Schemas make a misspelled key or a wrongly typed value fail at composition. :func:`validate`
then checks the values (ranges, files, the ``_target_`` kwargs of method/loss/augmentation)
before any model or data is loaded, raising :class:`ConfigError` with one line naming the key.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from cl_bench.eval.options import EvalConfig, EvalOptions
from cl_bench.models.encoding_options import check_backend_and_precision, check_cache_options
from cl_bench.models.pooler_names import AVERAGING_POOLERS, POOLERS, PROMPT_POOLERS, REGISTRY, Pooler
from cl_bench.run_specs import (  # noqa: F401  (the run groups' specs, re-exported for the schema's users)
    SYSTEM_METRICS_VALUES,
    DataConfig,
    LoggerConfig,
    LogModel,
    LoraOptions,
    ModelConfig,
    NonfiniteAction,
    PathsConfig,
    PoolerConfig,
    TrainConfig,
    TrainPrecision,
)
from cl_bench.specs import (
    METHOD_GROUPS,
    AugmentationSpec,
    LossSpec,
    MethodSpec,
    RunSetting,
    Spec,
    registered,
    spec_for,
)
from cl_bench.utils.overrides import override_key

log = logging.getLogger("cl_bench")

#: ``mode``: train (then evaluate) | eval (evaluate model.name_or_path)
Mode = StrEnum("Mode", "train eval")


class ConfigError(ValueError):
    """An invalid configuration value; the message is one line and names the key."""


@dataclass
class CLBenchConfig:
    mode: Mode = Mode.train  # train (then evaluate) | eval (evaluate model.name_or_path)
    seed: int = 42  # seeds torch, numpy, random and the data order
    seeds: int = 1  # replicates per grid point (cl_bench/config/seeds.py expands it into a seed list)
    dropout: float = 0.1  # shortcut: hidden and attention dropout of the encoder
    batch_size: int = 64  # shortcut: train.batch_size
    model: ModelConfig = field(default_factory=ModelConfig)
    pooler: PoolerConfig = field(default_factory=PoolerConfig)
    method: dict[str, Any] = field(default_factory=dict)  # method=NAME: its keys (see Methods)
    augmentation: dict[str, Any] = field(default_factory=dict)  # augmentation=NAME: its keys
    loss: dict[str, Any] = field(default_factory=dict)  # loss=NAME: its keys (loss.tau, ...)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)


def register_schemas() -> None:
    """Register the schemas with Hydra's ConfigStore: the run's (``conf/config.yaml`` extends it) and each option's
    spec as ``schema/<group>/<SpecClass>`` (its YAML extends it: composition then rejects a key the option does not
    take and a value of the wrong type); and the ``cl_bench.data_dir`` resolver: the default data root, defined once
    in :func:`cl_bench.utils.cache_dirs.default_data_dir` (``conf/paths/default.yaml`` uses it); and ``cl_bench.unique``,
    the default run folder's per-process suffix (:func:`cl_bench.utils.rundir.process_token`)."""
    store = ConfigStore.instance()
    store.store(name="cl_bench_schema", node=CLBenchConfig)
    for spec in registered().values():
        store.store(group=f"schema/{spec.group}", name=spec.__name__, node=spec.schema())
    OmegaConf.register_new_resolver("cl_bench.data_dir", _default_data_dir, replace=True)
    from cl_bench.utils.rundir import process_token

    # the default run and sweep folders' suffix: one per process (cached too, so Hydra copies it to a sweep's jobs)
    OmegaConf.register_new_resolver("cl_bench.unique", process_token, replace=True, use_cache=True)


def _default_data_dir() -> str:
    # imported when the path is resolved: a command rejected before that loads no download code
    from cl_bench.utils.cache_dirs import default_data_dir

    return str(default_data_dir())


# ------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------
def option_spec(cfg: DictConfig, group: str) -> Spec:
    """The spec of the run's ``group`` option (``method``, ``loss``, ``augmentation``), checked and built
    (:func:`build_spec`)."""
    spec_class(cfg, group)  # the one-line answers for no target, no loss, no spec
    return build_spec(cfg[group], group)


def build_spec(node: DictConfig, group: str) -> Spec:
    """The spec of an option's config node, its keys and value types checked against the spec's fields by OmegaConf,
    as composition checks a YAML that extends the spec's schema (:mod:`cl_bench.specs`); this check also covers a
    user's YAML that does not extend one and a key added with ``+``.

    Raises:
        ConfigError: one line naming the key (an unknown key, a wrong type, a missing key, no spec for the target).
    """
    from omegaconf.errors import OmegaConfBaseException

    target = node.get("_target_")
    cls = _spec_of(target, group)
    values = {k: v for k, v in _values(node).items() if k in cls.keys() or k != "name"}  # name: a label, not a setting
    unknown = [key for key in values if key not in cls.keys()]
    if unknown:
        raise ConfigError(f"{group}.{unknown[0]}: unknown key for {target}; valid keys: "
                          f"{', '.join(k for k in cls.keys() if k != 'name') or 'none'}")
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in values  # a key without a default
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{group}.{missing[0]}: missing; {group}={node.get('name', target)} takes "
                          f"{', '.join(cls.keys())}")
    try:
        typed = OmegaConf.merge(OmegaConf.structured(cls.schema()), values)
    except OmegaConfBaseException as err:
        raise ConfigError(f"{group}.{err.key}: {str(err).splitlines()[0].rstrip('.')}") from None
    return cls.from_config(OmegaConf.to_container(typed))


def yaml_spec(group: str, name: str, **changes: Any) -> Any:
    """The spec of ``conf/<group>/<name>.yaml`` with ``changes`` applied, checked as a run's is (its keys and types by
    :func:`cl_bench.config.build_spec`, then its rules): an option built from Python with its YAML's values, e.g.
    ``SimCSE(context, yaml_spec("method", "simcse", mlm_weight=0.1))``.

    Raises:
        ValueError: one line naming the key whose value cannot work.
    """
    from cl_bench.config.catalog import options, read_yaml

    spec = build_spec(OmegaConf.create({**read_yaml(options(group, internal=True)[name]), **changes}), group)
    spec.check()
    return spec


_SPEC_BASES = {"method": MethodSpec.__name__, "loss": LossSpec.__name__, "augmentation": AugmentationSpec.__name__}


def validate(cfg: DictConfig, overrides: Sequence[str] = ()) -> None:
    """Validate a composed config before anything heavy is loaded.

    Args:
        cfg: the composed config.
        overrides: the job's Hydra overrides: each must act on the run (:func:`check_overrides_act`).

    Raises:
        ConfigError: one line naming the offending key (or file and line).
    """
    check_values(cfg)
    check_choices(cfg, overrides)
    check_eval_options(cfg)
    check_model_and_files(cfg, overrides)
    check_backbone(cfg)  # after every file: it reads the model's config with transformers
    check_device(cfg)


def check_local_paths(cfg: DictConfig) -> None:
    """The files and folders the run names outside the data root, which nothing downloads: a training corpus
    outside ``paths.data_dir`` and a ``train.resume`` run directory must exist. The job's first file check,
    torch-free, so ``cl-bench`` gives it before torch (:func:`cl_bench.config.early_checks.check_model_and_data`).

    Raises:
        ConfigError: one line naming the key and the path.
    """
    if cfg.mode != "train":
        return
    train_file = Path(str(cfg.data.train_file)).absolute()
    if not train_file.is_relative_to(Path(str(cfg.paths.data_dir)).absolute()) and not train_file.is_file():
        raise ConfigError(f"data.train_file: corpus file not found: {Path(str(cfg.data.train_file))}")  # as check_text_file
    resume = str(cfg.train.get("resume", "") or "")
    if resume.lower() not in ("", "false", "none", "null", "true", "auto") and not Path(resume).is_dir():
        raise ConfigError(f"train.resume: run directory not found: {resume}")


def check_model_and_files(cfg: DictConfig, overrides: Sequence[str] = ()) -> None:
    """The model can be loaded and every file the run reads is there (fetching the data root's missing files
    unless downloads are off), in the job's order: the local paths (:func:`check_local_paths`), then the model and
    the data root's files together (offline, one message names every missing piece), then the data root and the
    corpus's content. Imports neither torch nor a model library.

    Raises:
        ConfigError: one line naming the key(s).
    """
    from cl_bench.data.download import DataDownloadError, ensure_data
    from cl_bench.data.text import DataFileError, check_text_file
    from cl_bench.models.hub import ModelLoadError, check_model_reachable, wants_decoder

    check_local_paths(cfg)
    problems = []
    try:
        check_model_reachable(cfg.model.name_or_path, wants_decoder(cfg.pooler.get("name"), cfg.model.get("bidirectional")))
    except ModelLoadError as err:
        problems.append(str(err))
    try:
        ensure_data(cfg.paths.data_dir, needed_files(cfg), tried=_tried_data_options(cfg, overrides))
    except DataDownloadError as err:  # first use: fetch before any model loads
        problems.append(str(err))
    if problems:
        raise ConfigError(" -- and ".join(problems))
    data_dir = Path(cfg.paths.data_dir)
    if not data_dir.is_dir():
        raise ConfigError(
            f"paths.data_dir: data root '{data_dir}' not found; set CL_BENCH_DATA or paths.data_dir "
            "(a folder with sts/, transfer/ and corpus/; `cl-bench-data download` makes one)"
        )
    try:
        if cfg.mode == "train":
            check_text_file(cfg.data.train_file, cfg.data.get("limit"))
    except DataFileError as err:
        raise ConfigError(str(err)) from err


def preflight(cfg: DictConfig, overrides: Sequence[str] = ()) -> None:
    """All checks that need no model: config values, files, evaluation tasks, and that every
    override acts on the run."""
    from cl_bench.config import eval_check_arguments
    from cl_bench.eval import check_eval_config
    from cl_bench.eval.mteb import check_mteb_tasks
    from cl_bench.eval.registry import split_tasks

    validate(cfg, overrides)  # the eval.* values among them (cl_bench.config.check_eval_options)
    own_tasks, mteb_tasks = split_tasks(cfg.eval.tasks)
    try:
        if own_tasks or not mteb_tasks:
            # the data files of the evaluation and of train.select_metric's dev figures: nothing fails after training
            data_dir, tasks, options, select_metric, device = eval_check_arguments(cfg, own_tasks)
            check_eval_config(data_dir, tasks, options, select_metric, eval_device=device)
        if mteb_tasks:
            check_mteb_tasks(mteb_tasks)
    except ValueError as err:
        raise ConfigError(str(err)) from err


#: the ``model.*`` prompt settings a saved encoder records and mode=eval restores
RECORDED_PROMPT_KEYS = ("prompt", "include_prompt", "prompt_period")


def use_recorded_pooling(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """mode=eval: pool as the checkpoint was trained (``pooler.*`` and the ``model.*`` prompt settings
    recorded in its ``cl_bench_encoder.json``).

    The config's pooler is only a default: scoring a checkpoint trained with ``avg`` with ``cls`` would
    print another model's figures without a word. A ``pooler=``/``pooler.KEY=`` given on the command
    line is honoured, with a warning naming both when it differs from the recorded one. A model without
    the file (a hub id, a plain Hugging Face folder) is pooled as configured; its ``cls`` applies the
    model's own pooler layer (SimCSE's ``pooler_output``), so the MLP is kept there.
    """
    from cl_bench.utils.rundir import ENCODER_META_FILE

    meta_path = Path(str(cfg.model.name_or_path)) / ENCODER_META_FILE
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    given = {key for o in overrides if (key := override_key(o)) is not None}
    for key in RECORDED_PROMPT_KEYS:  # a prompt-pooled checkpoint (PromptBERT's [MASK]) is scored with its prompt
        if key not in meta:
            continue
        if f"model.{key}" not in given:
            cfg.model[key] = meta[key]
        elif cfg.model[key] != meta[key]:
            log.warning("%s was trained with model.%s=%r; evaluating with model.%s=%r as given",
                        cfg.model.name_or_path, key, meta[key], key, cfg.model[key])
    explicit_name = bool({"pooler", "pooler.name"} & given)
    if "pooler" not in meta:
        cfg.pooler.mlp_only_train = False
        return
    if explicit_name and cfg.pooler.name != meta["pooler"]:
        log.warning("%s was trained with pooler=%s (%s); evaluating with pooler=%s as given",
                    cfg.model.name_or_path, meta["pooler"], ENCODER_META_FILE, cfg.pooler.name)
        cfg.pooler.mlp_only_train = False
        return
    cfg.pooler.name = meta["pooler"]
    for key in ("mlp_only_train", "first_layer"):
        if key in meta and f"pooler.{key}" not in given:
            cfg.pooler[key] = meta[key]
        elif key in meta and cfg.pooler[key] != meta[key]:
            log.warning("%s was trained with pooler.%s=%s; evaluating with pooler.%s=%s as given",
                        cfg.model.name_or_path, key, meta[key], key, cfg.pooler[key])
    if not explicit_name:
        log.info("pooler=%s: as recorded in %s", cfg.pooler.name, meta_path)


def check_device(cfg: DictConfig) -> None:
    """``train.device`` (where training runs and evaluation encodes) is one torch has here, and ``train.precision``
    can run on it: a GPU command run on a machine without one gets one line, not CUDA's traceback after the model
    loaded. Imports torch (the job's last check).

    Raises:
        ConfigError: one line naming the key.
    """
    import torch

    name = str(cfg.train.device)
    if name == "auto":
        from cl_bench.train.loop import resolve_device

        device = resolve_device(name)
    else:
        try:
            device = torch.device(name)
        except RuntimeError as err:
            raise ConfigError(f"train.device: '{name}' is not a device; e.g. auto, cpu, cuda, cuda:1, mps") from err
        if device.type == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if count == 0:
                built = "torch is built without CUDA" if torch.version.cuda is None else "torch sees no CUDA device"
                raise ConfigError(f"train.device: {name}, but {built}; use train.device=auto (or cpu)")
            if device.index is not None and device.index >= count:
                raise ConfigError(f"train.device: {name}, but torch sees {count} CUDA device(s): cuda:0 to cuda:{count - 1}")
        elif device.type == "mps":
            mps = getattr(torch.backends, "mps", None)
            if mps is None or not mps.is_available():
                raise ConfigError(f"train.device: {name}, but torch sees no MPS device; use train.device=auto (or cpu)")
    if cfg.mode == "train":
        from cl_bench.train.precision import autocast_dtype

        try:
            autocast_dtype(str(cfg.train.precision), device)
        except ValueError as err:
            raise ConfigError(f"{err} (train.device={name})") from err


def check_values(cfg: DictConfig) -> None:
    """The checks of :func:`validate` that read the config alone: no file, no method, loss or model code.

    Imports nothing heavy, so that ``cl-bench`` runs them before Hydra's job starts (and before torch
    loads) and a wrong value answers in about a second.

    Raises:
        ConfigError: one line naming the offending key.
    """
    if str(cfg.logger.get("system_metrics", "auto")).strip().lower() not in SYSTEM_METRICS_VALUES:
        raise ConfigError(f"logger.system_metrics: must be one of {', '.join(SYSTEM_METRICS_VALUES)}, "
                          f"got '{cfg.logger.system_metrics}'")
    if not re.fullmatch(r"auto|[a-z]+(:\d+)?", str(cfg.train.device)):
        raise ConfigError(f"train.device: '{cfg.train.device}' is not a device; e.g. auto, cpu, cuda, cuda:1, mps")
    if cfg.pooler.name not in POOLERS:
        raise ConfigError(f"pooler.name: unknown pooler '{cfg.pooler.name}'; valid: {', '.join(POOLERS)}")
    if REGISTRY[cfg.pooler.name].reads_first_layer and cfg.pooler.first_layer not in (0, 1):
        raise ConfigError(f"pooler.first_layer: must be 0 or 1, got {cfg.pooler.first_layer}")
    check_eval_pooler(cfg)
    if not 0.0 <= cfg.dropout < 1.0:
        raise ConfigError(f"dropout: must be in [0, 1), got {cfg.dropout}")
    if cfg.model.max_length < 1:
        raise ConfigError(f"model.max_length: must be >= 1, got {cfg.model.max_length}")
    if cfg.mode == "train":
        if cfg.train.batch_size < 2:
            raise ConfigError(f"batch_size: must be >= 2 (in-batch negatives need two), got {cfg.train.batch_size}")
        if cfg.train.lr <= 0:
            raise ConfigError(f"train.lr: must be > 0, got {cfg.train.lr}")
        if cfg.data.get("limit") is not None and cfg.data.limit < 1:
            raise ConfigError(f"data.limit: must be >= 1 (or null: the whole corpus), got {cfg.data.limit}")
        if cfg.train.epochs < 1 and cfg.train.max_steps <= 0:
            raise ConfigError("train.epochs: must be >= 1 unless train.max_steps > 0")
        if cfg.train.early_stopping_patience < 0:
            raise ConfigError(f"train.early_stopping_patience: must be >= 0 (0 = off), got {cfg.train.early_stopping_patience}")
        if cfg.train.early_stopping_rule != "no_gain" and cfg.train.early_stopping_patience == 0:
            raise ConfigError(f"train.early_stopping_rule: '{cfg.train.early_stopping_rule}' needs "
                              "train.early_stopping_patience > 0 (early stopping is off)")
        if cfg.train.checkpoint_steps < 0:
            raise ConfigError(f"train.checkpoint_steps: must be >= 0, got {cfg.train.checkpoint_steps}")
        if str(cfg.train.compile).strip().lower() not in ("auto", "true", "false"):
            raise ConfigError(f"train.compile: must be one of auto, true, false, got '{cfg.train.compile}'")
        if cfg.train.num_workers < -1:
            raise ConfigError(f"train.num_workers: must be >= 0 (0 = prepare batches in the main process) or -1 (auto), "
                              f"got {cfg.train.num_workers}")
        device = str(cfg.train.device)
        if cfg.train.precision == "fp16" and device != "auto" and not device.startswith("cuda"):
            raise ConfigError(f"train.precision: fp16 needs a CUDA device (loss scaling), got train.device={device}; "
                              "use bf16 or fp32")
        if cfg.train.gradcache_chunk < 0:
            raise ConfigError(f"train.gradcache_chunk: must be >= 0 (0 = off), got {cfg.train.gradcache_chunk}")
        if "tau" in cfg.loss and cfg.loss.tau is not None and (
                isinstance(cfg.loss.tau, bool) or not isinstance(cfg.loss.tau, int | float)):
            raise ConfigError(f"loss.tau: must be a number, got '{cfg.loss.tau}'")
        if "tau" in cfg.loss and cfg.loss.tau is not None and cfg.loss.tau <= 0:
            raise ConfigError(f"loss.tau: must be > 0, got {cfg.loss.tau}")
        if cfg.train.max_steps == 0 or cfg.train.max_steps < -1:  # 0 would train train.epochs in full without a word
            raise ConfigError(f"train.max_steps: must be > 0 (stop after that many optimizer steps) "
                              f"or -1 (train.epochs decides), got {cfg.train.max_steps}")
        if cfg.train.eval_steps < 0:
            raise ConfigError(f"train.eval_steps: must be >= 0 (0 = evaluate at the end only), got {cfg.train.eval_steps}")
        if cfg.train.log_steps < 1:
            raise ConfigError(f"train.log_steps: must be >= 1, got {cfg.train.log_steps}")
        if not 0.0 <= cfg.train.warmup_ratio <= 1.0:
            raise ConfigError(f"train.warmup_ratio: must be in [0, 1], got {cfg.train.warmup_ratio}")


def check_prompt_options(cfg: DictConfig) -> None:
    """``model.prompt``/``view_prompts``/``prompt_period`` and the prompt poolers (before any model loads)."""
    from cl_bench.models.prompts import check_prompt

    model = cfg.model
    pooler = str(cfg.pooler.name)
    if cfg.mode == "train" and spec_class(cfg, "method").own_prompts:
        pooler = ""  # the method sets its pooler and prompts (its pooler group is inert)
    if cfg.mode == "train" and not spec_class(cfg, "method").takes_prompts:
        name = cfg.method.get("name")
        if pooler in PROMPT_POOLERS:
            raise ConfigError(f"pooler={pooler}: method={name} builds its views from token ids, without a prompt to pool")
        if model.prompt or model.view_prompts:
            raise ConfigError(f"model.prompt: method={name} builds its views from token ids and applies no prompt")
    try:
        if model.prompt:  # "" = none (a prompt pooler then uses its default template)
            check_prompt(str(model.prompt), "model.prompt", pooler)
        for prompt in model.view_prompts:
            check_prompt(str(prompt), "model.view_prompts", pooler)
    except ValueError as err:
        raise ConfigError(str(err)) from err


def check_matryoshka(cfg: DictConfig, before_torch: bool = False) -> None:
    """``train.matryoshka_dims``/``_weights``: valid sizes, and a loss that takes embeddings (before any model loads)."""
    dims = cfg.train.get("matryoshka_dims")
    if dims is None:
        return
    from cl_bench.losses.specs import EMBEDDING_KINDS, check_dims

    weights = cfg.train.get("matryoshka_weights")
    try:
        check_dims(list(dims), None if weights is None else list(weights))
    except ValueError as err:
        raise ConfigError(str(err)) from err
    name = cfg.method.get("name")
    if "loss" not in spec_class(cfg, "method").uses:
        raise ConfigError(f"train.matryoshka_dims: method={name} has no loss to wrap")
    kind = spec_class(cfg, "loss").kind
    if kind not in EMBEDDING_KINDS:
        raise ConfigError(
            f"train.matryoshka_dims: loss={cfg.loss.get('name')} of method={name} is a {kind} loss, which does not "
            f"take sentence embeddings (Matryoshka wraps {', '.join(EMBEDDING_KINDS)} losses)"
        )
    width = _model_width(str(cfg.model.name_or_path), before_torch)
    if width is not None and max(dims) > width:
        raise ConfigError(f"train.matryoshka_dims: {max(dims)} exceeds the model's embedding width {width}")


def _model_width(name_or_path: str, before_torch: bool = False) -> int | None:
    """The checkpoint's hidden size from its config file alone (None when it cannot be read offline; ``before_torch``:
    None unless a local folder's config.json says it, without transformers)."""
    width = local_model_width(name_or_path)
    if width is not None or before_torch:
        return width
    try:
        from transformers import AutoConfig

        return int(AutoConfig.from_pretrained(name_or_path, local_files_only=True).hidden_size)
    except Exception:  # not cached locally, or no hidden_size: the loss checks the width at its first call
        return None


#: what ``eval.pooler`` cannot name: it re-pools the states of the encoder as built, so a pooler that needs an MLP
#: head, a prompt in the input or an appended EOS token would score another input or an untrained head
EVAL_POOLER_NEEDS = {"has_mlp": "an MLP head", "reads_prompt_token": "a prompt in the input",
                     "appends_eos": "an EOS token appended to the input"}


def check_eval_pooler(cfg: DictConfig) -> None:
    """``eval.pooler``: a registered pooler that pools the same token states as the run's encoder (no MLP head, no
    prompt token, no appended EOS), from a plain encoder (a method with its own pooling has no pooler to swap)."""
    name = cfg.eval.get("pooler")
    if name is None:
        return
    if name not in POOLERS:
        raise ConfigError(f"eval.pooler: unknown pooler '{name}'; valid: {', '.join(POOLERS)} (or null: pooler.name)")
    for attribute, need in EVAL_POOLER_NEEDS.items():
        if getattr(REGISTRY[name], attribute):
            raise ConfigError(f"eval.pooler: '{name}' needs {need}, which the trained encoder was not built with; "
                              f"train with pooler={name} instead")
    trained = REGISTRY.get(str(cfg.pooler.name), Pooler)
    if trained.reads_prompt_token or trained.appends_eos:
        raise ConfigError(f"eval.pooler: pooler={cfg.pooler.name} builds its own input (prompt or EOS); "
                          "re-pooling it with another pooler is not supported")
    if cfg.mode == "train" and "pooler" not in spec_class(cfg, "method").uses:
        raise ConfigError(f"eval.pooler: method={cfg.method.get('name')} pools its own way (its pooler group is unused)")


def check_backbone(cfg: DictConfig) -> None:
    """The backbone options against the model's config (decoder, LoRA, attention kernel), no weights loaded
    (:func:`cl_bench.models.decoders.check_backbone_options`)."""
    from cl_bench.models.decoders import BackboneOptionError, check_backbone_options

    method = augmentation = None
    if cfg.mode == "train":
        method = cfg.method
        if "augmentation" in spec_class(cfg, "method").uses and cfg.augmentation.get("_target_"):
            augmentation = option_spec(cfg, "augmentation")
    keeps_mlp = REGISTRY.get(cfg.pooler.name, Pooler).has_mlp and not cfg.pooler.mlp_only_train
    try:
        check_backbone_options(cfg.model, str(cfg.mode), str(cfg.pooler.name), method, augmentation,
                               str(cfg.eval.backend), keeps_mlp)
    except BackboneOptionError as err:
        raise ConfigError(str(err)) from err
    eval_pooler = cfg.eval.get("pooler")
    if eval_pooler is not None and REGISTRY[str(eval_pooler)].first_token:  # a decoder's first token saw only itself
        try:
            check_backbone_options(cfg.model, "eval", str(eval_pooler))
        except BackboneOptionError as err:
            raise ConfigError(f"eval.{err}") from err


def _tried_data_options(cfg: DictConfig, overrides: Sequence[str]) -> set[str]:
    """What a data error must not suggest: ``data=NAME`` already chosen, keys already given."""
    given = {key for o in overrides if (key := override_key(o)) is not None}
    tried = {f"data={cfg.data.get('name')}"} | given
    if os.environ.get("CL_BENCH_DATA") and "paths.data_dir" not in given:
        tried.add("CL_BENCH_DATA")
    return tried


def needed_files(cfg: DictConfig) -> list[tuple[str, str]]:
    """``(config key, file relative to the data root)`` for every data-root file the run reads.

    The training corpus (when it lies in the data root) and the evaluation's files: the final
    tasks' and, when training, the dev metric's (:func:`cl_bench.eval.tasks.required_files`).
    """
    from cl_bench.eval.flow_options import check_postprocess, fits_per_task
    from cl_bench.eval.options import EvalConfigError
    from cl_bench.eval.registry import split_tasks
    from cl_bench.eval.tasks import dev_required_files, required_files, resolve_tasks

    root = Path(cfg.paths.data_dir).absolute()
    wanted: list[tuple[str, str]] = []
    if cfg.mode == "train":
        train_file = Path(cfg.data.train_file).absolute()
        if train_file.is_relative_to(root):
            wanted.append(("data.train_file", train_file.relative_to(root).as_posix()))
        wanted += [("paths.data_dir", rel) for rel in dev_required_files(cfg.train.select_metric)]
    own_tasks = split_tasks(cfg.eval.tasks)[0]
    try:
        flow = check_postprocess(cfg.eval.postprocess, cfg.eval.whitening, cfg.eval.flow)
        files = required_files(resolve_tasks(own_tasks), cfg.eval.align_uniform, cfg.eval.anisotropy,
                               cfg.eval.align_uniform_split, fits_per_task(cfg.eval.postprocess, flow)) if own_tasks else []
    except (EvalConfigError, KeyError, ValueError):  # a bad eval option: the evaluation check names it
        files = []
    return wanted + [("paths.data_dir", rel) for rel in files]


# ------------------------------------------------------------------------------------------------
# What acts on a run: every override must act, and only what acted is recorded
# ------------------------------------------------------------------------------------------------
#: train.* keys that also act in ``mode=eval``
EVAL_TRAIN_KEYS = ("train.device", "train.num_threads", "train.progress_bar")
#: keys whose value is the top-level shortcut they interpolate (logged once, as the shortcut)
SHORTCUT_COPIES = {"model.dropout": "dropout", "train.batch_size": "batch_size"}
#: override keys that choose presets or configure Hydra/paths/tracking: they act on every run
_ALWAYS_ACTING = ("experiment", "hydra", "paths", "logger")


def spec_class(cfg: DictConfig, group: str) -> type[Spec]:
    """The spec class of the run's ``group`` option (its declarations, without building it from the values:
    :func:`option_spec` checks and builds).

    Raises:
        ConfigError: one line (no target, an import error, no spec; for the loss group, no loss chosen).
    """
    target = cfg[group].get("_target_")
    if not target and group == "loss":
        raise ConfigError(f"loss: method={cfg.method.get('name')} has no default loss; choose one with loss=NAME")
    return _spec_of(target, group)


def _spec_of(target: Any, group: str) -> type[Spec]:
    if not target:
        raise ConfigError(f"{group}: no _target_ given")
    try:
        cls = spec_for(str(target))
    except (ImportError, ValueError) as err:
        raise ConfigError(f"{group}._target_: cannot import '{target}' ({err})") from err
    if cls is None:
        raise ConfigError(f"{group}._target_: no spec describes '{target}'; declare one (a {_SPEC_BASES[group]} "
                          f"subclass with target = '{target}', docs/extending.md)")
    return cls


def _values(node: Any) -> dict[str, Any]:
    return {k: v for k, v in OmegaConf.to_container(node, resolve=True).items()
            if not str(k).startswith("_") and k != "defaults"}  # a YAML read whole: its defaults list names its schema


def run_setting(cfg: DictConfig, method: MethodSpec) -> RunSetting:
    """The choices besides the method's own keys that decide whether a method key can act (:class:`RunSetting`)."""
    augmentation = loss = None
    if "augmentation" in method.uses and cfg.augmentation.get("_target_"):
        augmentation = option_spec(cfg, "augmentation")
    if "loss" in method.uses and cfg.loss.get("_target_"):
        loss = option_spec(cfg, "loss")
    dropout = cfg.model.get("dropout")
    return RunSetting(augmentation, str(cfg.data.get("train_file") or ""), loss,
                      None if dropout is None else float(dropout), pooler=str(cfg.pooler.name),
                      mlp_only_train=bool(cfg.pooler.mlp_only_train),
                      model_type=local_model_type(str(cfg.model.name_or_path)))


def _local_config(name_or_path: str) -> dict[str, Any] | None:
    """A local checkpoint folder's config.json read as JSON (no model library imported); None for a hub id
    or an unreadable file."""
    try:
        config = json.loads((Path(name_or_path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def local_model_type(name_or_path: str) -> str | None:
    """``model_type`` from a local checkpoint folder's config.json; None for a hub id or an unreadable file
    (the model's loader then says what is wrong)."""
    config = _local_config(name_or_path)
    return None if config is None or "model_type" not in config else str(config["model_type"])


#: the config.json key that transformers reads as ``hidden_size`` (its config class's ``attribute_map``), per
#: ``model_type``; tests/config/test_early_checks.py checks each against transformers' own config classes
WIDTH_KEYS = {**dict.fromkeys(("bert", "roberta", "xlm-roberta", "electra", "mpnet", "deberta", "deberta-v2", "albert",
                               "camembert", "modernbert", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3",
                               "gpt_neox", "opt"), "hidden_size"),
              "gpt2": "n_embd", "distilbert": "dim", "t5": "d_model", "mt5": "d_model", "bart": "d_model"}


def local_model_width(name_or_path: str) -> int | None:
    """A local checkpoint folder's embedding width from its config.json, read as JSON (no model library
    imported): the key transformers reads as ``hidden_size`` for its ``model_type`` (:data:`WIDTH_KEYS`).
    None for a hub id, another model type, a folder with its own config code (``auto_map``) or an unreadable
    file: then transformers' ``AutoConfig`` answers (:func:`_model_width`)."""
    config = _local_config(name_or_path)
    try:
        width = config[WIDTH_KEYS[config["model_type"]]]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    if "auto_map" in config or isinstance(width, bool) or not isinstance(width, int):
        return None
    return width


def inert_keys(cfg: DictConfig) -> dict[str, str]:
    """Config keys (or whole groups) that cannot act on this run, each with the reason.

    A key listed here may not be overridden (:func:`check_overrides_act`) and is left out of the
    run's params and tags (:func:`acting_params`).
    """
    # the registry imports no torch: cl-bench's checks run this before the job
    from cl_bench.eval.registry import split_tasks, uses_transfer

    inert: dict[str, str] = {}
    if cfg.mode == "eval":
        why = "mode=eval scores an encoder as given (nothing is trained)"
        for key in ("method", "loss", "augmentation", "data", "dropout", "batch_size", "seed", "seeds", "model.max_length",
                    "model.dropout", "pooler.mlp_only_train", "model.lora", "model.gradient_checkpointing"):
            inert[key] = why
        for key in cfg.train:
            if f"train.{key}" not in EVAL_TRAIN_KEYS:
                inert[f"train.{key}"] = why
    else:
        method = option_spec(cfg, "method")
        uses = ", ".join(g for g in METHOD_GROUPS if g in method.uses) or "none of loss, augmentation, pooler"
        for group in METHOD_GROUPS:  # a group the method does not use (MethodSpec.uses)
            if group not in method.uses:
                inert[group] = f"method={method.name} does not use the {group} group (it uses: {uses})"
        for key, reason in method.inert_keys(run_setting(cfg, method)).items():
            inert[f"method.{key}"] = reason
        if "loss" in method.uses:
            inert.update(loss_inert_keys(cfg, method.name, spec_class(cfg, "loss").needs, method.supplied_inputs()))
    if int(cfg.model.lora.r) == 0:
        for key in ("alpha", "dropout", "target_modules"):
            inert.setdefault(f"model.lora.{key}", "model.lora.r is 0 (no LoRA adapters); set model.lora.r > 0")
    for key, reason in pooler_inert_keys(cfg).items():
        inert.setdefault(key, reason)
    inert.update({k: v for k, v in prompt_inert_keys(cfg).items() if _covered(k, inert) is None})
    transfer = uses_transfer(str(t) for t in cfg.eval.tasks) or (
        cfg.mode == "train" and cfg.train.select_metric == "transfer_dev_avg"
    )
    if not transfer:
        for key in ("eval.transfer_config", "eval.transfer_classifier", "eval.seed"):
            inert[key] = "no transfer task is evaluated (eval.tasks)"
    if not cfg.eval.align_uniform:
        inert["eval.align_uniform_split"] = "eval.align_uniform is false"
    tasks = [str(t) for t in cfg.eval.tasks]
    if cfg.mode == "train" and cfg.train.get("matryoshka_dims") is None:
        inert.setdefault("train.matryoshka_weights", "train.matryoshka_dims is null (no Matryoshka loss)")
    if tasks and not split_tasks(tasks)[0]:
        for key in ("eval.align_uniform", "eval.align_uniform_split", "eval.anisotropy", "eval.postprocess",
                    "eval.whitening", "eval.flow", "eval.truncate_dim", "eval.sample_pairs"):
            inert[key] = "only cl-bench's own tasks use it; eval.tasks has only mteb: tasks"
    postprocess = cfg.eval.postprocess
    if postprocess != "whitening":
        inert["eval.whitening"] = f"only eval.postprocess=whitening keeps k dimensions (eval.postprocess={postprocess})"
    if postprocess != "flow":
        inert["eval.flow"] = f"only eval.postprocess=flow fits a flow (eval.postprocess={postprocess})"
    elif cfg.mode == "eval" and cfg.eval.flow.get("pooler", "official") == "official":
        inert.setdefault("pooler", "eval.flow.pooler=official pools as BERT-flow (avg_first_last, first_layer=1); "
                                   "add eval.flow.pooler=run to use the pooler group")
    return inert


def loss_inert_keys(cfg: DictConfig, method: str, needs: dict[str, str], supplied: frozenset[str] | None) -> dict[str, str]:
    """The loss keys that cannot act: each need of the loss's mark (``loss_kind(needs=...)``) that the loss's own
    config (``key=value``) or the method's supplied inputs (``supplied``; None: unknown, those are not judged) lack."""
    loss_values = _values(cfg.loss)
    inert = {}
    for key, need in needs.items():
        if "=" in need:  # a condition on the loss's own values (similarity=cosine)
            condition_key, _, expected = need.partition("=")
            if str(loss_values.get(condition_key)) != expected:
                inert[f"loss.{key}"] = f"loss={loss_values.get('name')} uses {key} only with loss.{need}"
        elif supplied is not None and need not in supplied:
            inert[f"loss.{key}"] = f"method={method} gives its loss no {need.replace('_', ' ')}"
    return inert


def pooler_inert_keys(cfg: DictConfig) -> dict[str, str]:
    """The ``pooler.*`` keys that only one pooler reads, when another pooler is chosen."""
    inert = {}
    chosen = REGISTRY.get(cfg.pooler.name, Pooler)  # a saved encoder subclass records its own pooling (IS-BERT)
    if not chosen.has_mlp:
        with_mlp = "/".join(name for name, cls in REGISTRY.items() if cls.has_mlp)
        inert["pooler.mlp_only_train"] = f"only pooler={with_mlp} has an MLP (pooler={cfg.pooler.name})"
    if not chosen.reads_first_layer:
        with_first = "/".join(name for name, cls in REGISTRY.items() if cls.reads_first_layer)
        inert["pooler.first_layer"] = f"only pooler={with_first} averages a first layer (pooler={cfg.pooler.name})"
    return inert


def prompt_inert_keys(cfg: DictConfig) -> dict[str, str]:
    """The ``model.*`` prompt keys that cannot act on this run, each with the reason."""
    model, pooler = cfg.model, str(cfg.pooler.name)
    cls = spec_class(cfg, "method") if cfg.mode == "train" else None
    if cls is not None and (cls.own_prompts or "pooler" not in cls.uses):
        does = ("sets its own templates (method.* keys) and [MASK] pooler" if cls.own_prompts
                else "encodes with its own encoder (it uses no pooler group)")
        why = f"method={cfg.method.get('name')} {does}"
        return {key: why for key in ("model.prompt", "model.view_prompts", "model.prompt_period", "model.include_prompt")}
    inert: dict[str, str] = {}
    if cfg.mode == "eval":
        inert["model.view_prompts"] = "mode=eval encodes no training views (model.prompt acts)"
    elif not cls.encodes_views:
        inert["model.view_prompts"] = f"method={cfg.method.get('name')} encodes no groups of views (model.prompt acts)"
    if not model.prompt and not model.view_prompts and pooler not in PROMPT_POOLERS:
        why = "no prompt is set (model.prompt, model.view_prompts)"
        inert["model.include_prompt"] = why
        inert["model.prompt_period"] = why
    elif pooler not in AVERAGING_POOLERS:
        inert["model.include_prompt"] = f"only the averaging poolers (avg, avg_top2, avg_first_last) pool the prompt's tokens (pooler={pooler})"
    return inert


def _covered(key: str, inert: dict[str, str]) -> str | None:
    """The reason ``key`` (or a group/prefix it belongs to) is inert, else None."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        reason = inert.get(".".join(parts[:end]))
        if reason is not None:
            return reason
    return None


def override_keys(overrides: Sequence[str]) -> list[str]:
    """The config keys (or groups) named by Hydra override strings (``+a.b=1`` -> ``a.b``)."""
    keys = []
    for text in overrides:
        key = override_key(text)
        if key and key.split("/")[0].split(".")[0] not in _ALWAYS_ACTING:
            keys.append(key)
    return keys


def check_choices(cfg: DictConfig, overrides: Sequence[str] = (), before_torch: bool = False) -> None:
    """The part of :func:`validate` that reads no file: the method's, loss's and augmentation's keys and values fit
    their specs (:mod:`cl_bench.specs`), the loss is one the method calls, and every override acts.

    ``before_torch``: run by ``cl-bench`` before Hydra's job, where what only torch or transformers tell (a CUDA
    device behind ``train.device=auto``, a hub model's width) is left to the job's own run of these checks.
    """
    check_prompt_options(cfg)
    if cfg.mode == "train":
        method_uses = spec_class(cfg, "method").uses
        specs = [option_spec(cfg, group) for group in ("loss", "augmentation") if group in method_uses]
        if "augmentation" in method_uses:
            check_workers_can_augment(cfg, before_torch)
        try:
            for spec in specs:
                spec.check()
            method = option_spec(cfg, "method")
            method.check()
            # the method's needs of the run's other choices (SNCSE: a text augmentation; DiffCSE: its projector's pooler)
            method.check_setting(run_setting(cfg, method))
        except ValueError as err:
            raise ConfigError(str(err)) from err
        check_matryoshka(cfg, before_torch)
    truncate_dim = cfg.eval.get("truncate_dim")
    if isinstance(truncate_dim, int) and not isinstance(truncate_dim, bool):
        width = _model_width(str(cfg.model.name_or_path), before_torch)
        if width is not None and truncate_dim > width:
            raise ConfigError(f"eval.truncate_dim: {truncate_dim} exceeds the model's embedding width {width}")
    check_overrides_act(cfg, overrides)


def check_eval_options(cfg: DictConfig, before_torch: bool = False) -> None:
    """The ``eval.*`` values and ``train.select_metric`` (:func:`cl_bench.eval.check_eval_config` without its data
    files; for ``mteb:`` tasks alone, the encoding options they use), the part of :func:`validate` after
    :func:`check_choices`: before the model and the data are looked for, so ``cl-bench`` gives it before torch
    (:mod:`cl_bench.config.early_checks`). The data files and the ``mteb:`` task names are
    checked after the data is there (:func:`preflight`).

    Raises:
        ConfigError: one line naming the key.
    """
    from cl_bench.eval.registry import split_tasks

    own_tasks, mteb_tasks = split_tasks(cfg.eval.tasks)
    try:
        data_dir, tasks, options, select_metric, device = eval_check_arguments(cfg, own_tasks)
        if own_tasks or not mteb_tasks:
            from cl_bench.eval.tasks import check_eval_config

            check_eval_config(data_dir, tasks, options, select_metric, eval_device=device, files=False,
                              device_checks=not before_torch)
        else:
            check_backend_and_precision(options.backend, options.precision)
            check_cache_options(options.cache, options.cache_dir, options.cache_size_gb)
            if not before_torch:
                from cl_bench.models.inference import check_inference_options

                check_inference_options(options.backend, options.precision, device)
    except ValueError as err:
        raise ConfigError(str(err)) from err


def eval_check_arguments(
    cfg: DictConfig, own_tasks: list[str]
) -> tuple[str, list[str], EvalOptions, str | None, str]:
    """The arguments of :func:`cl_bench.eval.check_eval_config` for this run, in its order: the data root, the
    tasks, the ``eval.*`` options (:meth:`EvalOptions.from_config`), ``train.select_metric`` when training, and
    ``train.device`` (where evaluation encodes: bf16 is judged there).

    Raises:
        EvalConfigError: an ``eval`` key that is no option.
    """
    select_metric = str(cfg.train.select_metric) if cfg.mode == "train" else None
    return (str(cfg.paths.data_dir), own_tasks, EvalOptions.from_config(cfg.eval), select_metric,
            str(cfg.train.device))


def check_workers_can_augment(cfg: DictConfig, before_torch: bool = False) -> None:
    """Reject ``train.num_workers > 0`` when the augmentation runs a model on a GPU at every step: the
    DataLoader's forked worker processes, where augmentation runs, cannot use CUDA (or MPS)."""
    if int(cfg.train.get("num_workers", 0) or 0) <= 0:  # -1 (auto) prepares such batches in the main process
        return
    augmentation = option_spec(cfg, "augmentation")
    if not augmentation.runs_model_in_training():
        return
    device = str(cfg.train.device)
    if device == "auto" and before_torch:
        return  # whether auto finds a GPU: the job's check, with torch
    if device == "auto":
        import torch  # here: a run with train.device set is judged before torch loads

        mps = getattr(torch.backends, "mps", None)
        device = "cuda" if torch.cuda.is_available() else "mps" if mps is not None and mps.is_available() else "cpu"
    if device != "cpu":
        raise ConfigError(
            f"train.num_workers: augmentation={cfg.augmentation.get('name', augmentation.name)} runs its model on "
            f"the training device ({device}) at every step, which forked DataLoader workers cannot use; "
            "set train.num_workers=0"
        )


def check_overrides_act(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Reject an override of a key or group that cannot act on this run (one line, names the key).

    Also rejects a loss that the method cannot call (whether chosen or defaulted).
    """
    if cfg.mode == "train" and "loss" in spec_class(cfg, "method").uses:
        check_loss_kind(cfg)
    inert = inert_keys(cfg)
    for key in override_keys(overrides):
        reason = _covered(key, inert)
        if reason is not None:
            raise ConfigError(f"{key}: has no effect on this run: {reason}")


def check_loss_kind(cfg: DictConfig) -> None:
    """The configured loss must be a kind the method calls (:attr:`MethodSpec.loss_kinds`, :attr:`LossSpec.kind`)."""
    method = spec_class(cfg, "method")
    kind = spec_class(cfg, "loss").kind
    if kind not in method.loss_kinds:
        from cl_bench.config.catalog import losses_of_kinds

        fits = ", ".join(losses_of_kinds(method.loss_kinds)) or "none found"
        raise ConfigError(
            f"loss={cfg.loss.get('name', cfg.loss._target_)}: method={cfg.method.get('name')} calls "
            f"{'/'.join(method.loss_kinds)} losses and this one is a {kind} loss; use one of: {fits}"
        )


def acting_params(cfg: DictConfig) -> dict[str, Any]:
    """The run's params for MLflow: the resolved config flattened, without inert keys, the shortcut
    copies (``model.dropout``, ``train.batch_size``) and Hydra's ``_partial_`` markers."""
    import pandas as pd

    flat = pd.json_normalize(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True), sep=".").iloc[0].to_dict()
    for copy, shortcut in SHORTCUT_COPIES.items():  # the value that acted: `train.batch_size=8` given directly
        if copy in flat and shortcut in flat:      # (not through the shortcut) is logged as batch_size 8
            flat[shortcut] = flat[copy]
    inert = inert_keys(cfg)
    return {
        k: v for k, v in flat.items()
        if _covered(k, inert) is None and k not in SHORTCUT_COPIES and not k.endswith("._partial_")
    }


#: config groups whose choice is a knob of the run, logged as a param under the group's name (``method=simcse``)
KNOB_GROUPS = ("method", "loss", "augmentation", "model", "pooler", "data", "train", "eval", "experiment")
#: param prefixes that say how a run is recorded, not what it trains or how it is scored (the logged config file
#: ``config.yaml`` keeps them)
_RECORDING_PREFIXES = ("logger.", "paths.")


def knob_params(acting: dict[str, Any], choices: dict[str, Any]) -> dict[str, Any]:
    """The MLflow params of a run: the knobs a researcher turns, named as on the command line.

    From :func:`acting_params` (``acting``): each acting config group's choice under the group's name
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
