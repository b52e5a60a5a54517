"""A checkpoint as a ``SentenceTransformer``: where a run's model and its pooling are found (:func:`locate_run`,
:func:`pooling_settings`) and the stock sentence-transformers modules that compute what cl-bench's encoder computes
(:func:`build_sentence_transformer`, :func:`sentence_transformer_of`). One implementation for the two users:
``cl-bench-export`` (:mod:`cl_bench.commands.export`, the folder and its model card) and ``logger.log_model`` (the
MLflow model, :mod:`cl_bench.commands.mlflow_records`).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cl_bench.models.decoders import is_lora_dir
from cl_bench.models.encoder import load_backbone
from cl_bench.models.poolers import POOLERS
from cl_bench.utils.rundir import ENCODER_META_FILE, RunDir


class ExportError(RuntimeError):
    """An export cannot be done (bad input: exit status 2, nothing written); the one-line message names the path or
    option and the fix."""


@dataclass
class RunInfo:
    """What an export reads: the model folder and, for a run directory, its config and results."""

    model_dir: Path
    run_dir: Path | None
    meta: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    results: dict[str, float] = field(default_factory=dict)
    launch_dir: Path | None = None  # where the run was started (relative paths of its config are from there)


def _load_config(path: Path) -> dict[str, Any]:
    """The run's Hydra config as plain data; values that need Hydra to resolve stay as written."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    def walk(node: DictConfig) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in node.keys():
            try:
                value = node[key]
            except Exception:  # e.g. ${hydra:runtime.output_dir} outside a Hydra app
                out[str(key)] = node._get_node(key)._value()  # noqa: SLF001
                continue
            if isinstance(value, DictConfig):
                out[str(key)] = walk(value)
            elif isinstance(value, ListConfig):
                try:
                    out[str(key)] = OmegaConf.to_container(value, resolve=True)
                except Exception:
                    out[str(key)] = OmegaConf.to_container(value, resolve=False)
            else:
                out[str(key)] = value
        return out

    return _resolved_from_params(walk(OmegaConf.load(path)), path.parent.parent)


def _resolved_from_params(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The values the run itself resolved: its ``params.json`` (resolved when it started) wins over the
    config's, whose interpolations need Hydra's runtime or cl-bench's resolvers (and may resolve
    otherwise today); ``paths.output_dir`` is the run dir. The model card then shows no interpolation."""
    params_file = RunDir(run_dir).params
    params = json.loads(params_file.read_text()) if params_file.is_file() else {}

    def fill(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, dict):
                fill(value, f"{dotted}.")
            elif dotted in params:  # what the run resolved (an interpolation here may resolve otherwise now)
                node[key] = params[dotted]
            elif isinstance(value, str) and "${" in value and dotted == "paths.output_dir":
                node[key] = str(run_dir)

    fill(config, "")
    return config


def locate_run(path: str | Path) -> RunInfo:
    """Find the checkpoint, config and results for a run directory or a bare model directory.

    Args:
        path: a Hydra run directory (with ``best_model/``) or a Hugging Face model directory
            (e.g. the ``best_model`` folder itself).

    Raises:
        ExportError: neither kind of directory.
    """
    path = Path(path)
    run: RunDir | None = RunDir(path)
    if (run.best_model / "config.json").is_file():
        model_dir = run.best_model
    elif (path / "config.json").is_file():
        model_dir, run = path, RunDir(path.parent)
        run = run if run.is_run() else None
    elif run.is_run():
        raise ExportError(
            f"{path}: run directory without {RunDir.BEST_MODEL}/ (mode=eval runs and train.save_best=false "
            "save no checkpoint); export the evaluated model directory instead"
        )
    else:
        raise ExportError(f"{path}: neither a run directory with {RunDir.BEST_MODEL}/ nor a model directory with config.json")
    info = RunInfo(model_dir, run.path if run else None)
    if (model_dir / ENCODER_META_FILE).is_file():
        info.meta = json.loads((model_dir / ENCODER_META_FILE).read_text())
    if run is not None:
        if run.config.is_file():
            info.config = _load_config(run.config)
        if run.hydra_config.is_file():
            from omegaconf import OmegaConf

            launch_dir = OmegaConf.select(OmegaConf.load(run.hydra_config), "hydra.runtime.cwd", throw_on_missing=False)
            info.launch_dir = Path(launch_dir) if launch_dir else None
        if run.results.is_file():
            info.results = json.loads(run.results.read_text())
    return info


def pooling_settings(info: RunInfo, pooler: str | None = None) -> dict[str, Any]:
    """Pooler, MLP use and first layer: the override, else the checkpoint's, else the run config's.

    Raises:
        ExportError: unknown pooler, or none recorded for a bare Hugging Face model.
    """
    cfg_pooler = info.config.get("pooler", {}) if isinstance(info.config.get("pooler"), dict) else {}
    name = pooler or info.meta.get("pooler") or cfg_pooler.get("name")
    if name is None:
        raise ExportError(f"{info.model_dir}: no pooler recorded ({ENCODER_META_FILE} missing); pass --pooler")
    if name not in POOLERS:
        raise ExportError(f"--pooler: unknown pooler '{name}'; valid: {', '.join(POOLERS)}")
    if info.meta.get("prompt") or name in ("mask", "prompt_last"):  # cl_bench/models/prompts.py
        raise ExportError(f"{info.model_dir}: pooler={name} with prompt {info.meta.get('prompt', '')!r}: a prompted "
                          "encoder has no sentence-transformers equivalent here; score it with cl-bench mode=eval")
    mlp_only_train = info.meta.get("mlp_only_train", cfg_pooler.get("mlp_only_train", False))
    first_layer = info.meta.get("first_layer", cfg_pooler.get("first_layer", 1))
    return {"pooler": name, "mlp_only_train": bool(mlp_only_train), "first_layer": int(first_layer)}


def _st_modules() -> tuple[Any, Any, Any, Any]:
    """sentence-transformers' Transformer, Pooling, Dense, WeightedLayerPooling (6.x paths, older fallback)."""
    try:
        from sentence_transformers.sentence_transformer.modules import (
            Dense,
            Pooling,
            Transformer,
            WeightedLayerPooling,
        )
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Dense, Pooling, Transformer, WeightedLayerPooling
    return Transformer, Pooling, Dense, WeightedLayerPooling


