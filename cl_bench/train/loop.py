"""A plain PyTorch training loop, shared by every method.

AdamW + the transformers linear schedule (SimCSE uses the HF Trainer defaults), seeded data order,
autocast on CUDA, dev evaluation every ``train.eval_steps`` with the best checkpoint kept (in memory
and in Hugging Face format under ``<run dir>/best_model``), then the final evaluation of the best
weights. Everything method-specific is behind :class:`cl_bench.methods.base.Method`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from cl_bench import distributed  # torchrun (no-ops in one process)
from cl_bench.methods.base import Method, MethodContext
from cl_bench.models.encoder import build_encoder
from cl_bench.rundir import RunDir
from cl_bench.train.checkpoint import (
    atomic_save,
    load_checkpoint,
    restore_rng_states,
    rng_states,
)

log = logging.getLogger(__name__)


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


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``train.precision`` (None = fp32). Autocast is used on CUDA only."""
    if device.type != "cuda" or precision == "fp32":
        return None
    if precision == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def build_method(cfg: DictConfig, device: torch.device) -> Method:
    """Encoder, loss, augmentation and method from the config (hydra ``_target_`` nodes)."""
    encoder = build_encoder(
        cfg.model.name_or_path,
        pooler=cfg.pooler.name,
        dropout=cfg.model.dropout,
        max_length=cfg.model.max_length,
        mlp_only_train=cfg.pooler.mlp_only_train,
        first_layer=cfg.pooler.first_layer,
        fresh_mlp=True,
    )
    method_class = get_class(str(cfg.method._target_))
    # A group the method does not use is not built at all (validation rejected overriding it).
    augmentation = None
    if "augmentation" in method_class.uses:
        augmentation = instantiate(cfg.augmentation)
        augmentation.setup(encoder, cfg.model.name_or_path)
    loss = None
    if "loss" in method_class.uses:
        loss = instantiate(OmegaConf.masked_copy(cfg.loss, [k for k in cfg.loss if k != "name"]))
    context = MethodContext(
        encoder=encoder,
        loss=distributed.gather_loss(loss) if loss is not None else None,  # global batch under torchrun
        augmentation=augmentation,
        model_name_or_path=cfg.model.name_or_path,
        max_length=cfg.model.max_length,
        seed=cfg.seed,
        data=OmegaConf.to_container(cfg.data, resolve=True),
    )
    method_cfg = OmegaConf.masked_copy(cfg.method, [k for k in cfg.method if k != "name"])
    # passed as an instantiate kwarg, the MethodContext dataclass was converted to a dict
    method: Method = instantiate(method_cfg, _partial_=True, _convert_="all")(context=context)
    return method.to(device)


def make_optimizer(method: Method, train_cfg: DictConfig) -> torch.optim.Optimizer:
    """AdamW over trainable parameters; no weight decay on biases and LayerNorm weights (HF convention)."""
    decay, no_decay = [], []
    for name, param in method.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": train_cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=train_cfg.lr, betas=(train_cfg.adam_beta1, train_cfg.adam_beta2), eps=train_cfg.adam_eps
    )


