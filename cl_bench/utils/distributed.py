"""Multi-process training under ``torchrun``: process group, DDP, rank-0 guards, sharding, gathering.

    torchrun --nproc_per_node=4 -m cl_bench.commands.cli method=simcse batch_size=512   # 4 x 128 per process

``batch_size`` stays the *global* batch: each process encodes its contiguous slice of every batch
(rank r takes rows ``r*n .. (r+1)*n``), the configured loss sees the whole global batch, and
torch's ``DistributedDataParallel`` averages the gradients (bucketed all-reduces that overlap the
backward pass). Only rank 0 logs, evaluates, writes checkpoints and talks to MLflow.

**Why the update equals one process on the full batch.** The loss wrapper :class:`GatheredLoss`
all-gathers the per-sample embeddings with torch's autograd-aware
``torch.distributed.nn.functional.all_gather``, whose backward sums the gradient of every rank's
copy into the owner's rows. Every rank computes the same global loss ``L``, so the owner of rows
``z_r`` receives ``W * dL/dz_r``; DDP's average of the parameter gradients over the ``W`` ranks
then gives exactly ``sum_r dL/dz_r * dz_r/dθ = dL/dθ``, the single-process gradient of the big
batch (tests/utils/test_distributed.py checks it on 2 gloo processes). Gathering rows as well as columns
(rather than sentence-transformers' local rows against global columns, which is equally exact) lets
every ``pair`` loss work unchanged: one-sided InfoNCE, symmetric NT-Xent, labelled (supervised)
losses and hard negatives with their weight α; the extra cost is the (W·n)² similarity matrix,
small next to the encoder. A queue loss (MoCo) is a mean of per-query terms against a queue that
is the same on every rank, so it needs no gather: DDP's average is already the full-batch
gradient; the method gathers the keys it enqueues (:func:`gather_rows`).

Without ``WORLD_SIZE > 1`` every function here is a no-op returning its input, so single-process
runs are unchanged.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import logging
import os
import random
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from cl_bench.specs import loss_spec_of
from cl_bench.utils.overrides import parsed_overrides
from cl_bench.utils.rundir import process_token

log = logging.getLogger(__name__)
# The public autograd all-gather is what the issue asks for and what Lightning Fabric uses; torch
# 2.13 only points at a private replacement, so its FutureWarning (raised at every call) is silenced.
warnings.filterwarnings("ignore", message="torch.distributed.nn.functional.all_gather is deprecated")

#: Loss parameters that hold one row per sample; :class:`GatheredLoss` gathers exactly these.
PER_SAMPLE_PARAMETERS: tuple[str, ...] = ("anchors", "positives", "hard_negatives", "labels")
#: Loss kinds (``cl_bench.specs.LossSpec.kind``) that are exact on each rank's rows without a gather.
LOCAL_LOSS_KINDS: frozenset[str] = frozenset({"queue"})


# ------------------------------------------------------------------------------------------------
# Process group and ranks
# ------------------------------------------------------------------------------------------------
def env_world_size() -> int:
    """``WORLD_SIZE`` set by torchrun (1 when not launched by it)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_distributed() -> bool:
    """True inside an initialised process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This process's global rank (0 when not distributed)."""
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    """Number of processes (1 when not distributed)."""
    return dist.get_world_size() if is_distributed() else 1


def is_main_process() -> bool:
    """Rank 0, or the only process: the one that logs, evaluates and writes."""
    return rank() == 0


def init_from_env(device: str = "auto") -> bool:
    """Join the torchrun process group when ``WORLD_SIZE > 1`` (idempotent).

    NCCL is used when CUDA is available and ``device`` is not ``cpu``; gloo otherwise.

    Args:
        device: ``train.device`` (``auto``, ``cpu``, ``cuda``…).

    Returns:
        True when this process is one of several.
    """
    if env_world_size() <= 1:
        return False
    if not dist.is_initialized():
        use_cuda = torch.cuda.is_available() and not device.startswith("cpu")
        if use_cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
        atexit.register(shutdown)
        log.info("process group: rank %d of %d (%s)", dist.get_rank(), dist.get_world_size(), dist.get_backend())
    return True


