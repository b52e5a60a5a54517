"""Structured-config schemas (registered with Hydra) and the preflight: one pass of every check before a model loads.

Schemas make a misspelled key or a wrongly typed value fail at composition. :func:`preflight` then turns the
composed config into typed specs once (:class:`cl_bench.run_specs.RunSpecs`: the options' specs and the run groups'),
runs every spec's rules (the ones declared on its fields, then its ``check_combination``), the checks across groups
(:data:`RUN_CHECKS`), that every override acts (each spec's ``inert_keys``, gathered once in :attr:`RunSpecs.inert`), then the
model and the files (:data:`FILE_CHECKS`), raising :class:`ConfigError` with one line naming the key, and returns the
typed specs for the trainer.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from cl_bench.config.catalog import losses_of_kinds, options, read_yaml
from cl_bench.data.text import DataFileError, check_text_file
from cl_bench.eval.flow_options import check_postprocess, fits_per_task
from cl_bench.eval.options import EvalConfig, EvalConfigError
from cl_bench.eval.registry import split_tasks
from cl_bench.eval.tasks import (
    check_eval_config,
    check_eval_data,
    dev_required_files,
    required_files,
    resolve_tasks,
)
from cl_bench.losses.specs import EMBEDDING_KINDS
from cl_bench.models.encoding_options import check_backend_and_precision, check_cache_options
from cl_bench.models.hub import (  # noqa: F401  (WIDTH_KEYS: re-exported for its test)
    WIDTH_KEYS,
    ModelLoadError,
    check_model_reachable,
    local_model_width,
    wants_decoder,
)
from cl_bench.models.pooler_names import POOLERS, PROMPT_POOLERS, REGISTRY
from cl_bench.models.prompts import check_prompt
from cl_bench.run_specs import (  # noqa: F401  (the run groups' specs, re-exported for the schema's users)
    SYSTEM_METRICS_VALUES,
    DataConfig,
    LoggerConfig,
    LogModel,
    LoraOptions,
    Mode,
    ModelConfig,
    NonfiniteAction,
    PathsConfig,
    PoolerConfig,
    RunKeys,
    RunSpecs,
    TrainConfig,
    TrainPrecision,
)
from cl_bench.specs import (
    AugmentationSpec,
    LossSpec,
    MethodSpec,
    Spec,
    covered,
    registered,
    spec_for,
)
from cl_bench.utils.cache_dirs import default_data_dir
from cl_bench.utils.overrides import override_key
from cl_bench.utils.rundir import ENCODER_META_FILE, process_token

log = logging.getLogger("cl_bench")

class ConfigError(ValueError):
    """An invalid configuration value; the message is one line and names the key."""


@dataclass
class CLBenchConfig(RunKeys):
    """The run's config: its top-level keys (:class:`cl_bench.run_specs.RunKeys`) and its groups."""

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

    # the default run and sweep folders' suffix: one per process (cached too, so Hydra copies it to a sweep's jobs)
    OmegaConf.register_new_resolver("cl_bench.unique", process_token, replace=True, use_cache=True)


def _default_data_dir() -> str:
    # imported when the path is resolved: a command rejected before that loads no download code

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
    spec = build_spec(OmegaConf.create({**read_yaml(options(group, internal=True)[name]), **changes}), group)
    spec.check()
    return spec

_SPEC_BASES = {"method": MethodSpec.__name__, "loss": LossSpec.__name__, "augmentation": AugmentationSpec.__name__}


# ------------------------------------------------------------------------------------------------
# The preflight: one pass over the run's typed specs
# ------------------------------------------------------------------------------------------------
def typed_specs(cfg: DictConfig) -> RunSpecs:
    """The composed config as typed specs, once: the options' through :func:`build_spec` (their keys and types
    checked; only the groups the method uses, none in ``mode=eval``) and the run groups' through
    ``OmegaConf.to_object`` (their dataclasses). No value rule runs here: :func:`preflight` runs them.

    Raises:
        ConfigError: one line (no target, no spec, an unknown key, a wrong type, no loss chosen).
    """
    method = loss = augmentation = None
    if cfg.mode == Mode.train:
        method = option_spec(cfg, "method")
        if "loss" in method.uses:
            loss = option_spec(cfg, "loss")
        if "augmentation" in method.uses:
            augmentation = option_spec(cfg, "augmentation")
    keys = RunKeys(**{f.name: cfg[f.name] for f in dataclasses.fields(RunKeys)})
    groups = {name: OmegaConf.to_object(cfg[name]) for name in ("model", "pooler", "data", "train", "eval", "logger")}
    # the run folder is Hydra's (``${hydra:runtime.output_dir}``): unresolved outside a job, e.g. before it starts
    output_dir = OmegaConf.select(cfg, "paths.output_dir", throw_on_resolution_failure=False)
    paths = PathsConfig(data_dir=str(cfg.paths.data_dir), output_dir="" if output_dir is None else str(output_dir))
    return RunSpecs(keys=keys, method=method, loss=loss, augmentation=augmentation, paths=paths,
                    **groups)  # type: ignore[arg-type]


