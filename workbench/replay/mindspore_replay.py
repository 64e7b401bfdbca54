"""Replay captured Megatron batches in MindSpore: a lazy ``mindspore.dataset.GeneratorDataset``.

``replay_dataset(capture, contract="legacy")`` yields, for each step in order and each micro-batch of
the step in order (Megatron's global order when regrouped, see ``regroup.py``), one row per
micro-batch with the contract's columns (``datasets/replay_contracts.yaml``): ``legacy`` gives
``input_ids, labels`` [mbs, s+1] int32, ``new`` gives ``input_ids, labels, loss_mask, position_ids``.
The rows are already batched (one row = one micro-batch): do not ``.batch()`` the dataset again.
``per_step=True`` yields one row per step instead (the step's micro-batches concatenated, in order),
which is what a MindFormers trainer with ``gradient_accumulation_steps`` = micro-batches per step
consumes. Nothing is read at construction; each row is read when the pipeline asks for it.
mindspore is imported inside the functions only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .contracts import Contract, get_contract
from .regroup import ReplayIndex


class ReplaySource:
    """Random-access source for ``GeneratorDataset``: ``source[i]`` -> tuple of column arrays.

    Also usable without MindSpore (``rows()`` iterates ``(step, micro_batch, columns dict)``).
    """

    def __init__(self, store_or_path: Any, contract: str | Contract = "legacy", dp: int = 1, rank: int = 0,
                 epochs: int = 1, micro_batch_size: int | None = None, per_step: bool = False):
        self.contract = contract if isinstance(contract, Contract) else get_contract(contract)
        self.index = ReplayIndex(store_or_path, dp, rank, micro_batch_size, epochs)
        self.per_step = bool(per_step)

    @property
    def column_names(self) -> list[str]:
        return self.contract.column_names

    def __len__(self) -> int:
        if not self.per_step:
            return len(self.index)
        return len(self.index.steps) * self.index.epochs

    def columns(self, i: int) -> tuple[int, int, dict[str, np.ndarray]]:
        """(step, micro-batch or -1 for a whole step, {column: array}) of row ``i``."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        if not self.per_step:
            step, micro_batch, batch = self.index[i]
            return step, micro_batch, self.contract.apply(batch)
        position = i % len(self.index.steps)
        step = self.index.steps[position]
        parts = [self.contract.apply(self.index.batch(step, m)) for m in range(self.index.counts[position])]
        return step, -1, {name: np.concatenate([part[name] for part in parts]) for name in self.column_names}

    def __getitem__(self, i: int) -> tuple[np.ndarray, ...]:
        _, _, columns = self.columns(int(i))
        return tuple(columns[name] for name in self.column_names)

    def rows(self):
        for i in range(len(self)):
            yield self.columns(i)

    def samples_per_row(self) -> int:
        """Samples (rows of each array) in one dataset row, from ``.npy`` headers when the store has them."""
        index = self.index
        mbs = index.micro_batch_size if index.micro_batch_size is not None else index.source_micro_batch_size()
        return mbs * (index.counts[0] if self.per_step else 1)


def replay_dataset(store_or_path: Any, contract: str | Contract = "legacy", dp: int = 1, rank: int = 0,
                   epochs: int = 1, micro_batch_size: int | None = None, per_step: bool = False):
    """A ``mindspore.dataset.GeneratorDataset`` replaying a capture (a folder or a ``CaptureStore``).

    ``dp``/``rank``: the target data-parallel size and this rank (regrouping the capture's global
    batches when ``dp`` differs from the capture's); ``micro_batch_size``: the target micro-batch size
    (default: as captured); ``epochs``: how many times the steps are replayed; ``per_step``: one row per
    step instead of per micro-batch. Order is fixed (no shuffle, one worker).
    """
    return dataset_from_source(ReplaySource(store_or_path, contract, dp, rank, epochs, micro_batch_size, per_step))


def dataset_from_source(source: ReplaySource):
    """The ``GeneratorDataset`` over a :class:`ReplaySource` (fixed order, one worker, no shuffle)."""
    import mindspore.dataset as ds

    dataset = ds.GeneratorDataset(source, column_names=source.column_names, shuffle=False,
                                  num_parallel_workers=1, python_multiprocessing=False)
    dataset.replay_source = source  # for callers that want the (step, micro-batch) of each row
    return dataset