def shutdown() -> None:
    """Leave the process group (registered at exit by :func:`init_from_env`)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def local_device(device: torch.device) -> torch.device:
    """Under torchrun each process gets its own GPU: ``cuda`` becomes ``cuda:LOCAL_RANK``."""
    if is_distributed() and device.type == "cuda" and device.index is None:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (the object itself when not distributed)."""
    if not is_distributed():
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` in rank order (``[obj]`` when not distributed); every rank must call it."""
    if not is_distributed():
        return [obj]
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def all_true(flag: bool) -> bool:
    """True only when ``flag`` is true on every rank (every rank must call it)."""
    if not is_distributed():
        return flag
    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=_collective_device())
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return bool(value.item())


def _collective_device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# ------------------------------------------------------------------------------------------------
# Command line under torchrun (Hydra composes the config in every process)
# ------------------------------------------------------------------------------------------------
def setup_torchrun(argv: Sequence[str], run_dir_pattern: str = "outputs/runs/%Y-%m-%d/%H-%M-%S-%f") -> list[str]:
    """Under torchrun: join the process group; return the Hydra overrides every rank must add.

    Each process composes the config itself, so ``${now:…}`` would give every rank its own run dir
    (hydra#2070). Rank 0 picks the directory and broadcasts it; ranks > 0 write no ``.hydra/``
    copy and log to ``<job>_rank<r>.log``. Without torchrun this returns ``[]`` and does nothing.

    Args:
        argv: the command-line overrides (``train.device=cpu`` selects gloo on a CUDA machine).
        run_dir_pattern: strftime pattern of the default run dir (conf/config.yaml's ``hydra.run.dir``).

    Raises:
        ValueError: for ``-m``/``--multirun`` (one torchrun launch trains one model).
    """
    if env_world_size() <= 1:
        return []
    if any(arg in ("-m", "--multirun") for arg in argv):
        raise ValueError("torchrun runs one training job: drop -m (use a Hydra launcher for sweeps)")

    device = next((override.get_value_element_as_str() for _, override in parsed_overrides(argv)
                   if override.key_or_group == "train.device"), "auto")
    init_from_env(device)
    extra: list[str] = []
    if not any(arg.startswith("hydra.run.dir=") for arg in argv):
        # rank 0's suffix, as conf/config.yaml's default has one

        extra.append(f"hydra.run.dir={broadcast_object(datetime.now().strftime(run_dir_pattern) + '-' + process_token())}")
    if not is_main_process():
        extra += [
            "hydra.output_subdir=null",
            f"hydra.job_logging.handlers.file.filename=${{hydra.runtime.output_dir}}/${{hydra.job.name}}_rank{rank()}.log",
        ]
    return extra


# ------------------------------------------------------------------------------------------------
# Training pieces
# ------------------------------------------------------------------------------------------------
def shard_batches(
    batches: Iterable[list[Any]], this_rank: int | None = None, world: int | None = None
) -> Iterable[list[Any]]:
    """Each rank's contiguous slice of every global batch (the batches themselves when not distributed).

    A global batch whose size is not a multiple of the world size loses its last ``size % W`` items
    (equal slices are what the gather needs); one with fewer items than processes is skipped. All
    ranks draw the same batches (the data order is seeded by ``seed`` and the epoch), so they agree.
    ``this_rank``/``world`` default to this process's (DataLoader workers pass the ones captured in
    the main process).
    """
    this_rank = rank() if this_rank is None else this_rank
    world = world_size() if world is None else world
    if world == 1:
        return batches
    return _shards(batches, this_rank, world)


def _shards(batches: Iterable[list[Any]], this_rank: int, world: int) -> Iterator[list[Any]]:
    for batch in batches:
        per_rank = len(batch) // world
        if per_rank >= 1:
            yield batch[this_rank * per_rank : (this_rank + 1) * per_rank]


def check_batch_size(batch_size: int) -> None:
    """The global batch must split evenly over the processes (one-line error naming the key)."""
    world = world_size()
    if batch_size % world:
        raise ValueError(f"batch_size: the global batch {batch_size} does not split over {world} processes")


def seed_rank(seed: int, method_rng: random.Random, step: int = 0) -> None:
    """Give each rank its own dropout/augmentation randomness (identical streams would repeat masks).

    The parameters were already built identically from ``seed``; only later draws are decorrelated.
    """
    if not is_distributed():
        return
    rank_seed = seed + 1_000_003 * rank() + step
    random.seed(rank_seed)
    np.random.seed(rank_seed % (2**32))
    torch.manual_seed(rank_seed)
    method_rng.seed(rank_seed)


class MethodHooks(nn.Module):
    """What DDP wraps: ``forward(hook, *args)`` returns ``method.<hook>(*args)``.

    A method's entry points are named hooks (``training_step``, GradCache's ``cache_embed``), not
    ``forward``; routing them through one ``forward`` makes every training pass go through DDP's
    forward, which prepares its gradient all-reduce (and honours ``no_sync``).
    """

    def __init__(self, method: nn.Module) -> None:
        super().__init__()
        self.method = method

    def forward(self, hook: str, *args: Any) -> Any:
        return getattr(self.method, hook)(*args)


def data_parallel(method: nn.Module, device: torch.device) -> nn.Module:
    """The module the training step calls: DDP around the method under torchrun, else :class:`MethodHooks`.

    DDP broadcasts rank 0's parameters and buffers once, here, and averages gradients in buckets
    during backward. ``find_unused_parameters`` is on because some methods leave trained parameters
    out of a step (the backbone's own pooler under a cl-bench pooler); buffers are not re-broadcast
    at every forward, since every cl-bench buffer (e.g. CERT's queue) is kept equal by construction.
    """
    hooks = MethodHooks(method)
    if not is_distributed():
        return hooks
    # newer torch names the per-forward buffer broadcast forward_sync_buffers (and deprecates broadcast_buffers)
    parameters = inspect.signature(DistributedDataParallel).parameters
    buffers = "forward_sync_buffers" if "forward_sync_buffers" in parameters else "broadcast_buffers"
    return DistributedDataParallel(
        hooks,
        device_ids=[device.index] if device.type == "cuda" else None,
        find_unused_parameters=True,
        **{buffers: False},
    )


def no_sync(model: nn.Module) -> contextlib.AbstractContextManager[Any]:
    """DDP's ``no_sync`` (gradients accumulate locally, no all-reduce); a no-op for a plain module."""
    return model.no_sync() if isinstance(model, DistributedDataParallel) else contextlib.nullcontext()


def gather_rows(x: torch.Tensor) -> torch.Tensor:
    """Concatenate every rank's ``x`` along dim 0, in rank order; float tensors keep their gradient.

    The gradient-carrying gather is torch's public autograd collective
    ``torch.distributed.nn.functional.all_gather``, whose backward sums every rank's gradient into the
    owner's rows. (torch 2.13 marks it deprecated in favour of the private
    ``torch.distributed._functional_collectives``; its warning is silenced once below.)
    """
    if not is_distributed():
        return x
    if x.is_floating_point() and x.requires_grad:
        return torch.cat(dist_nn.all_gather(x.contiguous()), dim=0)
    pieces = [torch.empty_like(x) for _ in range(world_size())]
    dist.all_gather(pieces, x.contiguous())
    return torch.cat(pieces, dim=0)


class GatheredLoss:
    """A contrastive loss evaluated on the global batch: per-sample arguments are all-gathered.

    ``anchors``, ``positives``, ``hard_negatives`` and ``labels`` (the shared signature of
    ``cl_bench.losses``) are gathered in rank order, so the gathered batch is the global batch in
    its original order and the loss is exactly the single-process loss. Attribute reads go to the
    wrapped loss (``loss_fn.keywords["tau"]`` still works on the ``functools.partial``).

    Args:
        loss_fn: the configured loss (usually a ``functools.partial``).

    Raises:
        ValueError: when the loss takes other tensor inputs (e.g. a MoCo queue), whose gathering
            would be wrong.
    """

    def __init__(self, loss_fn: Callable[..., torch.Tensor]) -> None:
        self.loss_fn = loss_fn
        self.signature = inspect.signature(loss_fn)
        name = getattr(getattr(loss_fn, "func", loss_fn), "__qualname__", repr(loss_fn))
        positional = [
            p.name for p in self.signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        unknown = [p for p in positional if p not in PER_SAMPLE_PARAMETERS]
        if unknown:
            raise ValueError(
                f"loss: {name} takes {', '.join(unknown)}; multi-process training can only gather "
                f"{', '.join(PER_SAMPLE_PARAMETERS)} (run it in one process)"
            )

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        bound = self.signature.bind_partial(*args, **kwargs)
        for key in PER_SAMPLE_PARAMETERS:
            value = bound.arguments.get(key)
            if torch.is_tensor(value):
                bound.arguments[key] = gather_rows(value)
            elif key == "labels" and value is not None:
                bound.arguments[key] = gather_rows(torch.as_tensor(value, device=_rows_device(bound)))
        return self.loss_fn(*bound.args, **bound.kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "loss_fn":  # not yet set (copy/unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.loss_fn, name)


def _rows_device(bound: inspect.BoundArguments) -> torch.device:
    anchors = bound.arguments.get("anchors")
    return anchors.device if torch.is_tensor(anchors) else torch.device("cpu")


def gather_loss(loss_fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """The configured loss as a multi-process run must call it (``loss_fn`` itself in one process).

    A ``pair`` loss is wrapped in :class:`GatheredLoss` (it sees the global batch); a loss of a kind
    in :data:`LOCAL_LOSS_KINDS` is a mean of per-sample terms and is used as it is (DDP's gradient
    average then equals the full-batch gradient).
    """
    if not is_distributed():
        return loss_fn

    spec = loss_spec_of(loss_fn)
    kind = "pair" if spec is None else spec.kind
    return loss_fn if kind in LOCAL_LOSS_KINDS else GatheredLoss(loss_fn)
