"""``repr`` of every value of a float64 array: the text the CSV prints for a float cell.

Python's ``repr`` (dtoa's shortest round-trip digits, big-number arithmetic) takes about half a microsecond for
the 17-digit statistics a comparison prints; ~0.9M of them were the largest single cost of a 200k-row
comparison's CSV. The compiled formatter (``workbench/native/floatrepr.c``) finds the same digits with 128-bit
products by powers of five and writes the texts a line each into one buffer, which becomes the list of str by one
decode and one split. Its tables of powers are computed here with Python's exact integers. Without the library
(not built, or ``WORKBENCH_NATIVE=0``), or should it refuse, ``repr`` itself: the text is the same either way
(``tests/test_float_repr.py`` compares both on random bit patterns and edges).
"""
from __future__ import annotations

import ctypes
import functools

from .. import native

POW5_BITS = 125                 # significant bits of each power of five in the tables (floatrepr.c's POW5_BITS)
INV_COUNT, POW_COUNT = 292, 326  # the entries a double's exponent range reaches (floatrepr.c checks them)
LINE = 25                       # bytes a value's text and its newline can take: "-2.2250738585072014e-308\n"


@functools.lru_cache(maxsize=1)
def power_tables():
    """The tables of powers both compiled formatters read (floatrepr.c here, csvrows.c for the CSV's rows):
    (inverse powers, powers): 2^(bits(5^q) - 1 + 125) / 5^q rounded up, and 5^i scaled to 125 bits, each as two
    uint64 words (low, high)."""
    import numpy as np

    def words(values):
        mask = (1 << 64) - 1
        return np.array([(v & mask, v >> 64) for v in values], dtype=np.uint64).reshape(-1)

    inverse = [(1 << (5 ** q).bit_length() - 1 + POW5_BITS) // 5 ** q + 1 for q in range(INV_COUNT)]
    powers = [_scaled(5 ** i) for i in range(POW_COUNT)]
    return words(inverse), words(powers)


def _scaled(value: int) -> int:
    excess = value.bit_length() - POW5_BITS
    return value >> excess if excess > 0 else value << -excess


def float_reprs(values) -> list[str]:
    """``list(map(repr, values.tolist()))`` for a one-dimensional float64 array."""
    count = len(values)
    function = _function() if count else None
    if function is not None:
        texts = _compiled(function, values, count)
        if texts is not None:
            return texts
    return list(map(float.__repr__, values.tolist()))


def preload() -> None:
    """The library and its tables loaded now: before ``compare --workers`` forks, so that no worker computes them
    again (~10-15 ms each)."""
    if _function() is not None:
        power_tables()


def _function():
    """``floatrepr_lines`` of the built library, typed, or None (off, not built, stale)."""
    u64, i64 = ctypes.POINTER(ctypes.c_uint64), ctypes.c_int64
    return native.function("floatrepr", "floatrepr_lines",
                           (ctypes.POINTER(ctypes.c_double), i64, u64, i64, u64, i64, ctypes.c_void_p, i64), i64)


def _compiled(function, values, count: int) -> list[str] | None:
    import numpy as np

    values = np.ascontiguousarray(values, dtype=np.float64)
    inverse, powers = power_tables()
    out = bytearray(LINE * count)
    u64 = ctypes.POINTER(ctypes.c_uint64)
    written = function(values.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), count,
                       inverse.ctypes.data_as(u64), len(inverse) // 2, powers.ctypes.data_as(u64), len(powers) // 2,
                       ctypes.addressof((ctypes.c_char * len(out)).from_buffer(out)), len(out))
    if written < 0:                     # a capacity check refused (never with these sizes): repr instead
        return None
    return out[:written].decode("ascii").split("\n")
