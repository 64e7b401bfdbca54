"""Replay a capture made with data-parallel size D on D' ranks, in Megatron's global-batch order.

Megatron's sampler cuts each global batch into chunks of ``mbs·D`` samples; chunk ``j`` is
micro-batch ``j`` of every rank, rank ``r`` taking ``chunk[r·mbs:(r+1)·mbs]``. So the store's
``global_order(step)`` (micro-batch 0 of ranks 0..D-1, then micro-batch 1 of ranks 0..D-1, ...)
concatenated is the global batch in sample order::

    capture D=2, mbs=2, 2 micro-b.   global batch           replay D'=1   replay D'=4, mbs'=1
    rank 0  mb 0: s0 s1              chunk 0: s0 s1 s2 s3   mb 0: s0 s1   mb 0: r0 s0 | r1 s1 | r2 s2 | r3 s3
    rank 1  mb 0: s2 s3              chunk 1: s4 s5 s6 s7   mb 1: s2 s3   mb 1: r0 s4 | r1 s5 | r2 s6 | r3 s7
    rank 0  mb 1: s4 s5                                     mb 2: s4 s5
    rank 1  mb 1: s6 s7                                     mb 3: s6 s7

Re-splitting for (D', mbs') uses the same rule on the same global batch: chunk ``j`` of ``mbs'·D'``
samples is micro-batch ``j`` of every target rank, rank ``r'`` taking ``chunk[r'·mbs':(r'+1)·mbs']``.
D' = D with mbs' = mbs gives back each rank's own micro-batches; D' = 1 gives the global batch in
order. No tensor is read to build the index (``micro_batch_size`` given: the captured size comes from
``.npy`` headers); each batch is read when asked for.

A field whose leading dimension is 1 while mbs > 1 (Megatron's shared causal ``attention_mask``
[1, 1, s, s]) is broadcast, not sliced: it is taken once from the first piece.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import InputError

BatchDict = dict[str, np.ndarray]


def open_store(store_or_path: Any):
    """A ``CaptureStore`` for a path; any object with the store API is returned as it is."""
    if isinstance(store_or_path, (str, Path)):
        from .store import CaptureStore  # the store module owns the on-disk layouts

        return CaptureStore(store_or_path)
    return store_or_path


class ReplayIndex:
    """Random access to the replayed batches of one target rank: ``index[i] -> (step, micro_batch, batch)``.

    ``len(index)`` counts every (epoch, step, micro-batch); the order is steps ascending, micro-batches
    ascending, then the next epoch.
    """

    def __init__(self, store_or_path: Any, target_dp: int = 1, target_rank: int = 0,
                 micro_batch_size: int | None = None, epochs: int = 1, uniform: bool = True):
        self.store = open_store(store_or_path)
        where = str(getattr(self.store, "root", store_or_path))
        for name, value, low in (("dp", target_dp, 1), ("epochs", epochs, 1), ("rank", target_rank, 0)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise InputError(where, f"replay {name}: expected an integer >= {low}, got {value!r}",
                                 "fix the argument")
        if target_rank >= target_dp:
            raise InputError(where, f"replay rank {target_rank} is outside dp={target_dp}", "use 0 <= rank < dp")
        self.target_dp, self.target_rank, self.epochs = int(target_dp), int(target_rank), int(epochs)
        self.steps = list(self.store.steps)
        if not self.steps:
            raise InputError(where, "the capture holds no step", "capture at least one step")
        self.where, self.uniform = where, bool(uniform)
        self.source_mbs: int | None = None
        self.micro_batch_size = micro_batch_size
        self._orders: dict[int, list[tuple[int, int]]] = {}
        # uniform (Megatron's fixed global batch): count the first step, check every other one when read;
        # otherwise list every step now (batch-size ramp-up), which reads every step's folders
        first = self._count(self.steps[0])
        self.counts = [first] * len(self.steps) if self.uniform else [self._count(s) for s in self.steps]
        self._ends = np.cumsum(self.counts)
        self._cache: tuple[int, dict] | None = None  # (step, {(rank, mb): batch}) of the last step read

    # -- index
    def _order(self, step: int) -> list[tuple[int, int]]:
        order = self._orders.get(step)
        if order is None:
            order = [tuple(item) for item in self.store.global_order(step)]
            if len(self._orders) > 64:
                self._orders.clear()
            self._orders[step] = order
            if self.uniform and step != self.steps[0] and len(order) != len(self._order(self.steps[0])):
                raise InputError(f"{self.where} step {step}", f"{len(order)} micro-batches in the global batch, "
                                 f"step {self.steps[0]} has {len(self._order(self.steps[0]))}",
                                 "batch-size ramp-up? replay with uniform=False")
        return order

    def _count(self, step: int) -> int:
        """How many target micro-batches ``step`` gives: global samples / (mbs'·D')."""
        pieces = len(self._order(step))
        if self.micro_batch_size is None:  # mbs' = mbs: count in source micro-batches, read nothing
            if pieces % self.target_dp:
                raise InputError(f"{self.where} step {step}", f"{pieces} micro-batches in the global batch do not "
                                 f"split over dp={self.target_dp}",
                                 "choose a dp that divides them, or micro_batch_size")
            return pieces // self.target_dp
        samples, per_chunk = pieces * self.source_micro_batch_size(), self.micro_batch_size * self.target_dp
        if self.micro_batch_size < 1 or samples % per_chunk:
            raise InputError(f"{self.where} step {step}", f"global batch of {samples} samples does not split into "
                             f"micro-batches of {self.micro_batch_size} x dp={self.target_dp}",
                             "choose micro_batch_size and dp whose product divides the global batch")
        return samples // per_chunk

    def source_micro_batch_size(self) -> int:
        """The captured micro-batch size: from ``.npy`` headers when the store offers them, else one read."""
        if self.source_mbs is None:
            if hasattr(self.store, "reference_shapes"):
                self.source_mbs = int(self.store.reference_shapes()["tokens"][0])
            else:
                rank, micro_batch = self._order(self.steps[0])[0]
                self.source_mbs = int(np.shape(self.store.read(self.steps[0], rank, micro_batch)["tokens"])[0])
        return self.source_mbs

    def __len__(self) -> int:
        return int(self._ends[-1]) * self.epochs if len(self._ends) else 0

    def locate(self, i: int) -> tuple[int, int]:
        """(step, micro-batch index within the step) of flat position ``i``."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        i %= int(self._ends[-1])
        position = int(np.searchsorted(self._ends, i, side="right"))
        start = int(self._ends[position - 1]) if position else 0
        return self.steps[position], i - start

    # -- data
    def __getitem__(self, i: int) -> tuple[int, int, BatchDict]:
        step, micro_batch = self.locate(int(i))
        return step, micro_batch, self.batch(step, micro_batch)

    def __iter__(self) -> Iterator[tuple[int, int, BatchDict]]:
        for i in range(len(self)):
            yield self[i]

    def batch(self, step: int, micro_batch: int) -> BatchDict:
        """Target micro-batch ``micro_batch`` of ``step`` for this target rank."""
        order = self._order(step)
        if self.micro_batch_size is None:  # whole source micro-batches: no slicing at all
            return dict(self._read(step, *order[micro_batch * self.target_dp + self.target_rank]))
        mbs, size = self.source_micro_batch_size(), self.micro_batch_size
        start = micro_batch * size * self.target_dp + self.target_rank * size  # global sample index
        pieces = []
        for sample in range(start, start + size):
            pieces.append((order[sample // mbs], sample % mbs))
        return _assemble([(self._read(step, *source), row) for source, row in pieces], mbs)

    def _read(self, step: int, rank: int, micro_batch: int) -> BatchDict:
        if self._cache is None or self._cache[0] != step:
            self._cache = (step, {})
        cached = self._cache[1]
        if (rank, micro_batch) not in cached:
            cached[(rank, micro_batch)] = self.store.read(step, rank, micro_batch)
        return cached[(rank, micro_batch)]


def _assemble(rows: list[tuple[BatchDict, int]], source_mbs: int) -> BatchDict:
    """Stack single sample rows (batch, row) into one micro-batch, field by field."""
    out: BatchDict = {}
    for name in rows[0][0]:
        values = [batch.get(name) for batch, _ in rows]
        if any(value is None for value in values):
            continue
        first = np.asarray(values[0])
        if first.ndim and first.shape[0] == 1 and source_mbs > 1:  # broadcast field: shared by every row
            out[name] = first
        else:
            out[name] = np.stack([np.asarray(value)[row] for value, (_, row) in zip(values, rows, strict=True)])
    return out


def regrouped_batches(store: Any, target_dp: int = 1, target_rank: int = 0,
                      micro_batch_size: int | None = None) -> Iterator[tuple[int, int, BatchDict]]:
    """``(step, micro_batch_index, batch)`` of target rank ``target_rank`` out of ``target_dp``, in order.

    ``micro_batch_size`` None keeps the captured micro-batch size; D' = 1 yields the global batch in
    Megatron's order (see the module docstring).
    """
    return iter(ReplayIndex(store, target_dp, target_rank, micro_batch_size))