@dataclass
class TrainState:
    """Progress of a run (what a resume needs besides model/optimizer/scheduler states)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best_score: float = -math.inf
    best_step: int = -1
    skipped_steps: int = 0
    evals_since_best: int = 0  # dev evaluations without a new best (early stopping)
    stopped_early: bool = False


class TrainingInterrupted(Exception):
    """SIGINT/SIGTERM arrived: the current step finished and a checkpoint was written."""

    def __init__(self, state: TrainState) -> None:
        super().__init__(f"interrupted after step {state.step}; checkpoint saved")
        self.state = state


class NonFiniteLossError(RuntimeError):
    """The loss or the gradient norm was NaN/Inf and ``train.nonfinite=stop``."""


def train(
    cfg: DictConfig,
    run_dir: Path,
    log_metrics: Callable[[dict[str, float], int], None],
    dev_eval: Callable[[Any], dict[str, float]],
    stop_requested: Callable[[], bool] = lambda: False,
    resume: bool = False,
) -> tuple[Method, TrainState]:
    """Train ``cfg.method``; returns the method with its best weights loaded, and the final state.

    Args:
        cfg: the composed, validated config.
        run_dir: run directory (``best_model/``, ``checkpoint.pt``, ``best_state.pt`` go here).
        log_metrics: ``(metrics, step)`` sink (the run tracker).
        dev_eval: scores an encoder on the dev metric; must return ``cfg.train.select_metric``.
        stop_requested: polled after every step; True checkpoints and raises TrainingInterrupted.
        resume: continue from ``run_dir/checkpoint.pt`` when it exists.

    Raises:
        TrainingInterrupted: after a requested stop (checkpoint written).
        NonFiniteLossError: a NaN/Inf loss or gradient with ``train.nonfinite=stop``.
    """
    tcfg = cfg.train
    if tcfg.num_threads:
        torch.set_num_threads(int(tcfg.num_threads))
    seed_everything(cfg.seed)
    device = distributed.local_device(resolve_device(tcfg.device))  # cuda:LOCAL_RANK under torchrun
    method = build_method(cfg, device)
    # torchrun (no-ops in one process) and gradient caching
    is_main = distributed.is_main_process()
    distributed.check_batch_size(tcfg.batch_size)
    distributed.broadcast_parameters(method)
    distributed.seed_rank(cfg.seed, method.rng)
    items = method.read_corpus(cfg.data.train_file)
    batches_per_epoch = method.num_batches(len(items), tcfg.batch_size)
    if batches_per_epoch < 1:
        raise ValueError(f"data.train_file: {len(items)} items give no batch of size {tcfg.batch_size}")
    total_steps = tcfg.max_steps if tcfg.max_steps > 0 else tcfg.epochs * batches_per_epoch
    optimizer = make_optimizer(method, tcfg)
    from transformers import get_linear_schedule_with_warmup

    scheduler = get_linear_schedule_with_warmup(optimizer, int(tcfg.warmup_ratio * total_steps), total_steps)
    amp_dtype = autocast_dtype(tcfg.precision, device)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
    # gradient caching (train.gradcache_chunk > 0)
    grad_cache = None
    if tcfg.get("gradcache_chunk", 0):
        from cl_bench.train.gradcache import GradCache

        grad_cache = GradCache(
            method, tcfg.gradcache_chunk,
            lambda: torch.autocast("cuda", dtype=amp_dtype) if amp_dtype else contextlib.nullcontext(),
        )
    state = TrainState()
    checkpoint = load_checkpoint(run_dir) if resume else None
    if checkpoint is not None:
        method.load_state_dict(checkpoint["method"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        if scaler is not None and checkpoint.get("scaler"):
            scaler.load_state_dict(checkpoint["scaler"])
        state = TrainState(**checkpoint["state"])
        log.info("resuming from %s at step %d (epoch %d)", RunDir(run_dir).checkpoint, state.step, state.epoch)
    log.info(
        "training %s on %s: %d items, %d steps (%d/epoch), batch %d, device %s",
        cfg.method.get("name", type(method).__name__), cfg.data.train_file, len(items), total_steps,
        batches_per_epoch, tcfg.batch_size, device,
    )
    trainable = [p for group in optimizer.param_groups for p in group["params"]]
    progress = _progress(total_steps, tcfg.progress_bar and is_main, initial=state.step)
    started = time.perf_counter()

    def save_checkpoint() -> None:
        if not is_main:  # rank 0 writes for all
            return
        atomic_save(
            {
                "method": method.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler is not None else None,
                "state": asdict(state),
                "rng": rng_states(method.rng),
            },
            RunDir(run_dir).checkpoint,
        )

    def evaluate_and_keep_best() -> None:
        if not is_main:  # rank 0 evaluates; the others go on to the next step
            return
        scores = dev_eval(method.eval_encoder())
        score = scores[tcfg.select_metric]
        log_metrics({**scores, "epoch": state.epoch}, state.step)
        log.info("step %d: %s", state.step, ", ".join(f"{k}={v:.2f}" for k, v in scores.items()))
        if score > state.best_score:
            state.best_score, state.best_step, state.evals_since_best = score, state.step, 0
            atomic_save(method.state_dict(), RunDir(run_dir).best_state)
            if tcfg.save_best:
                method.eval_encoder().save(RunDir(run_dir).best_model, {"step": state.step, tcfg.select_metric: score})
        else:
            state.evals_since_best += 1

    def patience_ran_out() -> bool:
        # Only rank 0 evaluates; the others vote "go on", so the all-reduce carries rank 0's decision.
        patience = tcfg.early_stopping_patience
        return patience > 0 and not distributed.all_true(state.evals_since_best < patience)

    while state.step < total_steps and not state.stopped_early:
        generator = torch.Generator().manual_seed(cfg.seed + state.epoch)
        batches = distributed.shard_batches(method.batches(items, tcfg.batch_size, generator))
        if checkpoint is not None:
            # Replay the epoch's order up to the saved position, then restore the RNGs as they were.
            for _ in range(state.batch_in_epoch):
                next(batches)
            restore_rng_states(checkpoint["rng"], method.rng)
            distributed.seed_rank(cfg.seed, method.rng, state.step)  # per-rank streams again
            checkpoint = None
        for batch in batches:
            method.train()
            autocast = torch.autocast("cuda", dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
            with autocast:
                terms = method.training_step(batch) if grad_cache is None else grad_cache.forward(batch)
            loss = terms["loss"]
            finite = distributed.all_true(bool(torch.isfinite(loss)))  # all ranks skip together
            if finite:
                # cached backward; gradient averaging across torchrun ranks
                scaled = scaler.scale(loss) if scaler else loss
                if grad_cache is None:
                    scaled.backward()
                else:
                    grad_cache.backward(scaled)
                distributed.average_gradients(trainable)
                if scaler:
                    scaler.unscale_(optimizer)
                grad_norm = torch.nn.utils.clip_grad_norm_(trainable, tcfg.max_grad_norm if tcfg.max_grad_norm > 0 else math.inf)
                # with fp16 the scaler handles overflowing gradients itself (skips the step)
                finite = scaler is not None or bool(torch.isfinite(grad_norm))
            if not finite:
                _handle_nonfinite(tcfg.nonfinite, state, terms, run_dir)
                optimizer.zero_grad(set_to_none=True)
                state.skipped_steps += 1
                log_metrics({"skipped_steps": state.skipped_steps}, state.step + 1)
            else:
                if scaler:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                method.on_after_step()
            scheduler.step()
            state.step += 1
            state.batch_in_epoch += 1
            progress.update(1)
            if state.step % tcfg.log_steps == 0 or state.step == total_steps:
                metrics = {f"train_{k}": float(v.detach()) for k, v in terms.items()}
                metrics["lr"] = scheduler.get_last_lr()[0]
                progress.set_postfix(loss=f"{metrics['train_loss']:.4f}")
                log_metrics(metrics, state.step)
            if (tcfg.eval_steps > 0 and state.step % tcfg.eval_steps == 0) or state.step == total_steps:
                evaluate_and_keep_best()
                if state.step < total_steps and patience_ran_out():
                    state.stopped_early = True
                    log.info("early stopping at step %d: no better %s in %d evaluations",
                             state.step, tcfg.select_metric, tcfg.early_stopping_patience)
            if tcfg.checkpoint_steps > 0 and state.step % tcfg.checkpoint_steps == 0 and state.step < total_steps:
                save_checkpoint()
            if stop_requested():
                save_checkpoint()
                progress.close()
                raise TrainingInterrupted(state)
            if state.step >= total_steps or state.stopped_early:
                break
        else:
            state.epoch += 1
            state.batch_in_epoch = 0
    progress.close()
    log.info("trained %d steps in %.1fs; best %s=%.2f at step %d", state.step, time.perf_counter() - started,
             tcfg.select_metric, state.best_score, state.best_step)
    if is_main and RunDir(run_dir).best_state.is_file():  # only rank 0 evaluates after training
        method.load_state_dict(torch.load(RunDir(run_dir).best_state, map_location="cpu", weights_only=True))
    return method, state


def _handle_nonfinite(policy: str, state: TrainState, terms: dict[str, torch.Tensor], run_dir: Path) -> None:
    """Stop with a clear message (policy ``stop``) or let the caller skip the step (``skip``)."""
    values = ", ".join(f"{k}={float(v.detach()):.4g}" for k, v in terms.items())
    if policy == "skip":
        log.warning("step %d: non-finite loss or gradient (%s): step skipped", state.step + 1, values)
        return
    kept = RunDir(run_dir).checkpoint
    raise NonFiniteLossError(
        f"step {state.step + 1}: non-finite loss or gradient ({values}); "
        f"last good checkpoint: {kept if kept.is_file() else 'none yet'} "
        "(lower the learning rate, raise loss.tau, or set train.nonfinite=skip)"
    )


def _progress(total: int, enabled: bool, initial: int = 0) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="train", disable=not enabled, dynamic_ncols=True)
