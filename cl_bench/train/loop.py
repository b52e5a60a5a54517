"""The training loop shared by every method: :class:`Trainer` (build, resume, step, evaluate, checkpoint).

AdamW + the transformers linear schedule (SimCSE uses the HF Trainer defaults), seeded data order,
autocast (``train.precision``; bf16 also on CPUs), ``torch.compile`` of the encoder on bucketed lengths
(``train.compile``; cl_bench/train/compile.py), a step without host synchronisation on CUDA
(cl_bench/train/step.py), torch
DDP under torchrun, dev evaluation every ``train.eval_steps`` with the best weights kept (in memory,
and once on disk in Hugging Face format under ``<run dir>/best_model``), then the final evaluation of
the best weights. Everything method-specific is behind :class:`cl_bench.methods.base.Method`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import logging
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_bench.data.loader import BatchLoader, keep_items
from cl_bench.eval.embed import NonFiniteEmbeddingError
from cl_bench.losses.matryoshka import MatryoshkaLoss
from cl_bench.methods.base import Method, MethodContext
from cl_bench.models.encoder import encoder_from_config
from cl_bench.run_specs import RunSpecs, TrainConfig
from cl_bench.specs import LossSpec, Spec, build
from cl_bench.tracking.metric_names import select_name, select_names, train_name
from cl_bench.train.checkpoint import (
    atomic_save,
    load_checkpoint,
    restore_rng_states,
    rng_states,
)
from cl_bench.train.compile import (
    PadToBucket,
    compile_encoder,
    compile_mode,
    compile_setting,
    compile_wanted,
    length_buckets,
)
from cl_bench.train.eta import JobClock, job_bar
from cl_bench.train.gradcache import GradCache
from cl_bench.train.optim import build_optimizer
from cl_bench.train.precision import autocast, autocast_dtype
from cl_bench.train.selection import early_stopping_count
from cl_bench.train.step import NonFiniteReport, TrainStep, scaler_step
from cl_bench.utils import distributed  # torchrun (no-ops in one process)
from cl_bench.utils.atomic import atomic_folder
from cl_bench.utils.rundir import RunDir

__all__ = ["NonFiniteLossError", "Trainer", "TrainingInterrupted", "TrainState", "compile_encoder", "scaler_step",
           "train"]

log = logging.getLogger(__name__)

#: DataLoader workers of ``train.num_workers=-1`` (auto) on CUDA: tokenising a batch of 64-256 sentence pairs
#: takes a few milliseconds, so two workers keep ahead of any step
AUTO_DATA_WORKERS = 2


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA) RNGs."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def resolve_device(name: str) -> torch.device:
    """``auto`` picks cuda, then mps, then cpu."""
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def build_loss(spec: LossSpec) -> Callable[..., torch.Tensor]:
    """The loss function of a loss spec: its target, a pure tensor function, with the spec's values bound as keywords
    (``functools.partial``; ``name`` is a label, not an argument)."""
    module, _, name = spec.target.rpartition(".")
    values = {key: value for key, value in spec.values().items() if key != "name"}
    return functools.partial(getattr(importlib.import_module(module), name), **values)


def _node(spec: Spec) -> dict[str, Any]:
    """A spec as the node :func:`cl_bench.specs.build` takes (its target and values): the one route to its object."""
    return {"_target_": spec.target, **spec.values()}


def build_method(specs: RunSpecs, device: torch.device) -> Method:
    """Encoder, loss, augmentation and method from the run's specs.

    A group the method does not use is None in ``specs`` and not built at all (the preflight rejected overriding it).
    """
    if specs.method is None:
        raise ValueError(f"method: mode={specs.mode} trains no method")
    encoder = encoder_from_config(specs.model, specs.pooler, training=True)
    augmentation = None
    if specs.augmentation is not None:
        augmentation = build(_node(specs.augmentation))
        augmentation.setup(encoder, specs.model.name_or_path)
    loss = None
    if specs.loss is not None:
        loss = distributed.gather_loss(build_loss(specs.loss))  # global batch under torchrun
        dims, weights = specs.train.matryoshka_dims, specs.train.matryoshka_weights
        if dims is not None:  # validated: a loss that takes embeddings

            loss = MatryoshkaLoss(loss, list(dims), None if weights is None else list(weights))
    context = MethodContext(
        encoder=encoder,
        loss=loss,
        augmentation=augmentation,
        model_name_or_path=specs.model.name_or_path,
        max_length=specs.model.max_length,
        seed=specs.seed,
        data=dataclasses.asdict(specs.data),
    )
    method: Method = build(_node(specs.method), context)  # Method(context, its spec)
    return method.to(device)


def make_optimizer(method: Method, train: TrainConfig, autocast_dtype: torch.dtype | None = None) -> torch.optim.Optimizer:
    """The ``train.*`` optimiser over the method's trainable parameters (cl_bench/train/optim.py)."""
    return build_optimizer(method.named_parameters(), train, autocast_dtype=autocast_dtype)


