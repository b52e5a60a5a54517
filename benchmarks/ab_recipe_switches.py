"""Short CPU A/B runs of the official-recipe switches: STS-B dev (mean ± std over seeds) per setting.

Each switch is trained both ways from the same model, corpus head, seeds and steps (one process,
one torch thread), then the final encoder is scored on STS-B dev (cosine Spearman x 100):

    python benchmarks/ab_recipe_switches.py --switch adam_bias_correction mlm_mode --seeds 1 2 3 --steps 32

Switches: first_layer (evaluation only: no training, no seeds), adam_bias_correction, mlm_mode,
synonym, is_bert_select_metric, sg_frozen_dropout, sg_early_stopping_rule, sg_final_weights,
sbert_optimizer, sbert_train_classifier, sbert_select_metric, bsl_adam_eps, bsl_select_metric, byol_batch_norm.
Figures this small say which way a switch moves a short run, not what a full run would reach.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import typed_specs, validate
from cl_bench.eval import evaluate_dev
from cl_bench.models.encoder import build_encoder
from cl_bench.train.loop import train

#: switch -> (overrides shared by both settings, {setting label: its overrides})
SWITCHES: dict[str, tuple[list[str], dict[str, list[str]]]] = {
    "adam_bias_correction": (
        ["method=simcse"],
        {"corrected": ["train.adam_bias_correction=true"], "uncorrected": ["train.adam_bias_correction=false"]},
    ),
    "mlm_mode": (
        ["method=simcse", "method.mlm_weight=0.1"],
        {"clean": ["method.mlm_mode=clean"], "masked": ["method.mlm_mode=masked"]},
    ),
    "synonym": (
        ["method=simcse", "method.augment_both_views=false"],
        {"one_word": ["augmentation=simcse_table1/synonym"], "nlpaug_defaults": ["augmentation=synonym"]},
    ),
    "is_bert_select_metric": (
        ["experiment=is_bert", "train.lr=2e-5", "train.eval_steps=8", "model.max_length=32", "train.adam_bias_correction=true"],
        {"cosine": ["train.select_metric=stsb_dev"], "best_of_four": ["train.select_metric=stsb_dev_max_similarity"]},
    ),
    "sg_frozen_dropout": (
        ["experiment=sg_opt_bert", "batch_size=16", "model.max_length=32", "train.eval_steps=0",
         "train.early_stopping_patience=0", "train.early_stopping_rule=no_gain"],
        {"frozen_eval": ["method.frozen_dropout=false"], "frozen_dropout": ["method.frozen_dropout=true"]},
    ),
    "sg_early_stopping_rule": (
        ["experiment=sg_opt_bert", "batch_size=16", "model.max_length=32", "train.eval_steps=4",
         "train.early_stopping_patience=2", "train.final_weights=best"],
        {"no_gain": ["train.early_stopping_rule=no_gain"], "drops": ["train.early_stopping_rule=drops"]},
    ),
    "sg_final_weights": (
        ["experiment=sg_opt_bert", "batch_size=16", "model.max_length=32", "train.eval_steps=4",
         "train.early_stopping_patience=0", "train.early_stopping_rule=no_gain"],
        {"best": ["train.final_weights=best"], "last": ["train.final_weights=last"]},
    ),
    # issue 28: Sentence-BERT's NLI preset at its own lr (2e-5), on SNLI dev pairs (data=snli_labeled)
    "sbert_optimizer": (
        ["experiment=sbert_nli", "data=snli_labeled", "train.lr=2e-5", "model.max_length=32"],
        {"v020_no_bias_correction_eps1e-6": ["train.adam_bias_correction=false", "train.adam_eps=1e-6"],
         "torch_adamw_eps1e-8": ["train.adam_bias_correction=true", "train.adam_eps=1e-8"]},
    ),
    "sbert_train_classifier": (
        ["experiment=sbert_nli", "data=snli_labeled", "train.lr=2e-5", "model.max_length=32"],
        {"trained": ["method.train_classifier=true"], "v020_fixed": ["method.train_classifier=false"]},
    ),
    "sbert_select_metric": (
        ["experiment=sbert_nli", "data=snli_labeled", "train.lr=2e-5", "model.max_length=32", "train.eval_steps=16"],
        {"cosine": ["train.select_metric=stsb_dev"], "best_of_three": ["train.select_metric=stsb_dev_max_similarity_no_dot"]},
    ),
    # issue 28 point 9: BSL (experiment=byol_wiki) at its lr 1e-4; Adam eps of transformers.AdamW vs torch's
    "bsl_adam_eps": (
        ["experiment=byol_wiki", "model.max_length=32"],
        {"bsl_eps1e-6": ["train.adam_eps=1e-6"], "torch_eps1e-8": ["train.adam_eps=1e-8"]},
    ),
    "bsl_select_metric": (
        ["experiment=byol_wiki", "model.max_length=32", "train.eval_steps=16"],
        {"best_of_four": ["train.select_metric=stsb_dev_max_similarity"], "cosine": ["train.select_metric=stsb_dev"]},
    ),
    # issue 28 point 8: BN statistics per view vs stacked, on views that differ in kind (token cutoff on view 2 only)
    "byol_batch_norm": (
        ["experiment=byol_wiki", "model.max_length=32", "augmentation=token_cutoff"],
        {"per_view": ["method.batch_norm=per_view"], "joint": ["method.batch_norm=joint"]},
    ),
}


def _compose(overrides: list[str]):  # noqa: ANN202
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def run_one(args: argparse.Namespace, overrides: list[str], seed: int) -> dict[str, float]:
    """Train with ``overrides`` and seed ``seed``; the final STS-B dev and the run's state."""
    batch = 16 if any(o.startswith("experiment=sg_opt_bert") for o in overrides) else args.batch_size
    # the wiki1m head unless the switch trains on other data (Sentence-BERT: NLI pairs)
    data = [] if any(o.startswith("data=") for o in overrides) else ["data=wiki1m_head"]
    common = [
        f"model.name_or_path={args.model}", *data, f"data.limit={args.steps * batch}",
        f"batch_size={batch}", "pooler=avg", "logger=none", f"train.max_steps={args.steps}", "train.eval_steps=0",
        "train.num_threads=1", "train.device=cpu", "train.progress_bar=false", "train.checkpoint_steps=0",
        "train.save_best=false", f"train.lr={args.lr}", "eval.tasks=[stsb]", f"seed={seed}",
    ]
    # the switch's own overrides come last, so that a preset's values can be set back
    experiment = [o for o in overrides if o.startswith("experiment=")]
    cfg = _compose(experiment + common + [o for o in overrides if not o.startswith("experiment=")])
    validate(cfg)

    def dev_eval(encoder: object) -> dict[str, float]:
        return evaluate_dev(encoder, args.data, cfg.train.select_metric, align_uniform=False, anisotropy=False)

    dev_by_step: dict[int, float] = {}
    selected_by_step: dict[int, float] = {}  # the selection metric's value, where it is not stsb_dev

    def log_metrics(metrics: dict[str, float], step: int) -> None:
        if "stsb_dev" in metrics:
            dev_by_step[step] = metrics["stsb_dev"]
        if cfg.train.select_metric != "stsb_dev" and cfg.train.select_metric in metrics:
            selected_by_step[step] = metrics[cfg.train.select_metric]

    with tempfile.TemporaryDirectory() as run_dir:
        _, state = train(typed_specs(cfg), Path(run_dir), log_metrics, dev_eval)
    # The loop evaluates at the last step too, so the final weights' STS-B dev is already logged:
    # the best evaluation's (final_weights=best) or the last one's (final_weights=last).
    final_step = state.best_step if cfg.train.final_weights == "best" else max(dev_by_step)
    return {"stsb_dev": dev_by_step[final_step], "steps": float(state.step), "best_step": float(state.best_step),
            "curve": dev_by_step, **({"selected_curve": selected_by_step} if selected_by_step else {})}


