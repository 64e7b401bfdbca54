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
from .tables import categorical, frame, narrow, texts


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
    at: int = -1                  # values is values.base[at:at + len]: set by the readers that know it

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
    if _uniform(blocks, counts):
        return _uniform_columns(blocks, rank)
    total = sum(counts)
    def repeat(values, dtype):
        return np.repeat(np.array(values, dtype=dtype), counts)
    positions = [np.arange(count, dtype=np.int64) if block.positions is None else block.positions
                 for block, count in zip(blocks, counts, strict=True)]
    names = list(dict.fromkeys(block.definition for block in blocks))
    definitions = categorical(repeat([names.index(block.definition) for block in blocks], np.int8), names)
    return {"rank": narrow(np.full(total, rank, dtype=np.int64)),
            "step": narrow(repeat([block.step for block in blocks], np.int64)),
            "micro_step": np.full(total, -1, dtype=np.int32),
            "position": narrow(np.concatenate(positions)),
            "param": texts("", total),
            "numel": narrow(np.concatenate([block.numel() for block in blocks])),
            "value": _joined([block.values for block in blocks]),
            "definition": definitions,
            "line": narrow(repeat([block.first for block in blocks], np.int64))}


def _uniform_columns(blocks: list[NormBlock], rank: int) -> dict:
    """``_block_columns`` of blocks that all print every value of the same sizes: every column a
    (blocks x parameters) broadcast, the six int32 ones into one allocation (fresh memory is faulted in
    a few huge pages, not a thousand small ones), the values one slice when the compiled scan wrote
    them in a row."""
    count, total = len(blocks[0].sizes), len(blocks) * len(blocks[0].sizes)
    values = _contiguous(blocks)
    steps, lines = (narrow([getattr(block, name) for block in blocks]) for name in ("step", "first"))
    numels = narrow(blocks[0].numel())
    kinds = (narrow([rank]).dtype, steps.dtype, lines.dtype, np.dtype(np.int32), np.dtype(np.int32), numels.dtype)
    rank_, step, line, micro, position, numel = slab(total, 6, np.int32) if kinds == (np.int32,) * 6 else \
        map(np.empty, (total,) * 6, kinds)
    rank_.fill(rank)
    micro.fill(-1)
    grid = (len(blocks), count)
    step.reshape(grid)[:] = steps[:, None]
    line.reshape(grid)[:] = lines[:, None]
    position.reshape(grid)[:] = np.arange(count, dtype=np.int32)
    numel.reshape(grid)[:] = numels
    if values is None:
        values = np.empty(total, dtype=np.float64)
        np.concatenate([block.values for block in blocks], out=values)
    return {"rank": rank_, "step": step, "micro_step": micro, "position": position, "param": texts("", total),
            "numel": numel, "value": values, "definition": texts(blocks[0].definition, total), "line": line}


def slab(count: int, columns: int, dtype=np.int64) -> list[np.ndarray]:
    """``columns`` arrays of ``count`` rows, views into one allocation."""
    whole = np.empty(count * columns, dtype=dtype)
    return [whole[index * count:(index + 1) * count] for index in range(columns)]


def _contiguous(blocks: list[NormBlock]) -> np.ndarray | None:
    """The values of ``blocks`` as one slice, when they were read in a row into one float64 array (the
    compiled scan's, or one batch's): each block's ``at`` right after the one before."""
    base = blocks[0].values.base if blocks else None
    if base is None or base.dtype != np.float64 or base.ndim != 1 or not base.flags.c_contiguous:
        return None
    start = at = blocks[0].at
    for block in blocks:
        if block.at != at or block.values.base is not base or at < 0:
            return None
        at += len(block.values)
    return base[start:at]


def _uniform(blocks: list[NormBlock], counts: list[int]) -> bool:
    """Every block printed whole, with the same sizes (the same array) and definition."""
    first = blocks[0]
    return all(block.positions is None and block.sizes is first.sizes and block.definition == first.definition
               and count == len(first.sizes) for block, count in zip(blocks, counts, strict=True))


def _joined(values: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(values).astype(np.float64, copy=False)


def _joined_column(pieces: list) -> np.ndarray | pd.Categorical:
    """One column of several parts: text columns (Categoricals) by their texts, as ``frame`` types them."""
    if isinstance(pieces[0], pd.Categorical):
        return pd.Categorical(np.concatenate([np.asarray(piece, dtype=object) for piece in pieces]))
    return np.concatenate([np.asarray(piece) for piece in pieces])


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
            parts.append({column: table[column].array for column in LOCAL_NORM_COLUMNS[1:]})
    data = parts[0] if len(parts) == 1 else {column: _joined_column([part[column] for part in parts])
                                             for column in LOCAL_NORM_COLUMNS[1:]}
    return pd.DataFrame({"run": texts(run, len(data["value"])), **data}, copy=False)
