"""Statistics of a tensor file, computed here: streaming over a memory map, one file at a time.

The ``.npy`` header is checked against the file size before anything is mapped
(:func:`workbench.replay.npy_files.npy_layout`), so a header that claims more data than the file
holds is a one-line error, never an allocation. Memory follows ``CHUNK`` elements, not the tensor.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..replay.npy_files import npy_layout

CHUNK = 1 << 22
"""Elements per streamed slice (32 MiB of float64)."""

FIX = "re-dump this tensor, or remove the damaged file"


def npy_stats(path: Path) -> dict:
    """``numel, max, min, mean, l2norm, nan_count, inf_count, shape`` of one ``.npy`` file."""
    try:
        shape, dtype, offset = npy_layout(path, c_order=True)
    except InputError as error:
        raise InputError(error.where, error.problem, FIX) from None
    if dtype.hasobject or dtype.fields is not None:
        raise InputError(str(path), f"holds {dtype} data, expected a numeric tensor", FIX)
    numel = math.prod(shape)
    stats = {"shape": "x".join(str(n) for n in shape), "numel": numel}
    if numel == 0:
        return {**stats, "max": math.nan, "min": math.nan, "mean": math.nan, "l2norm": 0.0,
                "nan_count": 0, "inf_count": 0}
    flat = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(numel,))
    try:
        return {**stats, **flat_stats(flat)}
    finally:
        del flat


def flat_stats(flat: np.ndarray) -> dict:
    """Statistics of a 1-D array, streamed ``CHUNK`` elements at a time (NaNs propagate to max/min/mean)."""
    high, low, total, squares, nans, infs = -math.inf, math.inf, 0.0, 0.0, 0, 0
    for start in range(0, flat.shape[0], CHUNK):
        part = np.asarray(flat[start:start + CHUNK])
        if part.dtype.kind == "c":
            part = np.abs(part)
        part = part.astype(np.float64, copy=False)
        high = max(high, float(np.max(part)))
        low = min(low, float(np.min(part)))
        total += float(np.sum(part))
        squares += float(np.dot(part, part))
        nans += int(np.count_nonzero(np.isnan(part)))
        infs += int(np.count_nonzero(np.isinf(part)))
    if nans:
        high = low = math.nan
    return {"max": high, "min": low, "mean": total / flat.shape[0], "l2norm": math.sqrt(squares),
            "nan_count": nans, "inf_count": infs}