def build_sentence_transformer(
    model_dir: str | Path, pooler: str, mlp_only_train: bool = False, first_layer: int = 1
) -> Any:
    """A ``SentenceTransformer`` computing what cl-bench's encoder computes at evaluation.

    Args:
        model_dir: a Hugging Face model directory (as saved by ``SentenceEncoder.save``).
        pooler: one of :data:`cl_bench.models.poolers.POOLERS`.
        mlp_only_train: for ``cls``: the MLP was used in training only, so it is left out.
        first_layer: for ``avg_first_last``: hidden-state index of the "first" layer.

    Returns:
        The model, on CPU.
    """
    import torch
    from sentence_transformers import SentenceTransformer

    transformer_cls, pooling_cls, dense_cls, weighted_cls = _st_modules()
    try:
        from transformers import AutoTokenizer

        limit = getattr(AutoTokenizer.from_pretrained(str(model_dir)), "model_max_length", 512)
    except OSError as err:
        raise ExportError(f"{model_dir}: cannot load its tokenizer ({err})") from err
    # SentenceEncoder.encode truncates only at min(model_max_length, 512): same here.
    transformer = transformer_cls(str(model_dir), max_seq_length=int(min(limit, 512)))
    backbone = transformer.auto_model
    hidden = int(backbone.config.hidden_size)
    modules: list[Any] = [transformer]
    if pooler in ("cls", "cls_before_pooler"):
        modules.append(pooling_cls(hidden, pooling_mode="cls"))
        if pooler == "cls" and not mlp_only_train:
            backbone_pooler = getattr(backbone, "pooler", None)
            if backbone_pooler is None or not hasattr(backbone_pooler, "dense"):
                raise ExportError(f"{model_dir}: pooler=cls needs the backbone's pooler layer (the trained MLP); none found")
            dense = dense_cls(hidden, hidden, bias=True, activation_function=torch.nn.Tanh())
            dense.linear.load_state_dict(backbone_pooler.dense.state_dict())
            modules.append(dense)
    elif pooler == "avg":
        modules.append(pooling_cls(hidden, pooling_mode="mean"))
    elif pooler == "cls_avg":  # stock modules only: [CLS ; mean] concatenated, then a fixed Dense that halves their sum
        modules.append(pooling_cls(hidden, pooling_mode=("cls", "mean")))
        halve_sum = dense_cls(2 * hidden, hidden, bias=False, activation_function=torch.nn.Identity())
        with torch.no_grad():
            halve_sum.linear.weight.copy_(torch.cat([torch.eye(hidden), torch.eye(hidden)], dim=1) / 2)
        modules.append(halve_sum)
    elif pooler == "last_token":  # the last real token (the tokenizer saved with the model appends a decoder's EOS)
        modules.append(pooling_cls(hidden, pooling_mode="lasttoken"))
    else:  # avg_top2 / avg_first_last: average two hidden layers, then mean over tokens
        layers = int(backbone.config.num_hidden_layers)
        start = layers - 1 if pooler == "avg_top2" else first_layer
        weights = torch.zeros(layers + 1 - start)
        weights[0] = weights[-1] = 1.0
        backbone.config.output_hidden_states = True  # saved in config.json: the layers reach the pooling
        modules.append(
            weighted_cls(hidden, num_hidden_layers=layers, layer_start=start, layer_weights=torch.nn.Parameter(weights))
        )
        modules.append(pooling_cls(hidden, pooling_mode="mean"))
    return SentenceTransformer(modules=modules, device="cpu")


def merge_lora(adapter_dir: Path, out_dir: Path) -> Path:
    """A LoRA checkpoint's adapters merged into its base model, saved with the tokenizer to ``out_dir``."""
    backbone, tokenizer = load_backbone(str(adapter_dir))
    merged = backbone.merge_and_unload()
    merged.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


@contextlib.contextmanager
def sentence_transformer_of(info: RunInfo, settings: dict[str, Any]) -> Iterator[Any]:
    """The ``SentenceTransformer`` of a located checkpoint (:func:`locate_run`, :func:`pooling_settings`): what
    ``cl-bench-export`` saves and ``logger.log_model`` logs to MLflow. A LoRA checkpoint's adapters are merged into
    its base weights in a temporary folder, kept while the model is in use."""
    with tempfile.TemporaryDirectory(prefix="cl_bench_merged_") as merged:
        source = info.model_dir
        if is_lora_dir(info.model_dir):  # LoRA adapters: merged into the base weights, so any loader reads one model
            source = merge_lora(info.model_dir, Path(merged))
        yield build_sentence_transformer(source, **settings)
