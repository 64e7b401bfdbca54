"""The compiled CSV row writer (workbench/native/csvrows.c through workbench/report/csv_rows.py) writes the very
text ``DataFrame.to_csv(index=False)`` writes, the same as the pure-Python path (``WORKBENCH_NATIVE=0``): fuzzed
tables of every column type a report has (floats of any bit pattern and the edges, integers of every width up to
the extremes, flags, text with quotes, separators, line breaks and non-ASCII, missing values), and the columns it
hands back to Python (a NUL in a cell, a lone surrogate, uint64 past int64). The C function refuses a buffer too
small, a text column that ends too soon or holds a NUL in a cell, and bad kinds, instead of reading or writing
past what Python sized."""
from __future__ import annotations

import ctypes
import math
import random
import struct

import numpy as np
import pandas as pd
import pytest

from workbench.report import csv_rows, float_repr
from workbench.report.csv_text import frame_csv, frame_csv_data

EDGES = [0.0, -0.0, 1.0, -1.5, 1e-4, 9.999e-5, 1e-5, 1e15, 1e16, 9999999999999998.0, 5e-324, -5e-324,
         2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308, -1.7976931348623157e308, 1e308,
         math.inf, -math.inf, math.nan, -math.nan, 0.1 + 0.2, 3.0e22, 1e23]
TEXTS = ["plain", "", " lead", "a,b", 'say "hi"', "line\nbreak", "cr\rlf\r\n", "tab\t", "ünïcödé ✓", "日本語",
         ",", '"', '""', "\n", "x" * 500, "-1.5", "None", "nan", "😀,\"q\""]


def _function():
    function = csv_rows._function()
    if function is None:
        pytest.skip("the csvrows library is not built (python workbench/native/build.py)")
    return function


def _floats(rng: random.Random, rows: int) -> list[float]:
    """Any bit pattern (every exponent, subnormals, nan payloads), the edges, runs of one value (the memo)."""
    found = []
    while len(found) < rows:
        pick = rng.random()
        if pick < 0.4:
            found.append(struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0])
        elif pick < 0.7:
            found.append(rng.choice(EDGES))
        elif pick < 0.85 and found:
            found.append(found[-1])
        else:
            found.append(float(np.float32(rng.gauss(0, 10.0 ** rng.randint(-30, 30)))))
    return found