@dataclass
class TrainState:
    """Progress of a run (what a resume needs besides model/optimizer/scheduler states)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best_score: float = -math.inf
    best_step: int = -1
    skipped_steps: int = 0
    evals_since_best: int = 0  # early-stopping count (train.early_stopping_rule; cl_bench/train/selection.py)
    last_dev_score: float = 0.0  # the previous dev score (rule 'drops' compares with it; SG-BERT starts at 0)
    stopped_early: bool = False


class TrainingInterrupted(Exception):
    """SIGINT/SIGTERM arrived: the current step finished and a checkpoint was written."""

    def __init__(self, state: TrainState) -> None:
        super().__init__(f"interrupted after step {state.step}; checkpoint saved")
        self.state = state


class NonFiniteLossError(RuntimeError):
    """The loss or the gradient norm was NaN/Inf and ``train.nonfinite=stop``; or (any ``train.nonfinite``) the
    encoder's embeddings at a dev evaluation were: the run ends FAILED with one line, before any figure is computed."""


class Trainer:
    """One training run, as the pipeline it is: :meth:`build`, :meth:`resume`, then :meth:`fit`, which
    repeats :meth:`step`, :meth:`evaluate` and :meth:`checkpoint` and ends with the best weights loaded.

    Under torchrun the method runs inside torch's ``DistributedDataParallel``
    (:func:`cl_bench.utils.distributed.data_parallel`); only rank 0 evaluates, logs and writes files.

    Args:
        specs: the run's typed specs (:class:`cl_bench.run_specs.RunSpecs`, as the entry point's preflight returns
            them: :func:`cl_bench.config.preflight`).
        run_dir: the run directory (``best_model/`` and ``checkpoint.pt`` go here).
        log_metrics: ``(metrics, step)`` sink (the run tracker).
        dev_eval: scores an encoder on the dev metric; must return ``train.select_metric``.
        stop_requested: polled after every step; True checkpoints and raises TrainingInterrupted.
        final_eval_ratio: the final evaluation's encoding work in dev evaluations, for the job's ETA
            (:class:`cl_bench.train.eta.JobClock`).
    """

    def __init__(
        self,
        specs: RunSpecs,
        run_dir: Path,
        log_metrics: Callable[[dict[str, float], int], None],
        dev_eval: Callable[[Any], dict[str, float]],
        stop_requested: Callable[[], bool] = lambda: False,
        final_eval_ratio: float = 0.0,
    ) -> None:
        self.specs, self.train_spec = specs, specs.train
        self.final_eval_ratio = final_eval_ratio
        self.run_dir = RunDir(run_dir)
        self.log_metrics, self.dev_eval, self.stop_requested = log_metrics, dev_eval, stop_requested
        self.state = TrainState()
        #: the best method state so far, on the CPU (rank 0); written to disk only inside checkpoints
        self.best_weights: dict[str, torch.Tensor] | None = None
        self._resume_rng: list[dict[str, Any]] | None = None  # per rank, from the checkpoint
        self.build()
        self.clock = JobClock(self.total_steps, self.train_spec.eval_steps, 0, final_eval_ratio)  # fit() restarts it

    # ----- build ------------------------------------------------------------------------------
    def build(self) -> None:
        """Method, DDP wrapper, data, optimizer, schedule, precision and GradCache."""
        specs, tspec = self.specs, self.train_spec
        if tspec.num_threads:
            torch.set_num_threads(int(tspec.num_threads))
        seed_everything(specs.seed)
        self.device = distributed.local_device(resolve_device(tspec.device))  # cuda:LOCAL_RANK under torchrun
        # eval.sample_pairs (eval=iterate): precision=auto may train in the CPU's bf16 (iterating, not reporting)
        self.amp_dtype = autocast_dtype(tspec.precision, self.device, iterating=specs.eval.sample_pairs is not None)
        self.method = build_method(specs, self.device)
        self.is_main = distributed.is_main_process()
        distributed.check_batch_size(tspec.batch_size)
        # DDP copies rank 0's weights to every rank here; each rank then draws its own dropout masks
        self.model = distributed.data_parallel(self.method, self.device)
        distributed.seed_rank(specs.seed, self.method.rng)
        self.items = self.method.read_corpus(specs.data.train_file)
        self.batches_per_epoch = self.method.num_batches(len(self.items), tspec.batch_size)
        if self.batches_per_epoch < 1:
            raise ValueError(f"data.train_file: {len(self.items)} items give no batch of size {tspec.batch_size}")
        self.total_steps = tspec.max_steps if tspec.max_steps > 0 else tspec.epochs * self.batches_per_epoch
        setting = compile_setting(tspec.compile)
        self.compiled = compile_wanted(setting, self.device, self.total_steps)
        if self.compiled:
            if setting == "auto":  # chosen for the user: an operator dynamo cannot trace runs eagerly instead
                torch._dynamo.config.suppress_errors = True
            compile_encoder(self.method, compile_mode(self.device))
        self.optimizer = make_optimizer(self.method, tspec, self.amp_dtype)
        from transformers import get_linear_schedule_with_warmup

        self.scheduler = get_linear_schedule_with_warmup(
            self.optimizer, int(tspec.warmup_ratio * self.total_steps), self.total_steps
        )
        scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        self.grad_cache = None
        if tspec.gradcache_chunk:
            self.grad_cache = GradCache(self.method, tspec.gradcache_chunk, self.autocast, self.model)
        self.trainable = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.stepper = TrainStep(
            self.method,
            (lambda batch: self.model("training_step", batch)) if self.grad_cache is None else self.grad_cache.forward,
            self.optimizer,
            self.trainable,
            tspec.max_grad_norm,
            autocast=self.autocast,
            backward=None if self.grad_cache is None else self.grad_cache.backward,
            scaler=scaler,
        )
        # batches prepared (augmented, tokenized) by DataLoader workers; GradCache prepares its chunks itself
        prepare = self.method.prepare if self.grad_cache is None else keep_items
        if self.compiled and self.grad_cache is None:  # a few static shapes: one compiled graph each
            buckets = length_buckets(int(specs.model.max_length or 0))
            prepare = PadToBucket(prepare, buckets, self.method.encoder.tokenizer.pad_token_id or 0)
        self.data = BatchLoader(
            self.items, self.method.batches, prepare,
            tspec.batch_size, specs.seed, num_workers=self.data_workers(),
            pin_memory=self.device.type == "cuda",
        )

    def data_workers(self) -> int:
        """``train.num_workers``; -1 (auto) is :data:`AUTO_DATA_WORKERS` on CUDA, where the batches' CPU work
        would otherwise hold up the launches of the GPU's work, and 0 elsewhere, under GradCache (its chunks are
        prepared in the step) and for an augmentation that runs a model at every step (it needs the device)."""
        workers = int(self.train_spec.num_workers)
        if workers >= 0:
            return workers
        augmentation = self.method.augmentation
        runs_model = augmentation is not None and augmentation.spec.runs_model_in_training()
        return AUTO_DATA_WORKERS if self.device.type == "cuda" and self.grad_cache is None and not runs_model else 0

    @property
    def scaler(self) -> Any:
        """The fp16 GradScaler (None in bf16/fp32), the one the step uses."""
        return self.stepper.scaler

    @scaler.setter
    def scaler(self, value: Any) -> None:
        self.stepper.scaler = value

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The autocast context of ``train.precision`` on this run's device."""
        return autocast(self.device, self.amp_dtype)

    # ----- resume -----------------------------------------------------------------------------
    def resume(self) -> bool:
        """Load ``checkpoint.pt`` when the run directory has one; True when it did."""
        checkpoint = load_checkpoint(self.run_dir.path)
        if checkpoint is None:
            return False
        self.method.load_state_dict(checkpoint["method"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        if self.scaler is not None and checkpoint.get("scaler"):
            self.scaler.load_state_dict(checkpoint["scaler"])
        self.state = TrainState(**checkpoint["state"])
        self.best_weights = checkpoint.get("best")
        rng = checkpoint["rng"]
        self._resume_rng = rng if isinstance(rng, list) else [rng]  # a dict: written before per-rank states
        log.info("resuming from %s at step %d (epoch %d)", self.run_dir.checkpoint, self.state.step, self.state.epoch)
        return True

    def epoch_batches(self) -> Iterator[Any]:
        """This rank's prepared batches of the current epoch, from the saved position after a resume."""
        start = 0
        if self._resume_rng is not None:
            start = self.state.batch_in_epoch  # batches are prepared from (seed, epoch, index): no replay
            saved = self._resume_rng
            if len(saved) == distributed.world_size():
                restore_rng_states(saved[distributed.rank()], self.method.rng)
            else:  # another number of processes: rank 0's streams, then fresh per-rank streams
                log.warning("resuming %d processes from a checkpoint of %d: dropout masks will differ",
                            distributed.world_size(), len(saved))
                restore_rng_states(saved[0], self.method.rng)
                distributed.seed_rank(self.specs.seed, self.method.rng, self.state.step)
            self._resume_rng = None
        return self.data.epoch(self.state.epoch, start)

    # ----- fit --------------------------------------------------------------------------------
    def fit(self) -> tuple[Method, TrainState]:
        """Train to ``train.max_steps`` (or the epochs); return the method with its best weights loaded.

        Raises:
            TrainingInterrupted: after a requested stop (checkpoint written).
            NonFiniteLossError: a NaN/Inf loss or gradient with ``train.nonfinite=stop``.
        """
        tspec, state = self.train_spec, self.state
        log.info(
            "training %s on %s: %d items, %d steps (%d/epoch), batch %d, device %s, precision %s",
            self.method.name, self.specs.data.train_file, len(self.items),
            self.total_steps, self.batches_per_epoch, tspec.batch_size, self.device,
            "fp32" if self.amp_dtype is None else str(self.amp_dtype).removeprefix("torch."),
        )
        # one ETA for the whole job: training, the dev evaluations and the final evaluation
        self.clock = JobClock(self.total_steps, tspec.eval_steps, state.step, self.final_eval_ratio)
        progress = job_bar(self.total_steps, state.step, tspec.progress_bar and self.is_main,
                           lambda: self.clock.text(state.step))
        started, first_step = time.perf_counter(), state.step
        from tqdm.contrib.logging import logging_redirect_tqdm

        # log lines go above the bar (tqdm.write), never glued onto it
        with_bar = logging_redirect_tqdm() if tspec.progress_bar and self.is_main else contextlib.nullcontext()
        try:
            with_bar.__enter__()
            while state.step < self.total_steps and not state.stopped_early:
                for batch in self.epoch_batches():
                    terms = self.step(batch)
                    progress.update(1)
                    self.after_step(terms, progress)
                    if state.step >= self.total_steps or state.stopped_early:
                        break
                else:
                    state.epoch += 1
                    state.batch_in_epoch = 0
        finally:
            progress.close()
            with_bar.__exit__(None, None, None)
        resumed = f" (steps {first_step + 1}-{state.step} in this process; {state.step} in all)" if first_step else ""
        log.info("trained %d steps in %.1fs%s; %s=%.2f at step %d", state.step - first_step,
                 time.perf_counter() - started, resumed, select_name(f"best_{tspec.select_metric}",
                 self.specs.eval.sample_pairs), state.best_score, state.best_step)
        # only rank 0 evaluates after training; train.final_weights=last keeps the last weights (SG-BERT's fit)
        if self.is_main and self.train_spec.final_weights == "best" and self.best_weights is not None:
            self.method.load_state_dict(self.best_weights)
        return self.method, state

    def step(self, batch: list[Any]) -> dict[str, torch.Tensor]:
        """One optimizer step on ``batch`` (:class:`cl_bench.train.step.TrainStep`; skipped, per
        ``train.nonfinite``, when not finite). On CUDA it reads nothing on the host: a non-finite step is
        skipped on the device and reported at the next log, evaluation or checkpoint step (:meth:`check_finite`).
        """
        state = self.state
        self.method.train()
        self.stepper.steps_taken = state.step  # the non-finite report numbers steps as the run does
        terms, stepped = self.stepper(batch)
        if stepped is False:  # the synchronous guard: a non-finite step is reported now
            self.report_nonfinite(self.stepper.flush())
        if stepped is not False:  # momentum targets, queues, banks and step counters follow only steps taken
            self.method.on_after_step()  # (on the deferred path it is the base class's no-op)
        self.scheduler.step()
        state.step += 1
        state.batch_in_epoch += 1
        return terms

    def check_finite(self) -> None:
        """Read the deferred non-finite guard (one host synchronisation); stop or count per ``train.nonfinite``."""
        if not self.stepper.synchronous:
            self.report_nonfinite(self.stepper.flush())

    def report_nonfinite(self, report: NonFiniteReport) -> None:
        """Stop with a clear message (``train.nonfinite=stop``) or count the skipped steps (``skip``)."""
        if not report.count:
            return
        if self.train_spec.nonfinite == "skip":
            more = f" and {report.count - 1} more since" if report.count > 1 else ""
            log.warning("step %d%s: non-finite loss or gradient (%s): step skipped",
                        report.first_step, more, report.values())
            self.state.skipped_steps += report.count
            self.log_metrics({train_name("skipped_steps"): self.state.skipped_steps}, self.state.step)
            return
        kept = self.run_dir.checkpoint
        raise NonFiniteLossError(
            f"step {report.first_step}: non-finite loss or gradient ({report.values()}); "
            f"last good checkpoint: {kept if kept.is_file() else 'none yet'} "
            "(lower the learning rate, raise loss.tau, or set train.nonfinite=skip)"
        )

    def after_step(self, terms: dict[str, torch.Tensor], progress: Any) -> None:
        """Log, evaluate, stop early, checkpoint and honour a stop request, as their cadences say."""
        tspec, state = self.train_spec, self.state
        last = state.step == self.total_steps
        logs = state.step % tspec.log_steps == 0 or last
        evaluates = (tspec.eval_steps > 0 and state.step % tspec.eval_steps == 0) or last
        checkpoints = tspec.checkpoint_steps > 0 and state.step % tspec.checkpoint_steps == 0 and not last
        if logs or evaluates or checkpoints:  # the only steps that read device values on the host
            self.check_finite()
        if logs:
            metrics = {train_name(k): float(v.detach()) for k, v in terms.items()}
            if self.stepper.last_grad_norm is not None:
                metrics[train_name("grad_norm")] = float(self.stepper.last_grad_norm)
            metrics[train_name("lr")] = self.scheduler.get_last_lr()[0]
            progress.set_postfix(loss=f"{metrics[train_name('loss')]:.3g}")  # 3 significant digits: readable at 1e-4 too
            self.log_metrics(metrics, state.step)
        if evaluates:
            self.evaluate()
            if not last and self.patience_ran_out():
                state.stopped_early = True
                log.info("early stopping at step %d: no better %s in %d evaluations",
                         state.step, tspec.select_metric, tspec.early_stopping_patience)
        if checkpoints:
            self.checkpoint()
        if not distributed.all_true(not self.stop_requested()):  # a signal to any rank stops all of them
            self.check_finite()
            self.checkpoint()
            raise TrainingInterrupted(state)

    # ----- evaluate ---------------------------------------------------------------------------
    def evaluate(self) -> None:
        """Rank 0 scores the dev metric and keeps the best weights (in memory; ``best_model/`` on disk)."""
        if not self.is_main:  # the other ranks go on to the next step
            return
        tspec, state = self.train_spec, self.state

        with self.clock.dev_evaluation():
            try:
                scores = self.dev_eval(self.method.selection_encoder())  # the official dev embedding (issue 40)
            except NonFiniteEmbeddingError as err:  # diverged weights (train.nonfinite=skip lets a run get here)
                raise NonFiniteLossError(self.diverged_message(str(err))) from None
        score = scores[tspec.select_metric]
        # the model-selection series has its own names (select/...), never the final evaluation's (NAMES.md)
        named = select_names(scores, self.specs.eval.sample_pairs)
        self.log_metrics({**named, train_name("epoch"): state.epoch}, state.step)
        left = f"; job {self.clock.text(state.step)} left (training and evaluation)" if state.step < self.total_steps else ""
        log.info("step %d: %s%s", state.step, ", ".join(f"{k}={v:.2f}" for k, v in named.items()), left)
        improved = score > state.best_score
        state.evals_since_best = early_stopping_count(
            tspec.early_stopping_rule, state.evals_since_best, score, state.last_dev_score, improved
        )
        state.last_dev_score = score
        if improved:
            state.best_score, state.best_step = score, state.step
            self.best_weights = {k: v.detach().to("cpu", copy=True) for k, v in self.method.state_dict().items()}
            if tspec.save_best:  # the one copy of the best weights a finished run keeps
                with atomic_folder(self.run_dir.best_model) as folder:  # the previous best stays until this one is whole
                    self.method.eval_encoder().save(folder, {"step": state.step, tspec.select_metric: score})

    def diverged_message(self, why: str) -> str:
        """The one line of a run whose encoder gives non-finite embeddings: the step, why, the skipped steps, the last
        good weights (``best_model/``: saved at a dev evaluation with finite embeddings) and what to lower."""
        state, tspec = self.state, self.train_spec
        count = state.skipped_steps
        skipped = f" after {count} skipped non-finite step{'s' * (count != 1)}" if count else ""
        kept = self.run_dir.best_model
        good = f"{kept} (step {state.best_step})" if state.best_step >= 0 and kept.is_dir() else "none yet"
        loss = self.specs.loss
        tau = ", or raise loss.tau" if loss is not None and "tau" in loss.keys() else ""
        return (f"step {state.step}: the encoder's embeddings are not finite ({why}){skipped}: the weights diverged; "
                f"last good checkpoint: {good} (lower train.lr, now {tspec.lr:g}{tau})")

    def patience_ran_out(self) -> bool:
        """Early stopping: ``train.early_stopping_patience`` evaluations without a new best."""
        # Only rank 0 evaluates; the others vote "go on", so the all-reduce carries rank 0's decision.
        patience = self.train_spec.early_stopping_patience
        return patience > 0 and not distributed.all_true(self.state.evals_since_best < patience)

    # ----- checkpoint -------------------------------------------------------------------------
    def checkpoint(self) -> None:
        """Rank 0 writes ``checkpoint.pt`` atomically: all a killed run needs to continue exactly.

        Every rank must call it: the RNG states of all ranks are saved (each rank draws its own
        dropout masks), so a resume with the same number of processes continues every stream.
        """
        rng = distributed.gather_objects(rng_states(self.method.rng))
        if not self.is_main:
            return
        atomic_save(
            {
                "method": self.method.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler is not None else None,
                "state": asdict(self.state),
                "rng": rng,  # one entry per rank
                "best": self.best_weights,
            },
            self.run_dir.checkpoint,
        )


def train(
    specs: RunSpecs,
    run_dir: Path,
    log_metrics: Callable[[dict[str, float], int], None],
    dev_eval: Callable[[Any], dict[str, float]],
    stop_requested: Callable[[], bool] = lambda: False,
    resume: bool = False,
    final_eval_ratio: float = 0.0,
) -> tuple[Method, TrainState]:
    """Train ``specs.method`` (:class:`Trainer`); returns the method with its best weights loaded, and the state.

    ``resume`` continues from ``run_dir/checkpoint.pt`` when it exists. The other arguments are
    :class:`Trainer`'s.
    """
    trainer = Trainer(specs, run_dir, log_metrics, dev_eval, stop_requested, final_eval_ratio)
    if resume:
        trainer.resume()
    return trainer.fit()