def preflight(cfg: DictConfig, overrides: Sequence[str] = (), *, before_torch: bool = False,
              files: bool = True) -> RunSpecs:
    """The one pass of every check that needs no model, on the composed config; returns the run's typed specs.

    The config becomes typed specs once (:func:`typed_specs`); then every spec's rules run (:meth:`Spec.check`: its
    fields' declared rules, then :meth:`~cl_bench.specs.Checked.check_combination`), then the checks across groups
    (:data:`RUN_CHECKS`), then every override must act (:func:`check_overrides_act`), then, with ``files``, the model
    and the files the run reads (:data:`FILE_CHECKS`). ``cl-bench`` runs it before Hydra's job and torch with
    ``before_torch`` and without ``files`` (:mod:`cl_bench.config.early_checks`: what only torch or transformers tell,
    a GPU behind ``train.device=auto`` or a hub model's width, is left to the job's pass); the job, every job of a
    sweep before the first starts (:mod:`cl_bench.commands.sweep_callbacks`) and a run started from Python run it whole.

    Args:
        cfg: the composed config (``mode=eval``: after :func:`use_recorded_pooling`).
        overrides: the job's Hydra overrides: each must act on the run.

    Raises:
        ConfigError: one line naming the offending key (or file).
    """
    run = typed_specs(cfg)
    try:
        for spec in _checked(run):
            spec.check()
        for check in RUN_CHECKS:
            check(run, before_torch)
        check_overrides_act(run, overrides)  # before the eval rules across keys: an inert eval.* key says so first
        check_eval_options(run, before_torch)
        if files:
            for check in FILE_CHECKS:
                check(run, overrides)
    except ConfigError:
        raise
    except ValueError as err:  # a spec's rule (ValueError), an eval rule (EvalConfigError): the same one line
        raise ConfigError(str(err)) from None
    return run


def _checked(run: RunSpecs) -> tuple[Any, ...]:
    """Every spec whose rules :func:`preflight` runs, in the order it runs them (the groups ``mode=eval`` does not use
    are left out: their keys are inert)."""
    trained = (run.data, run.train) if run.training else ()
    options = tuple(spec for spec in (run.loss, run.augmentation, run.method) if spec is not None)
    return (run.keys, run.model, run.model.lora, run.pooler, *trained, run.eval, run.logger, *options)


def check_choices(cfg: DictConfig, overrides: Sequence[str] = (), before_torch: bool = False) -> RunSpecs:
    """:func:`preflight` without its file checks: the config's values, every spec's rules, the checks across groups
    and that every override acts."""
    return preflight(cfg, overrides, before_torch=before_torch, files=False)


#: the old name of :func:`preflight`
validate = preflight


def _as_run(run: RunSpecs | DictConfig) -> RunSpecs:
    return typed_specs(run) if isinstance(run, DictConfig) else run


# --- the checks across groups (each ``check(run, before_torch)``) ---------------------------------
def check_method_setting(run: RunSpecs, before_torch: bool = False) -> None:
    """The method's needs of the run's other choices (SNCSE: a text augmentation; DiffCSE: its projector's pooler)."""
    if run.method is not None:
        run.method.check_setting(run.setting())


def check_loss_kind(run: RunSpecs, before_torch: bool = False) -> None:
    """The configured loss must be a kind the method calls (:attr:`MethodSpec.loss_kinds`, :attr:`LossSpec.kind`)."""
    method, loss = run.method, run.loss
    if method is None or loss is None or loss.kind in method.loss_kinds:
        return

    fits = ", ".join(losses_of_kinds(method.loss_kinds)) or "none found"
    raise ConfigError(f"loss={loss.name}: method={method.name} calls {'/'.join(method.loss_kinds)} losses and this "
                      f"one is a {loss.kind} loss; use one of: {fits}")


