"""A table's CSV rows written by the compiled row writer (``workbench/native/csvrows.c``), the same bytes
``DataFrame.to_csv(index=False, header=False)`` writes, without a Python string per cell.

Each column goes to C as one array: float64 as it is (printed there as ``repr``, missing empty), integers as
int64, booleans as bytes, and every other column as its cells' text (the cells :func:`.csv_text.column_cells` makes,
or, for a column of str only, the column itself), quoted by the ``csv`` module where it must be, each cell
followed by a NUL byte, encoded once. Python sizes the output from an upper bound it computes first, and C
checks every cell against it. A column that cannot go this way (a NUL in its text, text that is not valid
UTF-8, an object pandas prints its own way) gives None, and :func:`.csv_text.frame_csv` writes the table by its
Python path, which gives the same text (``tests/test_csv_rows.py`` compares both, ``WORKBENCH_NATIVE=0``).
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from .. import native
from .float_repr import LINE, power_tables

FLOAT64, INT64, BOOL8, TEXT = 0, 1, 2, 3          # csvrows.c's column kinds
INT64_RANGE = (-(1 << 63), (1 << 63) - 1)

if TYPE_CHECKING:
    import numpy as np


def csv_rows(frame, header: str = "") -> np.ndarray | None:
    """``header`` and then ``frame.to_csv(index=False, header=False)`` (``frame``'s columns as
    :func:`.csv_text.frame_csv` accepts them) as UTF-8 bytes in a uint8 array (a buffer that files take as it
    is, and ``str(rows, "utf-8")`` decodes), or None where the library is off or a column cannot be written
    here."""
    function = _function()
    if function is None or not len(frame):
        return None
    columns = []
    for name in frame.columns:
        column = _column(frame[name])
        if column is None:
            return None
        columns.append(column)
    return _written(function, columns, len(frame), header.encode("utf-8"))


def _function():
    """``csvrows_write`` of the built library, typed, or None (off, not built, stale)."""
    i64, u64, pointer = ctypes.c_int64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p
    return native.function("csvrows", "csvrows_write",
                           (i64, i64, pointer, pointer, pointer, pointer, u64, i64, u64, i64, pointer, i64), i64)


def _column(series) -> tuple[int, object, int] | None:
    """(kind, array, bytes its cells and separators take at most) for one column, or None."""
    import numpy as np

    values = series.to_numpy()
    kind = values.dtype.kind
    if kind == "f" and values.dtype == np.float64:
        return FLOAT64, np.ascontiguousarray(values), LINE * len(values)
    if kind == "b":
        return BOOL8, np.ascontiguousarray(values).view(np.uint8), 6 * len(values)
    if kind in "iu" and len(values):
        low, high = int(values.min()), int(values.max())
        if INT64_RANGE[0] <= low and high <= INT64_RANGE[1]:
            width = max(len(str(low)), len(str(high))) + 1
            return INT64, np.ascontiguousarray(values, dtype=np.int64), width * len(values)
    text = _text(values, series)
    return None if text is None else (TEXT, text, len(text))


def _text(values, series) -> bytes | None:
    """A column's cells, each followed by NUL, in UTF-8; None when a cell is not valid UTF-8 (a lone surrogate)
    or is an object pandas prints its own way. (A NUL inside a cell is found by csvrows.c: its column's bytes
    would not all be read.)"""
    import pandas as pd

    from .csv_text import QUOTED, column_cells, quote_cells

    cells = values.tolist() + [""] if values.dtype.kind == "O" else None
    try:
        joined = "\0".join(cells)                # str only: the csv writer prints each cell as it is
        if any(char in joined for char in QUOTED):
            joined = "\0".join(quote_cells(cells))
    except TypeError:                             # not all str (or not objects)
        if values.dtype.kind == "O" and pd.isna(values).all():
            return b"\0" * len(values)           # every cell missing: empty (the nan/inf counts of most dumps)
        cells = column_cells(series)                    # quoted already
        if cells is None:
            return None
        joined = "\0".join(cells + [""])
    try:
        return joined.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _written(function, columns: list, rows: int, header: bytes) -> np.ndarray | None:
    import numpy as np

    count = len(columns)
    kinds = np.asarray([kind for kind, _, _ in columns], dtype=np.int32)
    arrays = [array for _, array, _ in columns]
    pointers = np.asarray([_address(array) for array in arrays], dtype=np.uintp)
    sizes = np.asarray([len(array) for array in arrays], dtype=np.int64)
    scratch = np.zeros(3 * count, dtype=np.int64)
    capacity = sum(bound for _, _, bound in columns)
    out = np.empty(len(header) + capacity, dtype=np.uint8)    # not zeroed: only the pages written are touched
    out[:len(header)] = np.frombuffer(header, dtype=np.uint8)
    inverse, powers = power_tables()
    u64 = ctypes.POINTER(ctypes.c_uint64)
    written = function(rows, count, kinds.ctypes.data, pointers.ctypes.data, sizes.ctypes.data, scratch.ctypes.data,
                       inverse.ctypes.data_as(u64), len(inverse) // 2, powers.ctypes.data_as(u64), len(powers) // 2,
                       out.ctypes.data + len(header), capacity)
    if written < 0:                               # a NUL in a text cell (or, never, too small a bound)
        return None
    return out[:len(header) + written]


def _address(buffer) -> int:
    """Where a numpy array's or bytes' data starts (kept alive by the caller's reference)."""
    if isinstance(buffer, bytes):
        return ctypes.cast(ctypes.c_char_p(buffer), ctypes.c_void_p).value
    return buffer.ctypes.data
