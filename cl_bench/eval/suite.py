"""The evaluation entry points: :func:`evaluate` (final), :func:`evaluate_dev` (model selection)
and :func:`format_table` (SimCSE-style rows).

The tasks, their files, scorers and averages, and the table's columns come from the registry
(:mod:`cl_bench.eval.registry`). Every distinct sentence an evaluation needs — all requested tasks
and the geometry sentences — is gathered first and encoded in **one** ``encoder.encode`` call
(:class:`~cl_bench.eval.embed.EmbeddingTable`); tasks then only look embeddings up.

Metric keys (results.json / MLflow):

* STS (Spearman x 100): ``sts12`` … ``sts16`` (SentEval ``all``), ``stsb``, ``sickr`` (test split),
  ``sts_avg`` (mean of the seven, present when all seven ran); ``<task>_mean``, ``<task>_wmean``
  and per-sub-dataset ``<task>_<subset>`` for STS12–16; ``stsb_dev``, ``sickr_dev`` and their mean
  ``sts_dev_avg`` (the dev evaluation's figure, present when both ran).
* Transfer (accuracy x 100): ``mr``, ``cr``, ``subj``, ``mpqa``, ``sst2``, ``trec``, ``mrpc``,
  ``mrpc_f1``, ``transfer_avg`` (mean of the seven); SentEval's dev accuracies ``<task>_dev`` and
  ``transfer_dev_avg``.
* Geometry on STS-B (``align_uniform_split``, default ``all`` = train + dev + test, the "whole
  STS-B" SimCSE's authors used for their alignment/uniformity plots, princeton-nlp/SimCSE #52 and
  #128): ``align`` over pairs with gold score > 4, ``uniform`` over the distinct sentences;
  ``anisotropy_mean_cos``, ``anisotropy_sv_top1``, ``anisotropy_sv_top10``,
  ``anisotropy_effective_rank``, and ``anisotropy.png`` (the spectrum) in ``out_dir``.
* Encoding: ``eval_onnx`` = 1 when ONNX Runtime computed the embeddings (``eval.backend``),
  ``eval_bf16`` (``eval_tf32``) = 1 when they were computed in bf16 (TF32): ``eval.precision``, ``auto`` resolved; absent otherwise.
* With ``postprocess=whitening`` (keeping ``whitening=k`` dimensions) or ``postprocess=flow``
  (BERT-flow, options ``flow``) every figure is computed on transformed embeddings, the transform
  being fitted per task on all of that task's sentences (for the geometry: all STS-B splits), or
  once on ``flow.corpus`` when it names a file.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from cl_bench.data.senteval import ScoredPairs
from cl_bench.data.text import read_sentences
from cl_bench.eval.embed import EmbeddingTable, Encoder
from cl_bench.eval.geometry import alignment, anisotropy_metrics, plot_spectrum, uniformity
from cl_bench.eval.pair_scores import save_pair_scores
from cl_bench.eval.postprocess import (
    Transform,
    build_postprocess,
    check_flow_encoder,
    dropout_embedder,
    official_flow_pooling,
)
from cl_bench.eval.registry import (
    ScoreOptions,
    complete_averages,
    get_task,
    load_task,
    score_task,
    table_rows,
    task_sentences,
)
from cl_bench.eval.senteval_classifier import classifier_device, torch_classifier_device
from cl_bench.eval.sts import similarity_spearmans
from cl_bench.eval.tasks import (
    ALWAYS_DEV_AVERAGE,
    GEOMETRY_SPLITS,
    GEOMETRY_TASK,
    SELECT_METRICS,
    SIMILARITY_SELECT_METRICS,
    EvalConfigError,
    EvalOptions,
    check_eval_config,
    dev_tasks,
    resolve_tasks,
)
from cl_bench.models.inference import EncodingSettings, current_settings, encoding, encoding_settings
from cl_bench.utils import interrupt
from cl_bench.utils.rundir import RunDir

log = logging.getLogger(__name__)

#: Alignment positives: STS-B pairs whose gold score exceeds this (SimCSE).
POSITIVE_THRESHOLD = 4.0


def _concat_pairs(parts: Iterable[ScoredPairs]) -> ScoredPairs:
    parts = list(parts)
    return ScoredPairs(
        tuple(t for p in parts for t in p.sent1),
        tuple(t for p in parts for t in p.sent2),
        np.concatenate([p.gold for p in parts]),
    )


def geometry_metrics(
    pairs: ScoredPairs,
    embed: EmbeddingTable,
    align_uniform: bool = True,
    anisotropy: bool = True,
    transform: Transform | None = None,
    out_dir: str | Path | None = None,
    suffix: str = "",
) -> dict[str, float]:
    """Alignment/uniformity and anisotropy of the embeddings of scored pairs (STS-B).

    Args:
        pairs: the pairs; positives are those with gold > 4, ``p_data`` their distinct sentences.
        embed: the embedding lookup.
        align_uniform: compute ``align`` and ``uniform``.
        anisotropy: compute the ``anisotropy_*`` metrics (and the plot when ``out_dir`` is given).
        transform: a fitted post-processing applied first (None: raw embeddings).
        out_dir: where ``anisotropy.png`` goes (None: no plot).
        suffix: appended to every key (``"_dev"`` during training).
    """

    def vectors(texts: Sequence[str]) -> np.ndarray:
        x = embed(texts)
        return transform(x) if transform is not None else x

    results: dict[str, float] = {}
    sentences = list(dict.fromkeys((*pairs.sent1, *pairs.sent2)))
    if align_uniform:
        positive = np.flatnonzero(pairs.gold > POSITIVE_THRESHOLD)
        if positive.size:
            results[f"align{suffix}"] = alignment(
                vectors([pairs.sent1[i] for i in positive]), vectors([pairs.sent2[i] for i in positive])
            )
        else:  # only possible on toy data; a training run must not die for it
            log.warning("no STS-B pair with gold > %s: alignment is NaN", POSITIVE_THRESHOLD)
            results[f"align{suffix}"] = float("nan")
        results[f"uniform{suffix}"] = uniformity(vectors(sentences))
    if anisotropy:
        metrics, spectrum = anisotropy_metrics(vectors(sentences))
        results.update({f"{key}{suffix}": value for key, value in metrics.items()})
        if out_dir is not None:
            path = plot_spectrum(
                spectrum, metrics, RunDir(out_dir).anisotropy_plot, f"STS-B ({len(sentences)} sentences)"
            )
            log.info("anisotropy plot written to %s", path)
    return results


#: Seed of :func:`sampled_pairs`' fixed sample (the same pairs in every run and job).
SAMPLE_SEED = 0


def sample_rows(pairs: int, limit: int) -> np.ndarray:
    """The rows (sorted) of the fixed sample of ``limit`` out of ``pairs`` pairs (:data:`SAMPLE_SEED`)."""
    return np.sort(np.random.default_rng(SAMPLE_SEED).choice(pairs, limit, replace=False))


def sampled_pairs(parts: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """Each STS split (:class:`~cl_bench.data.senteval.ScoredPairs`) of ``parts`` cut to a fixed sample of at most
    ``limit`` pairs (``eval.sample_pairs``: the same pairs in every run, original order kept); other parts unchanged."""
    sampled: dict[str, Any] = {}
    for name, part in parts.items():
        if isinstance(part, ScoredPairs) and len(part) > limit:
            rows = sample_rows(len(part), limit)
            part = ScoredPairs(tuple(part.sent1[i] for i in rows), tuple(part.sent2[i] for i in rows), part.gold[rows])
        sampled[name] = part
    return sampled


def encoding_flags(settings: EncodingSettings) -> dict[str, float]:
    """``eval_onnx: 1`` when ONNX Runtime computed the embeddings, ``eval_bf16: 1`` (``eval_tf32: 1``) when bf16
    (TF32) did — ``eval.precision=auto`` resolved on the encoder's device.

    They go to results.json and MLflow beside the figures they qualify (absent = torch / fp32); an
    encoder that is not a :class:`~cl_bench.models.encoder.SentenceEncoder` ignores both options.
    """
    ran = {"eval_onnx": "onnx" in settings.backends_used, "eval_bf16": "bf16" in settings.precisions_used,
           "eval_tf32": "tf32" in settings.precisions_used}
    return {flag: 1.0 for flag, used in ran.items() if used}


#: Length-sorted batches timed for the final evaluation's cost estimate (the 7 STS tasks: 224 batches of 128).
ESTIMATE_BATCHES = 4


def padded_length(batches: Iterable[Sequence[int]], lengths: Sequence[int]) -> int:
    """Length the batches (lists of sentence indices) occupy once padded to their longest sentence."""
    return sum(len(batch) * max(lengths[i] for i in batch) for batch in batches if batch)


def estimate_encoding_seconds(
    encoder: Encoder, unique: Sequence[str], batch_size: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Seconds that ``encoder.encode(unique, batch_size)`` will take, measured with the current backend and precision.

    The evaluation encodes length-sorted batches, so the timed sample is :data:`ESTIMATE_BATCHES` of those
    very batches, one from the middle of each length quantile, and their time scales to all batches by padded
    length (long sentences cost more). Lengths are the encoder's token counts (``token_counts``, as a
    :class:`~cl_bench.models.encoder.SentenceEncoder` sorts), else characters: sorting by characters pads
    the sampled batches more than the evaluation's (STS-B, MiniLM: 28% more tokens). An untimed first call
    pays the one-time costs (ONNX export and session, first-call allocations); a call on one sentence
    measures what every call pays once (hashing the weights, setting up), which the evaluation pays once,
    not per batch. The sample bypasses the embedding cache: it must neither be served from it nor leave
    entries in it.

    Args:
        encoder: the model about to be evaluated.
        unique: the distinct sentences the evaluation will encode.
        batch_size: the evaluation's batch size.
        clock: seconds (``time.perf_counter``; tests pass a fake).
    """
    token_counts = getattr(encoder, "token_counts", None)
    lengths = list(token_counts(unique)) if callable(token_counts) else [len(text) for text in unique]
    order = sorted(range(len(unique)), key=lengths.__getitem__)
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    picked = [batches[(2 * i + 1) * len(batches) // (2 * ESTIMATE_BATCHES)] for i in range(ESTIMATE_BATCHES)]
    shortest = [unique[order[0]]]
    with encoding(replace(current_settings(), cache=False)):
        # one-time costs, not part of the evaluation's time (a batch, not one sentence: where ``auto`` has
        # not measured its backend choice yet, it measures on the sentences of this first call)
        encoder.encode([unique[i] for i in picked[0]], batch_size=batch_size)
        started = clock()
        encoder.encode(shortest, batch_size=batch_size)
        per_call = clock() - started
        started = clock()
        encoder.encode([unique[i] for batch in picked for i in batch], batch_size=batch_size)
        sample = max(clock() - started - per_call, 0.0)
    return per_call + sample * padded_length(batches, lengths) / padded_length(picked, lengths)


def announce_cost(
    encoder: Encoder, sentences: Sequence[str], batch_size: int, tasks: Sequence[str],
    clock: Callable[[], float] = time.perf_counter,
) -> float | None:
    """Log, before the final evaluation encodes, how many sentences it will encode and about how long it takes.

    The time is :func:`estimate_encoding_seconds` (about 2% of the STS suite's encoding), zero when the
    embedding cache holds them all; the transfer tasks' classifiers come on top. Nothing is timed when the
    set is only a few batches.

    Returns:
        The estimated encoding seconds (None when not estimated).
    """
    unique = list(dict.fromkeys(sentences))
    what = f"evaluation of {', '.join(tasks)}: {len(unique):,} distinct sentences to encode"
    # a SentenceEncoder can tell whether the embedding cache holds them all (other encoders cannot)
    cached = getattr(encoder, "cached", None)
    if callable(cached) and cached(unique, batch_size):
        log.info("%s: all in the embedding cache, no encoding", what)
        return 0.0
    if len(unique) <= 2 * ESTIMATE_BATCHES * batch_size:
        log.info("%s", what)
        return None
    seconds = estimate_encoding_seconds(encoder, unique, batch_size, clock)
    extra = " + the transfer classifiers" if any(get_task(task).kind == "transfer" for task in tasks) else ""
    hint = "; to iterate faster: eval=quick (STS-B only)" if seconds > 60 and list(tasks) != ["stsb"] else ""
    log.info("%s, about %.0f s%s (timed on %d length-sorted batches of %d)%s",
             what, seconds, extra, ESTIMATE_BATCHES, batch_size, hint)
    return seconds


def encoding_settings_of(options: EvalOptions) -> EncodingSettings:
    """The encoding settings of ``options`` (``eval.backend``, ``precision``, ``cache*``): a new object each call,
    as the encoders record in it what ran."""
    return encoding_settings(options.backend, options.precision, options.cache, options.cache_dir,
                             options.cache_size_gb, iterating=options.sample_pairs is not None)


def evaluate(
    encoder: Encoder,
    data_dir: str | Path,
    tasks: str | Sequence[str] = ("sts",),
    options: EvalOptions | None = None,
    out_dir: str | Path | None = None,
) -> dict[str, float]:
    """Final evaluation of an encoder on STS and/or transfer tasks (SentEval protocol).

    Args:
        encoder: anything with ``encode(sentences, batch_size) -> (N, H) float32``.
        data_dir: the data root (``sts/``, ``transfer/``).
        tasks: groups (``sts``, ``transfer``) and/or task names.
        options: how to encode and score (:class:`~cl_bench.eval.options.EvalOptions`, every ``eval.*`` option but
            ``tasks`` and ``pooler``; a run builds it with ``EvalOptions.from_config(cfg.eval)``); None: the defaults.
        out_dir: folder for artifacts (the anisotropy plot, the per-pair STS scores); None writes nothing.

    Returns:
        Flat ``{metric name: value}`` (see the module docstring for the names).

    Raises:
        EvalConfigError: bad options or missing data files (checked before encoding).
    """
    started = time.perf_counter()
    options = EvalOptions() if options is None else options
    resolved = check_eval_config(data_dir, tasks, options)
    # the options as the names the steps below read them
    batch_size, align_uniform, anisotropy = options.batch_size, options.align_uniform, options.anisotropy
    sample_pairs, align_uniform_split = options.sample_pairs, options.align_uniform_split
    settings = encoding_settings_of(options)
    post = build_postprocess(options.postprocess, options.whitening, options.flow)
    if post is not None and post.kind == "flow":
        try:
            check_flow_encoder(encoder, post.flow)
        except ValueError as error:
            raise EvalConfigError(str(error)) from None
        if post.flow.fit_mode == "train":
            post.fit_embed = dropout_embedder(encoder, batch_size, post.flow.seed, encoding_settings_of(options))
        log.info("BERT-flow: fitted on %s embeddings, pooled %s", "dropout (training-mode)"
                 if post.flow.fit_mode == "train" else "dropout-free", "as the official avg-last-2 "
                 "(avg_first_last, first_layer=1)" if post.flow.pooler == "official" else "with the run's pooler")
    flow_pooling = post is not None and post.kind == "flow"
    with official_flow_pooling(encoder, post.flow) if flow_pooling else contextlib.nullcontext():
        per_task = post is not None and post.fits_per_task
        task_data = {task: load_task(data_dir, task, get_task(task).final_parts(per_task)) for task in resolved}
        geometry = align_uniform or anisotropy
        geometry_parts = load_task(data_dir, GEOMETRY_TASK, GEOMETRY_SPLITS[align_uniform_split]) if geometry else {}
        fit_parts = load_task(data_dir, GEOMETRY_TASK) if geometry and per_task else {}
        corpus = read_sentences(post.flow.corpus) if post is not None and not per_task else []
        if sample_pairs is not None:  # the quick path for iterating (eval=iterate), said as such
            task_data = {task: sampled_pairs(parts, sample_pairs) for task, parts in task_data.items()}
            geometry_parts = sampled_pairs(geometry_parts, sample_pairs)
            log.info("eval.sample_pairs=%d: the QUICK protocol for iterating: STS figures and geometry on a fixed "
                     "sample of at most %d pairs per split, not the full protocol (report figures with "
                     "eval.sample_pairs=null)", sample_pairs, sample_pairs)

        sentences: list[str] = []
        for parts in task_data.values():
            sentences += task_sentences(parts)
        sentences += task_sentences(geometry_parts) + task_sentences(fit_parts) + list(corpus)
        with encoding(settings):
            if sample_pairs is None:  # the quick path is short by construction: no timed estimate batches
                announce_cost(encoder, sentences, batch_size, resolved)
            table = EmbeddingTable(encoder, sentences, batch_size)
            try:
                table.truncate(options.truncate_dim)
            except ValueError as err:
                raise EvalConfigError(str(err)) from err
            if post is not None:
                post.prepare(table, corpus)

        results: dict[str, float] = encoding_flags(settings)
        if sample_pairs is not None:
            results["eval_sample_pairs"] = float(sample_pairs)
        pair_scores: dict = {}
        scoring = ScoreOptions(post, options.transfer_config, options.seed, options.transfer_classifier,
                               pair_scores)
        for task, parts in task_data.items():
            interrupt.check(results)  # a stop between tasks keeps the figures so far
            task_start = time.perf_counter()
            with classifier_device(torch_classifier_device(getattr(encoder, "device", None))):
                results.update(score_task(task, parts, table, scoring))
            results.update(complete_averages(results))
            if get_task(task).kind == "transfer":  # the slow ones: say where the time goes
                log.info("%s: %.2f (%.1f s)", task, results[task], time.perf_counter() - task_start)
        if geometry:
            transform = post.transform_for(table, task_sentences(fit_parts)) if post is not None else None
            results.update(
                geometry_metrics(
                    _concat_pairs(geometry_parts.values()), table, align_uniform, anisotropy, transform, out_dir
                )
            )
        if out_dir is not None and pair_scores:  # what cl-bench-report --compare resamples
            save_pair_scores(RunDir(out_dir).pair_scores, pair_scores)
        log.info("evaluation of %s done in %.1f s", ", ".join(resolved), time.perf_counter() - started)
        return results


def evaluate_dev(
    encoder: Encoder,
    data_dir: str | Path,
    select_metric: str = "stsb_dev",
    batch_size: int = 128,
    align_uniform: bool = True,
    anisotropy: bool = True,
    sample_pairs: int | None = None,
) -> dict[str, float]:
    """Fast dev evaluation for model selection during training (SimCSE's ``--mode dev``).

    Always computes ``stsb_dev``, ``sickr_dev`` and ``sts_dev_avg`` (their mean), and the geometry
    of the STS-B dev split (cheap: already encoded): ``align_dev``/``uniform_dev`` with
    ``align_uniform``, ``anisotropy_*_dev`` with ``anisotropy`` (no plot). ``select_metric="transfer_dev_avg"`` adds the seven transfer tasks in SentEval's fast
    configuration (5 folds): ``<task>_dev`` and ``transfer_dev_avg``. Parsed data is cached per
    data root; only encoding is repeated.

    Args:
        encoder: anything with ``encode(sentences, batch_size)``.
        data_dir: the data root.
        select_metric: ``stsb_dev`` | ``sts_dev_avg`` | ``transfer_dev_avg`` | ``stsb_dev_max_similarity``
            | ``stsb_dev_max_similarity_no_dot`` (the last two add ``stsb_dev_cosine/_manhattan/_euclidean/_dot``
            and both maxima); always a key of the result.
        batch_size: encoding batch size.
        align_uniform: also compute ``align_dev`` and ``uniform_dev``.
        anisotropy: also compute ``anisotropy_mean_cos_dev`` and the spectrum summaries.
        sample_pairs: ``eval.sample_pairs`` (``eval=iterate``): every STS dev split cut to the fixed sample of the
            final evaluation (:func:`sampled_pairs`: the same pairs), so that iterating encodes no full dev set;
            None: every pair (the full protocol). The keys stay the flat ones (the logger names the series).

    Returns:
        Flat ``{metric name: value}`` containing ``select_metric``.
    """
    if select_metric not in SELECT_METRICS:
        raise EvalConfigError(
            f"train.select_metric: unknown '{select_metric}'; valid: {', '.join(SELECT_METRICS)}"
        )
    names = dev_tasks(select_metric)
    task_data = {task: load_task(data_dir, task, get_task(task).dev_read_parts()) for task in names}
    geometry_pairs = load_task(data_dir, GEOMETRY_TASK, ("dev",))["dev"]
    if sample_pairs is not None:  # the iterating protocol: the final evaluation's fixed sample, said once per process
        task_data = {task: sampled_pairs(parts, sample_pairs) for task, parts in task_data.items()}
        geometry_pairs = sampled_pairs({"dev": geometry_pairs}, sample_pairs)["dev"]
        _announce_dev_sample(sample_pairs, sum(len(part) for parts in task_data.values() for part in parts.values()
                                               if isinstance(part, ScoredPairs)))
    sentences = [text for parts in task_data.values() for text in task_sentences(parts)]
    # iterating: eval.precision=auto may compute in the CPU's bf16, as the final evaluation on the same sample does
    with encoding(replace(current_settings(), iterating=True)) if sample_pairs is not None else contextlib.nullcontext():
        table = EmbeddingTable(encoder, sentences + task_sentences({"dev": geometry_pairs}), batch_size)

    dev_averages = {ALWAYS_DEV_AVERAGE} | ({select_metric} if select_metric == "transfer_dev_avg" else set())
    options = ScoreOptions(transfer_config="fast")
    results: dict[str, float] = {}
    for task, parts in task_data.items():
        kept = {metric for average, metric in get_task(task).averages.items() if average in dev_averages}
        with classifier_device(torch_classifier_device(getattr(encoder, "device", None))):
            results.update({k: v for k, v in score_task(task, parts, table, options).items() if k in kept})
    results.update({k: v for k, v in complete_averages(results).items() if k in dev_averages})
    if select_metric in SIMILARITY_SELECT_METRICS:
        results.update(similarity_spearmans("stsb_dev", geometry_pairs, table))
    if align_uniform or anisotropy:
        results.update(geometry_metrics(geometry_pairs, table, align_uniform, anisotropy, suffix="_dev"))
    return results


_DEV_SAMPLES_SAID: set[int] = set()


def _announce_dev_sample(sample_pairs: int, pairs: int) -> None:
    """Say (once per process and sample size) that the dev evaluations score a sample, and how many pairs."""
    if sample_pairs not in _DEV_SAMPLES_SAID:
        _DEV_SAMPLES_SAID.add(sample_pairs)
        log.info("dev evaluation on the fixed sample of eval.sample_pairs=%d pairs per split (%d STS dev pairs in all, "
                 "the final evaluation's sample): the iterating protocol, not the full dev sets", sample_pairs, pairs)


def _table(columns: Sequence[tuple[str, str]], results: dict[str, float]) -> str:
    cells = [f"{results[key]:.2f}" if key in results else "-" for _, key in columns]
    widths = [max(len(header), len(cell)) + 2 for (header, _), cell in zip(columns, cells, strict=True)]
    rule = "+" + "+".join("-" * width for width in widths) + "+"
    header = (
        "|" + "|".join(name.center(width) for (name, _), width in zip(columns, widths, strict=True)) + "|"
    )
    row = "|" + "|".join(cell.center(width) for cell, width in zip(cells, widths, strict=True)) + "|"
    return "\n".join((rule, header, rule, row, rule))


def format_table(results: dict[str, float]) -> str:
    """SimCSE-style result rows, one per task group of the registry: ``STS12 … SICK-R Avg.``, ``MR … MRPC Avg.``.

    A row is printed when any of its figures is present; missing figures show as ``-``.

    Args:
        results: the dict returned by :func:`evaluate`.

    Returns:
        The table(s) as text (empty when no group has a figure).
    """
    tables = [_table(columns, results) for columns in table_rows() if any(key in results for _, key in columns)]
    return "\n".join(tables)


def encoding_workload(
    data_dir: str | Path,
    tasks: Sequence[str],
    select_metric: str = "stsb_dev",
    align_uniform: bool = True,
    anisotropy: bool = True,
    align_uniform_split: str = "all",
    sample_pairs: int | None = None,
) -> tuple[int, int]:
    """Distinct sentences (final evaluation of ``tasks``, one dev evaluation for ``select_metric``).

    What a training run's ETA scales the final evaluation by (:class:`cl_bench.train.eta.JobClock`):
    both encode with the same model and batch size. The files are parsed once per process (the
    evaluations then reuse them). ``tasks``: cl-bench's own task or group names. ``sample_pairs``
    (``eval.sample_pairs``): both counted on the fixed sample they then encode (:func:`sampled_pairs`).
    """
    def cut(parts: Mapping[str, Any]) -> Mapping[str, Any]:
        return parts if sample_pairs is None else sampled_pairs(parts, sample_pairs)

    final = [text for task in resolve_tasks(tasks) for text in task_sentences(
        cut(load_task(data_dir, task, get_task(task).final_parts())))]
    if align_uniform or anisotropy:
        final += task_sentences(cut(load_task(data_dir, GEOMETRY_TASK, GEOMETRY_SPLITS[align_uniform_split])))
    dev = [text for task in dev_tasks(select_metric) for text in task_sentences(
        cut(load_task(data_dir, task, get_task(task).dev_read_parts())))]
    dev += task_sentences(cut(load_task(data_dir, GEOMETRY_TASK, ("dev",))))
    return len(set(final)), len(set(dev))