def check_prompt_options(run: RunSpecs, before_torch: bool = False) -> None:
    """``model.prompt``/``view_prompts``/``prompt_period`` and the prompt poolers (before any model loads)."""
    model, method, pooler = run.model, run.method, str(run.pooler.name)
    if method is not None and method.own_prompts:
        pooler = ""  # the method sets its pooler and prompts (its pooler group is inert)
    if method is not None and not method.takes_prompts:
        if pooler in PROMPT_POOLERS:
            raise ConfigError(f"pooler={pooler}: method={method.name} builds its views from token ids, without a "
                              "prompt to pool")
        if model.prompt or model.view_prompts:
            raise ConfigError(f"model.prompt: method={method.name} builds its views from token ids and applies no prompt")
    if model.prompt:  # "" = none (a prompt pooler then uses its default template)
        check_prompt(str(model.prompt), "model.prompt", pooler)
    for prompt in model.view_prompts:
        check_prompt(str(prompt), "model.view_prompts", pooler)


def check_workers_can_augment(run: RunSpecs, before_torch: bool = False) -> None:
    """Reject ``train.num_workers > 0`` when the augmentation runs a model on a GPU at every step: the
    DataLoader's forked worker processes, where augmentation runs, cannot use CUDA (or MPS)."""
    augmentation = run.augmentation
    if run.train.num_workers <= 0 or augmentation is None or not augmentation.runs_model_in_training():
        return  # -1 (auto) prepares such batches in the main process
    device = str(run.train.device)
    if device == "auto" and before_torch:
        return  # whether auto finds a GPU: the job's check, with torch
    if device == "auto":
        import torch  # here: a run with train.device set is judged before torch loads

        mps = getattr(torch.backends, "mps", None)
        device = "cuda" if torch.cuda.is_available() else "mps" if mps is not None and mps.is_available() else "cpu"
    if device != "cpu":
        raise ConfigError(
            f"train.num_workers: augmentation={augmentation.name} runs its model on the training device ({device}) at "
            "every step, which forked DataLoader workers cannot use; set train.num_workers=0"
        )


def check_matryoshka(run: RunSpecs, before_torch: bool = False) -> None:
    """``train.matryoshka_dims``: a loss that takes embeddings, sizes within the model's width (the sizes' own rules
    are declared on the field)."""
    dims = run.train.matryoshka_dims
    if dims is None or run.method is None:
        return

    if run.loss is None:
        raise ConfigError(f"train.matryoshka_dims: method={run.method.name} has no loss to wrap")
    if run.loss.kind not in EMBEDDING_KINDS:
        raise ConfigError(
            f"train.matryoshka_dims: loss={run.loss.name} of method={run.method.name} is a {run.loss.kind} loss, which "
            f"does not take sentence embeddings (Matryoshka wraps {', '.join(EMBEDDING_KINDS)} losses)"
        )
    width = _model_width(str(run.model.name_or_path), before_torch)
    if width is not None and max(dims) > width:
        raise ConfigError(f"train.matryoshka_dims: {max(dims)} exceeds the model's embedding width {width}")


def check_truncate_dim(run: RunSpecs, before_torch: bool = False) -> None:
    """``eval.truncate_dim`` within the model's embedding width."""
    truncate_dim = run.eval.truncate_dim
    if truncate_dim is not None:
        width = _model_width(str(run.model.name_or_path), before_torch)
        if width is not None and truncate_dim > width:
            raise ConfigError(f"eval.truncate_dim: {truncate_dim} exceeds the model's embedding width {width}")


def check_eval_pooler(run: RunSpecs, before_torch: bool = False) -> None:
    """``eval.pooler``: a registered pooler that pools the same token states as the run's encoder (no MLP head, no
    prompt token, no appended EOS), from a plain encoder (a method with its own pooling has no pooler to swap)."""
    name = run.eval.pooler
    if name is None:
        return
    if name not in POOLERS:
        raise ConfigError(f"eval.pooler: unknown pooler '{name}'; valid: {', '.join(POOLERS)} (or null: pooler.name)")
    for attribute, need in EVAL_POOLER_NEEDS.items():
        if getattr(REGISTRY[name], attribute):
            raise ConfigError(f"eval.pooler: '{name}' needs {need}, which the trained encoder was not built with; "
                              f"train with pooler={name} instead")
    trained = run.pooler.pooling
    if trained.reads_prompt_token or trained.appends_eos:
        raise ConfigError(f"eval.pooler: pooler={run.pooler.name} builds its own input (prompt or EOS); "
                          "re-pooling it with another pooler is not supported")
    if run.method is not None and "pooler" not in run.method.uses:
        raise ConfigError(f"eval.pooler: method={run.method.name} pools its own way (its pooler group is unused)")


