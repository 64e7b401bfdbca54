"""Local-norm rows kept column-wise: a block of a thousand values is one ``NormBlock``, not a thousand
tuples; single rows (monitor lines) stay tuples. ``norm_frame`` builds the table once, equal to
``tables.frame`` over the same rows written out one by one.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

import numpy as np
import pandas as pd

from .schema import LOCAL_NORM_COLUMNS
from .tables import frame, labels


@dataclass
class NormBlock:
    """The values of one ``local_norm`` block: ``values[i]`` is the parameter at ``positions[i]``."""

    first: int                    # line of its norm_size
    sizes: np.ndarray             # int64, one per parameter (norm_size)
    positions: np.ndarray | None  # None: 0..len(values)-1
    values: np.ndarray | None     # None until the chunk's batch is parsed
    text: bytes = b""             # the array as printed, while values is None
    step: int = 0
    definition: str = ""

    def __len__(self) -> int:
        return len(self.sizes) if self.positions is None else len(self.positions)

    def numel(self) -> np.ndarray:
        if self.positions is None and len(self.values) == len(self.sizes):
            return self.sizes
        positions = np.arange(len(self), dtype=np.int64) if self.positions is None else self.positions
        inside = positions < len(self.sizes)
        return np.where(inside, self.sizes[np.where(inside, positions, 0)] if len(self.sizes) else -1, -1)


def _block_columns(blocks: list[NormBlock], rank: int) -> dict:
    """The columns (but ``run``) of consecutive blocks, built once for all of them."""
    counts = [len(block) for block in blocks]
    total = sum(counts)
    def repeat(values, dtype):
        return np.repeat(np.array(values, dtype=dtype), counts)
    positions = [np.arange(count, dtype=np.int64) if block.positions is None else block.positions
                 for block, count in zip(blocks, counts, strict=True)]
    definitions, start = np.empty(total, dtype=object), 0
    for block, count in zip(blocks, counts, strict=True):
        definitions[start:start + count] = block.definition
        start += count
    return {"rank": np.full(total, rank, dtype=np.int64),
            "step": repeat([block.step for block in blocks], np.int64),
            "micro_step": np.full(total, -1, dtype=np.int64),
            "position": np.concatenate(positions).astype(np.int64, copy=False),
            "param": _objects("", total),
            "numel": np.concatenate([block.numel() for block in blocks]).astype(np.int64, copy=False),
            "value": np.concatenate([block.values for block in blocks]).astype(np.float64, copy=False),
            "definition": definitions,
            "line": repeat([block.first for block in blocks], np.int64)}


def _objects(value: str, count: int) -> np.ndarray:
    filled = np.empty(count, dtype=object)
    filled.fill(value)
    return filled


def recent_count(norms: list, step: int, definition: str, window: int = 5000) -> int:
    """Rows of ``step`` and ``definition`` among the last ``window`` rows (tuples and blocks)."""
    found = 0
    for item in reversed(norms):
        if window <= 0:
            break
        if isinstance(item, NormBlock):
            seen = min(len(item), window)
            found += seen if item.step == step and item.definition == definition else 0
        else:
            seen = 1
            found += item[2] == step and item[8] == definition
        window -= seen
    return found


def norm_frame(norms: list, run: str, rank: int) -> pd.DataFrame:
    """The local-norm table of ``norms`` (tuples and ``NormBlock``s, every one of run ``run``) in their order."""
    if not any(isinstance(item, NormBlock) for item in norms):
        return frame(norms, LOCAL_NORM_COLUMNS)
    parts = []
    for is_block, group in groupby(norms, key=lambda item: isinstance(item, NormBlock)):
        if is_block:
            parts.append(_block_columns(list(group), rank))
        else:
            table = frame(list(group), LOCAL_NORM_COLUMNS)
            parts.append({column: table[column].to_numpy() for column in LOCAL_NORM_COLUMNS[1:]})
    data = parts[0] if len(parts) == 1 else {column: np.concatenate([part[column] for part in parts])
                                             for column in LOCAL_NORM_COLUMNS[1:]}
    return pd.DataFrame({"run": labels(run, len(data["value"])), **data}, copy=False)
