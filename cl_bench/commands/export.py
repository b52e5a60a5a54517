"""``cl-bench-export RUN_DIR OUT_DIR``: a trained checkpoint as a sentence-transformers model.

The exported folder loads with ``sentence_transformers.SentenceTransformer(OUT_DIR)`` and gives the
embeddings cl-bench's own :class:`~cl_bench.models.encoder.SentenceEncoder` gives (same pooler),
and with ``transformers.AutoModel.from_pretrained(OUT_DIR)`` (the backbone sits at the top level).
Poolers map onto stock sentence-transformers modules, so no custom code is needed to load it:

* ``cls_before_pooler`` -> ``Pooling(cls)``; ``avg`` -> ``Pooling(mean)``; ``last_token`` -> ``Pooling(lasttoken)``;
* ``cls`` -> ``Pooling(cls)`` + ``Dense(tanh)`` holding the trained MLP (left out when the model
  was trained with ``mlp_only_train``, as cl-bench evaluates it);
* ``cls_avg`` -> ``Pooling(cls, mean)`` (the two concatenated) + ``Dense(identity)`` with fixed weights
  ``[I/2, I/2]`` (their mean);
* ``avg_top2`` / ``avg_first_last`` -> ``WeightedLayerPooling`` with fixed 0/1 weights that select
  the two layers (their average equals the average of the two layer means, the mask being the
  same) + ``Pooling(mean)``; the backbone config gets ``output_hidden_states=true`` so the layers
  reach the pooling module.

A LoRA checkpoint (adapters only) is exported merged into its base weights (peft's
``merge_and_unload``); the check compares the merged export with the unmerged adapter model.

A README.md model card states the method, hyperparameters and the run's STS/transfer figures.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cl_bench import __version__
from cl_bench.commands.st_model import (  # the checkpoint as a SentenceTransformer, shared with logger.log_model
    ExportError,
    RunInfo,
    locate_run,
    pooling_settings,
    sentence_transformer_of,
)
from cl_bench.eval.registry import metric_task
from cl_bench.models.embedding_cache import respect_umask
from cl_bench.models.encoder import build_encoder, quiet_transformers_bars
from cl_bench.models.hub import ModelLoadError, check_safetensors
from cl_bench.models.poolers import POOLERS
from cl_bench.tracking.metric_names import parse_name, upgrade_record
from cl_bench.utils.atomic import atomic_folder
from cl_bench.utils.rundir import ENCODER_META_FILE

#: Sentences the export check encodes with both cl-bench and sentence-transformers.
CHECK_SENTENCES = (
    "A man is playing a guitar.",
    "Two dogs run across the green field.",
    "the cat sits",
)


class ExportCheckError(ExportError):
    """The written export does not give cl-bench's embeddings (exit status 1: the export failed, not its input)."""


def _reference_embeddings(model_dir: Path, settings: dict[str, Any], sentences: Sequence[str]) -> np.ndarray:
    encoder = build_encoder(
        str(model_dir), pooler=settings["pooler"], mlp_only_train=settings["mlp_only_train"],
        first_layer=settings["first_layer"], fresh_mlp=False,
    )
    return encoder.encode(list(sentences), batch_size=len(sentences))


def check_export(out_dir: Path, model_dir: Path, settings: dict[str, Any], atol: float = 1e-4) -> float:
    """Reload the export in sentence-transformers and compare with cl-bench's encoder.

    Returns:
        The largest absolute difference over :data:`CHECK_SENTENCES`.

    Raises:
        ExportError: when it exceeds ``atol``.
    """
    from sentence_transformers import SentenceTransformer

    exported = SentenceTransformer(str(out_dir), device="cpu").encode(list(CHECK_SENTENCES), convert_to_numpy=True)
    reference = _reference_embeddings(model_dir, settings, CHECK_SENTENCES)
    diff = float(np.abs(exported - reference).max())
    if diff > atol:
        raise ExportCheckError(f"{out_dir}: exported model differs from cl-bench's encoder by {diff:.2e} (> {atol:g})")
    return diff


