"""Structured-config schemas (registered with Hydra) and the pre-flight validation.

Schemas make a misspelled key or a wrongly typed value fail at composition. :func:`validate`
then checks the values (ranges, files, the ``_target_`` kwargs of method/loss/augmentation)
before any model or data is loaded, raising :class:`ConfigError` with one line naming the key.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from cl_bench.eval.flow import FlowOptions
from cl_bench.models.poolers import POOLERS

MODES = ("train", "eval")


class ConfigError(ValueError):
    """An invalid configuration value; the message is one line and names the key."""


@dataclass
class ModelConfig:
    name_or_path: str = "bert-base-uncased"
    max_length: int = 32  # training truncation; evaluation never truncates below the model limit
    dropout: float = MISSING  # interpolated from the top-level `dropout`


@dataclass
class PoolerConfig:
    name: str = "cls"
    mlp_only_train: bool = True  # SimCSE --mlp_only_train: MLP in training only
    first_layer: int = 1  # avg_first_last: 1 = first transformer layer (SimCSE >= 206d7ae), 0 = embeddings


@dataclass
class DataConfig:
    name: str = "wiki1m"
    train_file: str = MISSING
    limit: int | None = None  # use only the first `limit` items of the corpus


@dataclass
class TrainConfig:
    batch_size: int = MISSING  # interpolated from the top-level `batch_size`
    lr: float = 3e-5
    epochs: int = 1
    max_steps: int = -1  # > 0 stops after this many optimizer steps (overrides epochs)
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0  # HF Trainer default used by SimCSE; 0 disables clipping
    eval_steps: int = 125  # evaluate on the dev metric every N steps (0 = only at the end)
    log_steps: int = 10
    select_metric: str = "stsb_dev"  # dev metric that picks the best checkpoint
    save_best: bool = True
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 elsewhere) | fp32 | bf16 | fp16
    num_threads: int | None = None  # torch CPU threads (None = torch default)
    progress_bar: bool = True
    checkpoint_steps: int = 500  # write run_dir/checkpoint.pt every N steps (0 = only on interruption)
    resume: str = ""  # "" = fresh run; "true"/"auto" = continue this run dir's checkpoint; or a run dir path
    nonfinite: str = "stop"  # NaN/Inf loss or gradient: stop (keep last good checkpoint) | skip (count it)
    early_stopping_patience: int = 0  # > 0: stop after this many dev evaluations without a new best (SG-BERT: 10); needs train.eval_steps > 0
    gradcache_chunk: int = 0  # GradCache chunk size (0 = off); cl_bench/train/gradcache.py


@dataclass
class EvalConfig:
    """Options of the final evaluation; each field is a keyword argument of ``cl_bench.eval.evaluate``."""

    tasks: list[str] = field(default_factory=lambda: ["sts"])  # groups sts, transfer and/or task names
    batch_size: int = 128  # encoding batch size
    align_uniform: bool = True  # Wang & Isola alignment/uniformity on STS-B, as SimCSE
    align_uniform_split: str = "all"  # STS-B split(s) for the geometry metrics: all | train | dev | test
    anisotropy: bool = True  # singular-value spectrum + mean cosine of random pairs (+ anisotropy.png)
    transfer_config: str = "full"  # SentEval classifier config: full (10 folds) | fast (5 folds)
    seed: int = 1111  # transfer-task fold shuffling seed (SentEval's default)
    whitening: int | None = None  # BERT-whitening's kept dimensions k (eval.postprocess=whitening; null = all)
    postprocess: str = "none"  # none | whitening | flow (BERT-flow), fitted per task before cosine scoring
    flow: FlowOptions = field(default_factory=FlowOptions)  # BERT-flow's options (eval.postprocess=flow)


@dataclass
class LoggerConfig:
    enabled: bool = True
    tracking_uri: str | None = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<launch dir>/mlflow.db
    experiment_name: str = "cl-bench"
    run_name: str | None = None
    system_metrics: bool = False


@dataclass
class PathsConfig:
    data_dir: str = MISSING
    output_dir: str = MISSING


@dataclass
class CLBenchConfig:
    mode: str = "train"
    seed: int = 42
    dropout: float = 0.1  # shortcut: hidden and attention dropout of the encoder
    batch_size: int = 64  # shortcut: train.batch_size
    model: ModelConfig = field(default_factory=ModelConfig)
    pooler: PoolerConfig = field(default_factory=PoolerConfig)
    method: dict[str, Any] = field(default_factory=dict)
    augmentation: dict[str, Any] = field(default_factory=dict)
    loss: dict[str, Any] = field(default_factory=dict)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)


def register_schemas() -> None:
    """Register the schemas with Hydra's ConfigStore (``conf/config.yaml`` extends them)."""
    ConfigStore.instance().store(name="cl_bench_schema", node=CLBenchConfig)


