"""Training batches through a ``torch.utils.data`` DataLoader whose workers do the CPU-side work.

The batch *composition* of an epoch (which items go together) is the method's seeded
:meth:`~cl_bench.methods.base.Method.batches`, computed from ``seed + epoch`` wherever it is needed;
the *work* on each batch — reading the items, text augmentation, tokenisation — is the method's
:meth:`~cl_bench.methods.base.Method.prepare`, run in ``train.num_workers`` worker processes
(persistent across epochs, pinned memory on CUDA) while the main process trains.

Every batch is prepared with its own RNG, seeded from ``(seed, epoch, batch index, rank)`` (and
the global torch/numpy/python RNGs are seeded the same way while ``prepare`` runs, then restored);
so a batch does not depend on which worker made it or how many workers there are: the same seed
gives the same batches with 0 and 2 workers, and a resume starts at the saved batch index and
continues exactly.
"""

from __future__ import annotations

import multiprocessing
import os
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from cl_bench.utils import distributed

BatchFn = Callable[[Sequence[Any], int, torch.Generator], Iterator[list[Any]]]
PrepareFn = Callable[[list[Any], random.Random], Any]


def keep_items(items: list[Any], rng: random.Random) -> list[Any]:
    """A ``prepare`` that leaves the work to the main process (GradCache prepares chunk by chunk)."""
    return items


def batch_seed(seed: int, epoch: int, index: int, rank: int = 0) -> int:
    """The seed of one batch's preparation (distinct for every seed, epoch, batch and rank)."""
    return (seed * 1_000_003 + epoch * 10_007 + index * 101 + rank) % (2**63)


class EpochBatches(Dataset):
    """Map-style dataset whose index is ``(epoch, batch index)`` and whose item is a prepared batch.

    Args:
        items: the corpus as the method read it.
        batches: the method's ``batches(items, batch_size, generator)``.
        prepare: the method's ``prepare(items, rng)`` (identity when the main process prepares).
        batch_size: the global batch size.
        seed: the run seed.
    """

    def __init__(self, items: Sequence[Any], batches: BatchFn, prepare: PrepareFn, batch_size: int, seed: int) -> None:
        self.items, self.batches, self.prepare = items, batches, prepare
        self.batch_size, self.seed = batch_size, seed
        self.rank, self.world = distributed.rank(), distributed.world_size()  # workers have no process group
        self._epoch: tuple[int, list[list[Any]]] | None = None

    def epoch(self, epoch: int) -> list[list[Any]]:
        """This rank's batches of ``epoch`` (item lists), computed once per epoch in each process."""
        if self._epoch is None or self._epoch[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed + epoch)
            batches = self.batches(self.items, self.batch_size, generator)
            self._epoch = (epoch, list(distributed.shard_batches(batches, self.rank, self.world)))
        return self._epoch[1]

    def __getitem__(self, key: tuple[int, int]) -> Any:
        epoch, index = key
        seed = batch_seed(self.seed, epoch, index, self.rank)
        # Anything in prepare that draws from a global RNG is seeded per batch too; the states are put
        # back afterwards, so that with 0 workers the training step's RNG streams are not disturbed.
        python_state, numpy_state = random.getstate(), np.random.get_state()
        with torch.random.fork_rng(devices=[]):
            random.seed(seed)
            np.random.seed(seed % (2**32))
            torch.manual_seed(seed)
            try:
                return self.prepare(self.epoch(epoch)[index], random.Random(seed))
            finally:
                random.setstate(python_state)
                np.random.set_state(numpy_state)

    def __len__(self) -> int:  # the DataLoader asks; the sampler decides what is read
        return len(self.epoch(0))


class EpochSampler(Sampler):
    """Yields ``(epoch, i)`` for ``i`` from ``start`` to the end of the epoch; set before each epoch."""

    def __init__(self) -> None:
        self.epoch, self.start, self.stop = 0, 0, 0

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter([(self.epoch, i) for i in range(self.start, self.stop)])

    def __len__(self) -> int:
        return max(0, self.stop - self.start)


def _worker_start_method() -> str | None:
    """The start method for the workers: Python's default, also in a loky worker (Hydra's joblib
    launcher runs jobs there), whose default method ``loky`` the DataLoader cannot start processes with."""
    current = multiprocessing.get_start_method(allow_none=True)
    supported = multiprocessing.get_all_start_methods()  # the platform's default first
    return None if current is None or current in supported else supported[0]


class BatchLoader:
    """The training batches of every epoch, prepared by ``num_workers`` persistent worker processes.

    Args:
        items, batches, prepare, batch_size, seed: see :class:`EpochBatches`.
        num_workers: worker processes (0: prepare in the main process, in the same order).
        pin_memory: pin prepared tensors (CUDA).
    """

    def __init__(
        self,
        items: Sequence[Any],
        batches: BatchFn,
        prepare: PrepareFn,
        batch_size: int,
        seed: int,
        num_workers: int = 0,
        pin_memory: bool = False,
    ) -> None:
        self.dataset = EpochBatches(items, batches, prepare, batch_size, seed)
        self.sampler = EpochSampler()
        if num_workers > 0:
            # the tokenizer's own thread pool cannot survive a fork; workers are the parallelism
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.loader = DataLoader(
            self.dataset,
            batch_size=None,  # each dataset item is a whole batch
            sampler=self.sampler,
            num_workers=num_workers,
            pin_memory=pin_memory,
            persistent_workers=num_workers > 0,
            multiprocessing_context=_worker_start_method() if num_workers > 0 else None,
            prefetch_factor=2 if num_workers > 0 else None,
            # each iter() draws a base seed: from its own generator, not the global RNG the training
            # step's dropout uses (a resume would otherwise draw once more than the uninterrupted run)
            generator=torch.Generator().manual_seed(seed),
        )

    def epoch(self, epoch: int, start: int = 0) -> Iterator[Any]:
        """The prepared batches of ``epoch`` from batch index ``start`` (a resume's saved position)."""
        self.sampler.epoch, self.sampler.start = epoch, start
        self.sampler.stop = len(self.dataset.epoch(epoch))
        return iter(self.loader)
