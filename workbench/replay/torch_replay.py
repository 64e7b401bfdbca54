"""Replay captured Megatron batches on the torch (reference) side.

``TorchReplayDataset`` is a map-style ``torch.utils.data.Dataset``: item ``i`` is the Megatron batch
``{"tokens", "labels", "loss_mask", "attention_mask", "position_ids"}`` (torch tensors; ``None`` for a
field the capture does not hold) in exactly the order ``mindspore_replay.replay_dataset`` replays
(steps, then micro-batches in Megatron's global order; regrouped for ``dp``/``rank``; repeated for
``epochs``). ``replay_dataloader(...)`` wraps it in a ``DataLoader(batch_size=None, shuffle=False)``:
each item already is a micro-batch, so the loader must not collate again.

torch is imported only when ``TorchReplayDataset`` or ``replay_dataloader`` is first used (the class
is created then, so it subclasses the real ``torch.utils.data.Dataset``).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from .regroup import ReplayIndex

MEGATRON_FIELDS = ("tokens", "labels", "loss_mask", "attention_mask", "position_ids")
_DTYPES = {"tokens": "int64", "labels": "int64", "loss_mask": "float32", "attention_mask": "bool",
           "position_ids": "int64"}


def megatron_batch(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    """numpy capture -> Megatron's ``get_batch`` tensors (dtypes as Megatron's; missing fields None)."""
    import torch

    out: dict[str, Any] = {}
    for name in MEGATRON_FIELDS:
        value = batch.get(name)
        out[name] = None if value is None else torch.from_numpy(
            np.ascontiguousarray(np.asarray(value).astype(_DTYPES[name], copy=False)))
    return out


@lru_cache(maxsize=1)
def _dataset_class():
    import torch.utils.data

    class TorchReplayDataset(torch.utils.data.Dataset):
        """Map-style dataset of replayed Megatron micro-batches (see the module docstring)."""

        def __init__(self, store_or_path: Any, dp: int = 1, rank: int = 0, epochs: int = 1,
                     micro_batch_size: int | None = None):
            self.index = ReplayIndex(store_or_path, dp, rank, micro_batch_size, epochs)

        def __len__(self) -> int:
            return len(self.index)

        def __getitem__(self, i: int) -> dict[str, Any]:
            _, _, batch = self.index[int(i)]
            return megatron_batch(batch)

        def position(self, i: int) -> tuple[int, int]:
            """(step, micro-batch index) of item ``i``."""
            return self.index.locate(int(i))

    TorchReplayDataset.__module__, TorchReplayDataset.__qualname__ = __name__, "TorchReplayDataset"  # picklable
    return TorchReplayDataset


def __getattr__(name: str):  # PEP 562: build the torch class on first access
    if name == "TorchReplayDataset":
        return _dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def replay_dataloader(store_or_path: Any, dp: int = 1, rank: int = 0, epochs: int = 1,
                      micro_batch_size: int | None = None, num_workers: int = 0):
    """``DataLoader`` over :class:`TorchReplayDataset`: Megatron batches in replay order, no shuffle."""
    from torch.utils.data import DataLoader

    dataset = _dataset_class()(store_or_path, dp, rank, epochs, micro_batch_size)
    return DataLoader(dataset, batch_size=None, shuffle=False, num_workers=num_workers)