def check_eval_options(run: RunSpecs, before_torch: bool = False) -> None:
    """``eval.tasks`` and ``train.select_metric`` with the ``eval.*`` options (:func:`cl_bench.eval.check_eval_config`
    without its data files, which :func:`check_eval_files` reads; for ``mteb:`` tasks alone, the encoding options
    they use); the hardware's part (``before_torch``: left to the job's pass)."""
    own_tasks, mteb_tasks = split_tasks(run.eval.tasks)
    options = run.eval.options()
    if own_tasks or not mteb_tasks:
        check_eval_config(run.paths.data_dir, own_tasks, options, _select_metric(run),
                          eval_device=str(run.train.device), files=False, device_checks=not before_torch)
        return
    check_backend_and_precision(options.backend, options.precision)
    check_cache_options(options.cache, options.cache_dir, options.cache_size_gb)
    if not before_torch:
        from cl_bench.models.inference import check_inference_options

        check_inference_options(options.backend, options.precision, str(run.train.device))


def _select_metric(run: RunSpecs) -> str | None:
    return str(run.train.select_metric) if run.training else None


#: the checks across groups, after every spec's own rules, in this order (each ``check(run, before_torch)``)
RUN_CHECKS = (check_prompt_options, check_eval_pooler, check_method_setting, check_loss_kind, check_workers_can_augment,
              check_matryoshka, check_truncate_dim)


# --- the model and the files (each ``check(run, overrides)``) -------------------------------------
def check_local_paths(run: RunSpecs) -> None:
    """The files and folders the run names outside the data root, which nothing downloads: a training corpus
    outside ``paths.data_dir`` and a ``train.resume`` run directory must exist. The job's first file check,
    torch-free, so ``cl-bench`` gives it before torch (:func:`cl_bench.config.early_checks.check_model_and_data`).

    Raises:
        ConfigError: one line naming the key and the path.
    """
    if not run.training:
        return
    train_file = Path(str(run.data.train_file)).absolute()
    if not train_file.is_relative_to(Path(run.paths.data_dir).absolute()) and not train_file.is_file():
        raise ConfigError(f"data.train_file: corpus file not found: {Path(str(run.data.train_file))}")  # as check_text_file
    resume = str(run.train.resume or "")
    if resume.lower() not in ("", "false", "none", "null", "true", "auto") and not Path(resume).is_dir():
        raise ConfigError(f"train.resume: run directory not found: {resume}")


def check_model_and_files(run: RunSpecs, overrides: Sequence[str] = ()) -> None:
    """The model can be loaded and every file the run reads is there (fetching the data root's missing files
    unless downloads are off), in the job's order: the local paths (:func:`check_local_paths`), then the model and
    the data root's files together (offline, one message names every missing piece), then the data root and the
    corpus's content. Imports neither torch nor a model library.

    Raises:
        ConfigError: one line naming the key(s).
    """
    from cl_bench.data.download import DataDownloadError, ensure_data

    check_local_paths(run)
    problems = []
    try:
        check_model_reachable(run.model.name_or_path, wants_decoder(run.pooler.name, run.model.bidirectional))
    except ModelLoadError as err:
        problems.append(str(err))
    try:
        ensure_data(run.paths.data_dir, needed_files(run), tried=tried_data_options(run, overrides))
    except DataDownloadError as err:  # first use: fetch before any model loads
        problems.append(str(err))
    if problems:
        raise ConfigError(" -- and ".join(problems))
    data_dir = Path(run.paths.data_dir)
    if not data_dir.is_dir():
        raise ConfigError(
            f"paths.data_dir: data root '{data_dir}' not found; set CL_BENCH_DATA or paths.data_dir "
            "(a folder with sts/, transfer/ and corpus/; `cl-bench-data download` makes one)"
        )
    if run.training:
        try:
            check_text_file(run.data.train_file, run.data.limit)
        except DataFileError as err:
            raise ConfigError(str(err)) from err


def check_backbone(run: RunSpecs | DictConfig, overrides: Sequence[str] = ()) -> None:
    """The backbone options against the model's config (decoder, LoRA, attention kernel), no weights loaded
    (:func:`cl_bench.models.decoders.check_backbone_options`)."""
    from cl_bench.models.decoders import BackboneOptionError, check_backbone_options

    run = _as_run(run)
    keeps_mlp = run.pooler.pooling.has_mlp and not run.pooler.mlp_only_train
    mode = str(run.keys.mode)
    try:
        check_backbone_options(run.model, mode, str(run.pooler.name), run.method, run.augmentation,
                               str(run.eval.backend), keeps_mlp)
    except BackboneOptionError as err:
        raise ConfigError(str(err)) from err
    eval_pooler = run.eval.pooler
    if eval_pooler is not None and REGISTRY[str(eval_pooler)].first_token:  # a decoder's first token saw only itself
        try:
            check_backbone_options(run.model, "eval", str(eval_pooler))
        except BackboneOptionError as err:
            raise ConfigError(f"eval.{err}") from err