def first_layer_ab(args: argparse.Namespace) -> dict[str, float]:
    """avg_first_last of the untrained model with "first" = embedding output (0) or first transformer layer (1)."""
    torch.set_num_threads(1)
    out = {}
    for layer in (0, 1):
        encoder = build_encoder(args.model, pooler="avg_first_last", first_layer=layer, fresh_mlp=False)
        out[f"first_layer={layer}"] = evaluate_dev(encoder, args.data, "stsb_dev", align_uniform=False,
                                                   anisotropy=False)["stsb_dev"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--switch", nargs="+", default=list(SWITCHES) + ["first_layer"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--model", default=os.environ.get("CL_BENCH_MINILM", "../shared/models/all-MiniLM-L6-v2"))
    parser.add_argument("--data", default=os.environ.get("CL_BENCH_DATA", "../shared/data"))
    parser.add_argument("--setting", nargs="+", default=None, help="run only these settings of the switches")
    parser.add_argument("--jsonl", default="", help="append one JSON line per run here")
    args = parser.parse_args()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "?")
    print(f"CPU: {model_name} ({platform.machine()}), torch {torch.__version__}, 1 thread, load {os.getloadavg()}")
    for switch in args.switch:
        if switch == "first_layer":
            print(f"first_layer (untrained, STS-B dev): {json.dumps(first_layer_ab(args))}", flush=True)
            continue
        shared, settings = SWITCHES[switch]
        summary = []
        for label, overrides in settings.items():
            if args.setting and label not in args.setting:
                continue
            scores = []
            for seed in args.seeds:
                started = time.perf_counter()
                result = run_one(args, shared + overrides, seed)
                record = {"switch": switch, "setting": label, "seed": seed, **result,
                          "seconds": round(time.perf_counter() - started, 1), "load": os.getloadavg()[0]}
                print(json.dumps(record), flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a", encoding="utf-8") as handle:
                        handle.write(json.dumps(record) + "\n")
                scores.append(result["stsb_dev"])
            spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
            summary.append(f"{label} {statistics.mean(scores):.2f} ± {spread:.2f}")
        print(f"{switch} (STS-B dev, n={len(args.seeds)}): " + " | ".join(summary), flush=True)


if __name__ == "__main__":
    main()
