"""Run names that MLflow's runs table shows whole.

MLflow 3's runs table gives the Run Name column room for about 22 characters at its default width
(measured in headless Chromium at 1400 px, MLflow 3.17: ``abcdefghijabcdefg020`` whole, 24 letters cut
with "…"; ``tests/commands/test_mlflow_ui.py`` keeps the screenshot), so a name is built to fit that:

1. every part in full: ``simcse tau=0.1 lr=1e-4``, ``dropout=0.1 seed=43``;
2. a sweep's child, too long: the values alone (the parent run's name, ``sweep: dropout × tau``, and the
   params say which keys they are), the seed kept as ``seed=N`` so that replicates read as replicates:
   ``0.15 0.001 seed=44``, else as ``sN``: ``dropout_fixed_0.1 s44``;
3. still too long: the trailing parts that do not fit are left out and counted, ``simcse avg +4``;
   the seed is never left out (``sN``). The run's ``overrides`` tag and params keep everything.
"""

from __future__ import annotations

from collections.abc import Sequence

#: characters the runs table shows of a run name before it cuts it (MLflow 3.x, default column width)
RUN_NAME_CHARS = 22
#: parts never left out (a replicate's seed tells it from its siblings)
KEPT = ("seed",)
#: keys a single run's name leaves out: they change how the run runs or what it logs, not what it trains
#: or how it is scored (a sweep that varies one of them still names it: it is what tells the jobs apart)
HOUSEKEEPING = frozenset({
    "train.progress_bar", "train.num_threads", "train.num_workers", "train.log_steps", "train.checkpoint_steps",
    "train.resume", "train.save_best", "train.device", "eval.anisotropy", "eval.align_uniform", "eval.cache",
    "eval.cache_dir", "eval.cache_size_gb", "eval.batch_size", "eval.backend", "logger", "paths", "hydra",
})


def fit_run_name(head: str, parts: Sequence[tuple[str | None, str]], limit: int | None = RUN_NAME_CHARS,
                 keys_named_elsewhere: bool = False) -> str:
    """``head`` then each ``(label, value)`` as ``label=value`` (``value`` alone when ``label`` is None),
    shortened as the module docstring says to at most ``limit`` characters where it can be.

    Args:
        head: the first word(s), never shortened (the method; ``eval <model>``).
        parts: the labelled values, in order.
        limit: the characters to fit (None: never shortened).
        keys_named_elsewhere: the parts' keys are named elsewhere (a sweep's parent run, ``sweep: dropout ×
            tau``), so values alone may stand for them; otherwise a part is shown as ``label=value`` or not.
    """

    def text(labelled: bool, seed_labelled: bool = True) -> list[str]:
        return [value if label is None else f"{label}={value}" if labelled or (label in KEPT and seed_labelled)
                else f"s{value}" if label in KEPT else value for label, value in parts]

    def join(items: Sequence[str]) -> str:
        return " ".join(p for p in (head, *items) if p)

    candidates = [text(True)] + ([text(False), text(False, seed_labelled=False)] if keys_named_elsewhere else [])
    for candidate in candidates:
        if limit is None or len(join(candidate)) <= limit:
            return join(candidate)
    kept = [i for i, (label, _) in enumerate(parts) if label in KEPT]
    best: tuple[int, str] = (-1, "")
    for seed_labelled in (True, False):  # parts left out: the seed as seed=N if that shows as many, else sN
        shown_text = text(not keys_named_elsewhere, seed_labelled)

        def trimmed(shown: Sequence[int], shown_text: list[str] = shown_text) -> str:
            """The shown parts, the count of the others, the kept ones last."""
            rest = len(parts) - len(shown) - len(kept)
            return join([*(shown_text[j] for j in shown), *([f"+{rest}"] if rest else []),
                         *(shown_text[j] for j in kept)])

        shown: list[int] = []
        for i in range(len(parts)):  # the leading parts that fit
            if i in kept:
                continue
            if len(trimmed([*shown, i])) > limit:
                break
            shown.append(i)
        if len(shown) > best[0]:
            best = (len(shown), trimmed(shown))
    return best[1]


def sweep_run_name(keys: Sequence[str], fallback: str, limit: int = RUN_NAME_CHARS) -> str:
    """The name of a sweep's parent run, fitted to the runs table like its children's.

    The swept keys by their last part (as the children's names show them): ``sweep: dropout × tau`` in full,
    else without the spaces (``sweep: method×dropout``), else the leading keys that fit and the count of the
    others (``sweep: method×tau +2``); ``fallback`` (the sweep folder's name) when no key varies. The parent's
    params name every swept key in full.
    """
    short = [key.split(".")[-1].split("/")[-1] for key in keys]
    if not short:
        return f"sweep: {fallback}"
    for separator in (" × ", "×"):
        name = f"sweep: {separator.join(short)}"
        if len(name) <= limit:
            return name
    for shown in range(len(short) - 1, 0, -1):
        name = f"sweep: {'×'.join(short[:shown])} +{len(short) - shown}"
        if len(name) <= limit:
            return name
    return f"sweep: {len(short)} keys"

#: the provenance fields shown per point (text values), in the order tables show them
PROVENANCE_FIELDS = ("aggregation", "eval_pooler", "eval_mlp", "mlp_dropped", "dev_selected_step", "dev_metric", "global_batch",
          "processes", "gathered_negatives", "train_precision", "eval_precision", "eval_truncate_dim", "eval_postprocess",
          "eval_backend", "torch", "transformers", "cuda", "device_name", "cl_bench_commit", "model_revision",
          "data_digest")
#: the MLflow tag prefix of a run's provenance fields (results.json ``provenance``: cl_bench.commands.provenance)
PROVENANCE_TAG_PREFIX = "provenance."
#: the headline figures (the runs table's columns, in this order), as the metric-name contract names them; the one
#: list cl-bench's MLflow views read (cl_bench.tracking.metric_names holds it once that module exists: point this at it)
HEADLINE_METRICS = ("sts/sts_avg", "sts/stsb", "transfer/transfer_avg", "geometry/align", "geometry/uniform",
                    "select/best_stsb_dev")