def check_device(run: RunSpecs | DictConfig, overrides: Sequence[str] = ()) -> None:
    """``train.device`` (where training runs and evaluation encodes) is one torch has here, and ``train.precision``
    can run on it: a GPU command run on a machine without one gets one line, not CUDA's traceback after the model
    loaded. Imports torch (the job's last check).

    Raises:
        ConfigError: one line naming the key.
    """
    import torch

    run = _as_run(run)
    name = str(run.train.device)
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
    if run.training:
        from cl_bench.train.precision import autocast_dtype

        try:
            autocast_dtype(str(run.train.precision), device)
        except ValueError as err:
            raise ConfigError(f"{err} (train.device={name})") from err


def check_eval_files(run: RunSpecs, overrides: Sequence[str] = ()) -> None:
    """The data files of the evaluation and of ``train.select_metric``'s dev figures (nothing fails after training),
    and the ``mteb:`` task names."""
    from cl_bench.eval.mteb import check_mteb_tasks

    own_tasks, mteb_tasks = split_tasks(run.eval.tasks)
    if own_tasks or not mteb_tasks:  # their values were checked before (check_eval_options, in the same pass)
        check_eval_data(run.paths.data_dir, own_tasks, run.eval.options(), _select_metric(run))
    if mteb_tasks:
        check_mteb_tasks(mteb_tasks)


#: the checks of the model and the files, after the config's, in this order (each ``check(run, overrides)``)
FILE_CHECKS = (check_model_and_files, check_backbone, check_device, check_eval_files)


def tried_data_options(run: RunSpecs, overrides: Sequence[str]) -> set[str]:
    """What a data error must not suggest: ``data=NAME`` already chosen, keys already given."""
    given = {key for o in overrides if (key := override_key(o)) is not None}
    tried = {f"data={run.data.name}"} | given
    if os.environ.get("CL_BENCH_DATA") and "paths.data_dir" not in given:
        tried.add("CL_BENCH_DATA")
    return tried


def needed_files(run: RunSpecs | DictConfig) -> list[tuple[str, str]]:
    """``(config key, file relative to the data root)`` for every data-root file the run reads.

    The training corpus (when it lies in the data root) and the evaluation's files: the final
    tasks' and, when training, the dev metric's (:func:`cl_bench.eval.tasks.required_files`).
    """
    run = _as_run(run)
    root = Path(run.paths.data_dir).absolute()
    wanted: list[tuple[str, str]] = []
    if run.training:
        train_file = Path(run.data.train_file).absolute()
        if train_file.is_relative_to(root):
            wanted.append(("data.train_file", train_file.relative_to(root).as_posix()))
        wanted += [("paths.data_dir", rel) for rel in dev_required_files(run.train.select_metric)]
    evaluation = run.eval
    own_tasks = split_tasks(evaluation.tasks)[0]
    try:
        flow = check_postprocess(evaluation.postprocess, evaluation.whitening, evaluation.flow)
        files = required_files(resolve_tasks(own_tasks), evaluation.align_uniform, evaluation.anisotropy,
                               evaluation.align_uniform_split, fits_per_task(evaluation.postprocess, flow)) if own_tasks else []
    except (EvalConfigError, KeyError, ValueError):  # a bad eval option: the evaluation check names it
        files = []
    return wanted + [("paths.data_dir", rel) for rel in files]


# ------------------------------------------------------------------------------------------------
# What acts on a run: every override must act, and only what acted is recorded
# ------------------------------------------------------------------------------------------------
def inert_keys(run: RunSpecs | DictConfig) -> Mapping[str, str]:
    """The keys that cannot act on this run, with the reasons (:attr:`RunSpecs.inert`; a composed config is made
    typed specs first)."""
    return _as_run(run).inert


def check_overrides_act(run: RunSpecs, overrides: Sequence[str]) -> None:
    """Reject an override of a key or group that cannot act on this run (one line, names the key)."""
    keys = override_keys(overrides)
    if not keys:
        return
    inert = run.inert
    for key in keys:
        reason = covered(key, inert)
        if reason is not None:
            raise ConfigError(f"{key}: has no effect on this run: {reason}")

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



def override_keys(overrides: Sequence[str]) -> list[str]:
    """The config keys (or groups) named by Hydra override strings (``+a.b=1`` -> ``a.b``)."""
    keys = []
    for text in overrides:
        key = override_key(text)
        if key and key.split("/")[0].split(".")[0] not in _ALWAYS_ACTING:
            keys.append(key)
    return keys