def _fuzzed(rows: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    texts = [rng.choice(TEXTS) for _ in range(rows)]
    return pd.DataFrame({
        "f64": _floats(rng, rows), "tolerance": [1e-4] * rows, "noise": [math.nan] * rows,
        "i64": [rng.choice([0, -1, 2**63 - 1, -2**63, rng.randint(-2**63, 2**63 - 1)]) for _ in range(rows)],
        "small": np.asarray([rng.randint(-128, 127) for _ in range(rows)], dtype=np.int8),
        "u32": np.asarray([rng.randint(0, 2**32 - 1) for _ in range(rows)], dtype=np.uint32),
        "u64": np.asarray([rng.randint(0, 2**63 - 1) for _ in range(rows)], dtype=np.uint64),
        "flag": [rng.random() < 0.5 for _ in range(rows)],
        "text": texts, "status": [rng.choice(["pass", "error"]) for _ in range(rows)],
        "maybe": [rng.choice([None, "x", "a,b", math.nan]) for _ in range(rows)],
        "counts": [rng.choice([None, 0, 3]) for _ in range(rows)],
        "mixed": [rng.choice([None, math.nan, pd.NA, 7, -3, 2.5, True, "word", "a\nb"]) for _ in range(rows)],
        "none": [None] * rows,
        "f32": np.frombuffer(rng.randbytes(4 * rows), dtype=np.float32)})


@pytest.mark.parametrize("rows,seed", [(1, 0), (2, 1), (17, 2), (1000, 3), (20_000, 4)])
def test_fuzzed_tables_are_to_csv_text_on_both_paths(rows, seed, monkeypatch):
    _function()
    frame = _fuzzed(rows, seed)
    expected = frame.to_csv(index=False)
    data = frame_csv_data(frame)
    assert not isinstance(data, str)                    # the compiled writer wrote it (nothing handed back)
    assert str(data, "utf-8") == expected
    assert str(frame_csv_data(frame, header=False), "utf-8") == frame.to_csv(index=False, header=False)
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    assert frame_csv(frame) == expected


@pytest.mark.parametrize("column", [
    ["a\0b", "c"],                                       # a NUL inside a cell: not one cell a NUL each
    ["\0", ""],
    ["ok", "\ud800"],                                    # a lone surrogate: no UTF-8 for it
    np.asarray([2**64 - 1, 0], dtype=np.uint64),          # past int64: the Python path's str()
    [(1, 2), "x"]])                                      # an object pandas prints its own way
def test_columns_the_writer_hands_back_give_the_same_text(column):
    _function()
    frame = pd.DataFrame({"a": column, "b": [1.5, math.nan]})
    if isinstance(column, list) and "\ud800" in column:
        assert csv_rows.csv_rows(frame) is None
        with pytest.raises(UnicodeEncodeError):         # the Python path's str cannot be written either
            frame_csv(frame).encode("utf-8")
        return
    if not (isinstance(column, np.ndarray)):
        assert csv_rows.csv_rows(frame) is None
    assert frame_csv(frame) == frame.to_csv(index=False)


def test_empty_and_odd_tables_keep_their_paths():
    for frame in (pd.DataFrame({"a": [], "b": []}), pd.DataFrame({"a": [1.0], "b": ["x"]}).iloc[:0]):
        assert csv_rows.csv_rows(frame) is None
        assert frame_csv(frame) == frame.to_csv(index=False)


def _call(kinds, arrays, rows, cap, sizes=None):
    """csvrows_write on raw arrays: (bytes written or -1, the output)."""
    function = _function()
    inverse, powers = float_repr.power_tables()
    kinds = np.asarray(kinds, dtype=np.int32)
    pointers = np.asarray([csv_rows._address(a) for a in arrays], dtype=np.uintp)
    sizes = np.asarray(sizes if sizes is not None else [len(a) for a in arrays], dtype=np.int64)
    scratch = np.zeros(3 * len(arrays), dtype=np.int64)
    out = np.full(cap + 64, 0xAB, dtype=np.uint8)                    # a guard after cap: never written
    u64 = ctypes.POINTER(ctypes.c_uint64)
    written = function(rows, len(arrays), kinds.ctypes.data, pointers.ctypes.data, sizes.ctypes.data,
                       scratch.ctypes.data, inverse.ctypes.data_as(u64), len(inverse) // 2,
                       powers.ctypes.data_as(u64), len(powers) // 2, out.ctypes.data, cap)
    assert (out[cap:] == 0xAB).all()
    return written, out[:max(written, 0)].tobytes()


def test_the_c_writer_refuses_instead_of_overrunning():
    floats = np.asarray([-2.2250738585072014e-308, 1.5])
    ints = np.asarray([-2**63, 7], dtype=np.int64)
    text = b'"a,b"\0\xc3\xbc\0'
    written, out = _call([0, 1, 3], [floats, ints, text], 2, 200)
    assert out == b'-2.2250738585072014e-308,-9223372036854775808,"a,b"\n1.5,7,\xc3\xbc\n'
    for cap in range(written):                                      # every size short of the bound: refused
        assert _call([0, 1, 3], [floats, ints, text], 2, cap)[0] == -1
    assert _call([3, 0], [b"a\0b\0", floats], 2, 200)[1] == b"a,-2.2250738585072014e-308\nb,1.5\n"
    assert _call([3, 0], [b"a\0b", floats], 2, 200)[0] == -1                 # a cell without its NUL
    assert _call([3, 0], [b"a\0b\0c\0", floats], 2, 200)[0] == -1             # a NUL left: one inside a cell
    assert _call([0, 1], [floats, ints[:1]], 2, 200)[0] == -1                 # an array shorter than the rows
    assert _call([7, 1], [floats, ints], 2, 200)[0] == -1                     # an unknown kind
    assert _call([3, 1], [b"a\0b\0", ints], 2, 200, sizes=[-1, 2])[0] == -1    # a negative size


def test_float_cells_are_repr_and_missing_is_empty():
    """Against repr directly (not only pandas): every bit pattern of a column, one repeated (the memo)."""
    _function()
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.integers(0, 2**64, 50_000, dtype=np.uint64).view(np.float64),
                             np.asarray(EDGES), np.repeat(np.asarray([0.1, -0.0, 0.0, math.nan]), 3)])
    frame = pd.DataFrame({"x": values, "y": values[::-1].copy()})
    lines = str(csv_rows.csv_rows(frame), "utf-8").split("\n")[:-1]
    cell = ["" if v != v else repr(v) for v in values.tolist()]
    assert lines == [f"{a},{b}" for a, b in zip(cell, cell[::-1], strict=True)]