# ------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------
def _import_target(path: str, key: str) -> Any:
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise ConfigError(f"{key}._target_: cannot import '{path}' ({err})") from err


def _type_ok(value: Any, annotation: Any) -> bool:
    """Loose check of YAML/CLI scalars against a constructor annotation."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return any(_type_ok(value, arg) for arg in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation in (str, bool):
        return isinstance(value, annotation)
    if origin in (list, tuple) or annotation in (list, tuple):
        return isinstance(value, (list, tuple))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    return True


def check_target_node(node: DictConfig, key: str, skip: tuple[str, ...] = ()) -> None:
    """Check that a ``_target_`` node's keys and value types fit its callable's signature."""
    target_path = node.get("_target_")
    if not target_path:
        raise ConfigError(f"{key}: no _target_ given")
    target = _import_target(str(target_path), key)
    signature = inspect.signature(target)
    try:
        hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
    except Exception:  # unresolvable forward refs: skip type checks, keep key checks
        hints = {}
    accepts_kwargs = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    values = OmegaConf.to_container(node, resolve=True)
    for name, value in values.items():
        if name.startswith("_") or name in skip:
            continue
        if name not in signature.parameters and not accepts_kwargs:
            valid = [p for p in signature.parameters if p not in ("self", "context") and p not in skip]
            raise ConfigError(f"{key}.{name}: unknown key for {target_path}; valid keys: {', '.join(valid)}")
        if name in hints and not _type_ok(value, hints[name]):
            raise ConfigError(f"{key}.{name}: expected {hints[name]}, got {value!r}")


def validate(cfg: DictConfig) -> None:
    """Validate a composed config before anything heavy is loaded.

    Raises:
        ConfigError: one line naming the offending key (or file and line).
    """
    from cl_bench.data.text import DataFileError, check_text_file
    from cl_bench.models.encoder import ModelLoadError, check_model_reachable

    if cfg.mode not in MODES:
        raise ConfigError(f"mode: unknown mode '{cfg.mode}'; valid: {', '.join(MODES)}")
    if cfg.pooler.name not in POOLERS:
        raise ConfigError(f"pooler.name: unknown pooler '{cfg.pooler.name}'; valid: {', '.join(POOLERS)}")
    if cfg.pooler.name == "avg_first_last" and cfg.pooler.first_layer not in (0, 1):
        raise ConfigError(f"pooler.first_layer: must be 0 or 1, got {cfg.pooler.first_layer}")
    if not 0.0 <= cfg.dropout < 1.0:
        raise ConfigError(f"dropout: must be in [0, 1), got {cfg.dropout}")
    if cfg.model.max_length < 1:
        raise ConfigError(f"model.max_length: must be >= 1, got {cfg.model.max_length}")
    if cfg.mode == "train":
        if cfg.train.batch_size < 2:
            raise ConfigError(f"batch_size: must be >= 2 (in-batch negatives need two), got {cfg.train.batch_size}")
        if cfg.train.lr <= 0:
            raise ConfigError(f"train.lr: must be > 0, got {cfg.train.lr}")
        if cfg.train.epochs < 1 and cfg.train.max_steps <= 0:
            raise ConfigError("train.epochs: must be >= 1 unless train.max_steps > 0")
        if cfg.train.nonfinite not in ("stop", "skip"):
            raise ConfigError(f"train.nonfinite: must be stop or skip, got '{cfg.train.nonfinite}'")
        if cfg.train.early_stopping_patience < 0:
            raise ConfigError(f"train.early_stopping_patience: must be >= 0 (0 = off), got {cfg.train.early_stopping_patience}")
        if cfg.train.checkpoint_steps < 0:
            raise ConfigError(f"train.checkpoint_steps: must be >= 0, got {cfg.train.checkpoint_steps}")
        if cfg.train.gradcache_chunk < 0:
            raise ConfigError(f"train.gradcache_chunk: must be >= 0 (0 = off), got {cfg.train.gradcache_chunk}")
        if "tau" in cfg.loss and cfg.loss.tau is not None and cfg.loss.tau <= 0:
            raise ConfigError(f"loss.tau: must be > 0, got {cfg.loss.tau}")
        check_target_node(cfg.loss, "loss")
        check_target_node(cfg.augmentation, "augmentation")
        check_target_node(cfg.method, "method", skip=("name",))
    data_dir = Path(cfg.paths.data_dir)
    if not data_dir.is_dir():
        raise ConfigError(
            f"paths.data_dir: data root '{data_dir}' not found; set CL_BENCH_DATA or paths.data_dir "
            "(a folder with sts/, transfer/ and corpus/, e.g. ../shared/data)"
        )
    try:
        if cfg.mode == "train":
            check_text_file(cfg.data.train_file)
        check_model_reachable(cfg.model.name_or_path)
    except (DataFileError, ModelLoadError) as err:
        raise ConfigError(str(err)) from err