# ------------------------------------------------------------------------------------------------
# Model card
# ------------------------------------------------------------------------------------------------
def _group_metrics(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The card's metric sections, each figure under its recorded name (:mod:`cl_bench.tracking.metric_names`; a
    run logged under the old flat names is read through :func:`~cl_bench.tracking.metric_names.upgrade_record`):
    a figure goes with the kind of the evaluation task it belongs to (:func:`cl_bench.eval.registry.metric_task`;
    ``select/best_<metric>`` with its metric's)."""
    groups: dict[str, dict[str, float]] = {"STS": {}, "Transfer": {}, "MTEB": {}, "Other": {}}
    sections = {"sts": "STS", "transfer": "Transfer"}
    numbers = {k: v for k, v in results.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    for name, value in upgrade_record(numbers).items():
        parsed = parse_name(name)
        task = metric_task(parsed.key.lower().removeprefix("best_"))
        group = "MTEB" if parsed.section == "mteb" else sections[task.kind] if task is not None else "Other"
        groups[group][name] = float(value)
    return groups


def _hyperparameters(config: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for key in ("method", "loss", "augmentation"):
        node = config.get(key)
        if isinstance(node, dict):
            rows.update({f"{key}.{name}": value for name, value in node.items() if name != "_partial_"})
    for section, names in (
        ("model", ("name_or_path", "max_length", "bidirectional", "attn_implementation", "lora")),
        ("pooler", ("name", "mlp_only_train", "first_layer")),
        ("data", ("name", "train_file", "limit")),
        ("train", ("lr", "epochs", "max_steps", "warmup_ratio", "weight_decay", "max_grad_norm", "precision",
                   "select_metric", "eval_steps")),
    ):
        node = config.get(section)
        if isinstance(node, dict):
            rows.update({f"{section}.{n}": node[n] for n in names if n in node})
    lora = rows.pop("model.lora", None)
    if isinstance(lora, dict) and int(lora.get("r") or 0) > 0:  # LoRA rows only for a LoRA run
        rows.update({f"model.lora.{k}": v for k, v in lora.items()})
    rows.update({name: config[name] for name in ("batch_size", "dropout", "seed") if name in config})
    # SentenceEncoder.save's extra_meta: step, selection score
    rows.update({f"checkpoint.{name}": value for name, value in meta.items()
                 if name not in ("pooler", "mlp_only_train", "first_layer", "max_length")})
    return rows


def _describe(module: Any) -> str:
    """Short module name for the card: Transformer, Pooling(cls), Pooling(cls+mean), Dense(tanh), WeightedLayerPooling."""
    name = type(module).__name__
    mode = getattr(module, "pooling_mode", None)
    if mode:
        return f"{name}({mode if isinstance(mode, str) else '+'.join(mode)})"  # several modes: concatenated
    activation = getattr(module, "activation_function", None)
    if activation is not None:
        return f"{name}({type(activation).__name__.lower()})"
    return name


def _eval_overrides(settings: dict[str, Any]) -> str:
    """cl-bench overrides that evaluate the export as exported (mode=eval applies a cls MLP if present)."""
    pooler = settings["pooler"]
    if pooler == "cls" and settings["mlp_only_train"]:
        pooler = "cls_before_pooler"  # the MLP was for training only: [CLS] as is
    extra = f" pooler.first_layer={settings['first_layer']}" if pooler == "avg_first_last" else ""
    return f"pooler={pooler}{extra}"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(_fmt(v) for v in value)
    return str(value).replace("|", "\\|")


def base_model(name_or_path: str, launch_dir: Path | None) -> str:
    """The run's base model as the card records it: a hub id as is, a local folder as an absolute path.

    A relative path in the run's config is relative to where the run was launched (Hydra's
    ``hydra.runtime.cwd``), not to where the export runs.
    """
    path = Path(name_or_path).expanduser()
    if path.is_absolute():
        return str(path)
    launched = path if launch_dir is None else launch_dir / path
    if name_or_path.startswith((".", "~")) or launched.is_dir():
        return str(launched.resolve())
    return name_or_path


def model_card(info: RunInfo, settings: dict[str, Any], modules: Sequence[str], out_dir: Path) -> str:
    """README.md text: method, base model, pooling, hyperparameters and results of the run."""
    config = info.config
    method = config.get("method", {}).get("name") if isinstance(config.get("method"), dict) else None
    method = method or info.meta.get("method") or "unknown (no run config found)"
    base = config.get("model", {}).get("name_or_path") if isinstance(config.get("model"), dict) else None
    base = base_model(str(base), info.launch_dir) if base else None
    tags = ["sentence-transformers", "sentence-similarity", "feature-extraction", "cl-bench"]
    if method and " " not in method:
        tags.append(str(method))
    front = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "tags:"]
    front += [f"- {t}" for t in tags]
    if base and "/" in base and not base.startswith((".", "/", "~")):
        front.append(f"base_model: {base}")
    front.append("---")
    pooler_text = settings["pooler"]
    if settings["pooler"] == "cls":
        pooler_text += " (MLP used in training only)" if settings["mlp_only_train"] else " (with the trained MLP)"
    if settings["pooler"] == "avg_first_last":
        pooler_text += f" (first layer = hidden_states[{settings['first_layer']}])"
    lines = [
        *front, "",
        f"# {method} sentence encoder (cl-bench)", "",
        f"Trained with cl-bench, method **{method}**"
        + (f" from `{base}`" if base else "") + f"; pooler **{pooler_text}**.",
        f"Exported as sentence-transformers modules: {' → '.join(modules)}.", "",
        "## Usage", "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        f'model = SentenceTransformer("{out_dir}")',
        'embeddings = model.encode(["A man is playing a guitar.", "Someone plays music."])',
        "```", "",
        "The backbone alone loads with `transformers.AutoModel.from_pretrained(...)` on the same folder.", "",
    ]
    hyper = _hyperparameters(config, info.meta)
    lines += ["## Training", ""]
    if hyper:
        lines += ["| setting | value |", "|---|---|", *(f"| {k} | {_fmt(v)} |" for k, v in hyper.items()), ""]
    else:
        lines += ["No run configuration was found next to this checkpoint.", ""]
    groups = _group_metrics(info.results)
    lines += ["## Results", ""]
    if not info.results:
        lines += ["No results.json was found next to this checkpoint.", ""]
    titles = {
        "STS": "STS (Spearman correlation of cosine similarities, as in results.json)",
        "Transfer": "Transfer tasks (accuracy, as in results.json)",
        "MTEB": "MTEB (main score, as in results.json)",
        "Other": "Other metrics",
    }
    for group, metrics in groups.items():
        if metrics:
            lines += [f"### {titles[group]}", "", "| metric | value |", "|---|---|"]
            lines += [f"| {k} | {_fmt(v)} |" for k, v in metrics.items()] + [""]
    source = info.run_dir or info.model_dir
    lines += [
        "## Provenance", "",
        f"Exported by cl-bench-export {__version__} on {_dt.date.today().isoformat()} from `{source}`.",
        f"`{ENCODER_META_FILE}` keeps cl-bench's own pooler settings; cl-bench evaluates this folder the same "
        f"way with `cl-bench mode=eval model.name_or_path=<this folder> {_eval_overrides(settings)}`.", "",
    ]
    return "\n".join(lines)


def export(
    path: str | Path, out_dir: str | Path, pooler: str | None = None, overwrite: bool = False, check: bool = True
) -> Path:
    """Export a run's best checkpoint (or a model directory) as a sentence-transformers folder.

    Args:
        path: Hydra run directory with ``best_model/``, or a model directory.
        out_dir: where the folder goes (must be empty or absent unless ``overwrite``).
        pooler: override the pooler recorded with the checkpoint.
        overwrite: replace an existing ``out_dir``.
        check: reload the export and compare its embeddings with cl-bench's encoder.

    Returns:
        ``out_dir``.

    Raises:
        ExportError: with a one-line message naming the path or option.
    """
    info = locate_run(path)
    settings = pooling_settings(info, pooler)

    for weights in sorted(info.model_dir.glob("*.safetensors")):  # a truncated or garbage file: one line, now
        try:
            check_safetensors(weights)
        except ModelLoadError as err:
            raise ExportError(str(err).removeprefix("model.name_or_path: ")) from None
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        if not overwrite:
            raise ExportError(f"{out_dir}: exists and is not empty; pass --overwrite to replace it")
        if out_dir.resolve() in (info.model_dir.resolve(), *(info.model_dir.resolve().parents)):
            raise ExportError(f"{out_dir}: would overwrite the checkpoint being exported")

    # written beside out_dir and renamed into place: a replaced export stays whole until the new one is complete
    with sentence_transformer_of(info, settings) as model, atomic_folder(out_dir) as folder:
        model.save(str(folder), create_model_card=False)
        meta = {**info.meta, **settings}
        (folder / ENCODER_META_FILE).write_text(json.dumps(meta, indent=2))
        names = [_describe(module) for module in model]
        (folder / "README.md").write_text(model_card(info, settings, names, out_dir), encoding="utf-8")
        respect_umask(folder)  # the weights are written 0600 (mkstemp): group-readable as the umask says
    if check:
        check_export(out_dir, info.model_dir, settings)
    return out_dir


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="cl-bench-export",
        description="Write a run's best checkpoint as a folder loadable by sentence-transformers and "
        "transformers.AutoModel, with a model card.",
    )
    parser.add_argument("run_dir", type=Path, help="Hydra run directory (with best_model/) or a model directory")
    parser.add_argument("out_dir", type=Path, help="output folder")
    parser.add_argument("--pooler", choices=POOLERS, help="pooler to export (default: the one recorded)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT_DIR")
    parser.add_argument("--no-check", action="store_true", help="skip reloading and comparing the embeddings")
    args = parser.parse_args(argv)

    quiet_transformers_bars()  # loading and saving draw three bars around the one line this command prints
    try:
        out = export(args.run_dir, args.out_dir, args.pooler, args.overwrite, check=not args.no_check)
    except ExportError as err:
        print(f"cl-bench-export: error: {err}", file=sys.stderr)
        return 1 if isinstance(err, ExportCheckError) else 2  # 2: bad input, as every cl-bench command's
    print(f"exported {out} (SentenceTransformer('{out}'), AutoModel.from_pretrained('{out}'))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
