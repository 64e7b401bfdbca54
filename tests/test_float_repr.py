"""The compiled float formatter (workbench/native/floatrepr.c through workbench/report/float_repr.py) prints
exactly Python's ``repr`` of every float64: random bit patterns, the values a comparison prints (17-digit
statistics, float32 values widened, short decimals), and the edges where the shortest digits or the layout
change (powers of two and ten and their neighbours, subnormals, the extremes, zeros, inf, nan). The pure-Python
path (no library, ``WORKBENCH_NATIVE=0``) is ``repr`` itself; the C function refuses a buffer or a table too
small instead of writing past it."""
from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

from workbench.report import float_repr
from workbench.report.float_repr import float_reprs


def _function():
    function = float_repr._function()
    if function is None:
        pytest.skip("the floatrepr library is not built (python workbench/native/build.py)")
    return function


def _same_as_repr(values) -> None:
    values = np.asarray(values, dtype=np.float64)
    got = float_repr._compiled(_function(), values, len(values))
    want = list(map(float.__repr__, values.tolist()))
    assert len(got) == len(want)
    wrong = [(w, g) for w, g in zip(want, got, strict=True) if w != g]
    assert not wrong, wrong[:5]


def _edges() -> np.ndarray:
    powers = [2.0 ** k for k in range(-1074, 1024)] + [10.0 ** k for k in range(-323, 309)]
    named = [0.0, -0.0, 1.0, 0.5, 1e16, 1e-5, 1e-4, 1e15, 1e17, 9999999999999998.0, 1e22, 1e23, 5e-324,
             2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308, 0.1, 0.2, 0.3, 0.1 + 0.2,
             123456789012345678.0, 1e-310, 0.00011, 0.0001, 9.999999999999999e-05, 1234567890123456.7,
             math.inf, -math.inf, math.nan, -math.nan]
    base = np.asarray(powers + [3 * p for p in powers if p < 1e300] + named, dtype=np.float64)
    finite = base[np.isfinite(base)]
    with np.errstate(over="ignore"):
        around = [np.nextafter(finite, np.inf), np.nextafter(finite, -np.inf)]
    values = np.concatenate([base, *around, np.arange(-3000.0, 3000.0, 0.25)])
    return np.concatenate([values, -values])


def test_every_random_bit_pattern_prints_as_repr():
    rng = np.random.default_rng(11)
    _same_as_repr(rng.integers(0, 2 ** 64, 400_000, dtype=np.uint64).view(np.float64))


def test_the_values_a_comparison_prints_print_as_repr():
    rng = np.random.default_rng(12)
    normal = rng.standard_normal(100_000) * 10.0 ** rng.integers(-12, 12, 100_000)
    widened = normal.astype(np.float32).astype(np.float64)
    short = [float(f"{x:.{p}g}") for x, p in zip(normal[:50_000].tolist(), rng.integers(1, 17, 50_000).tolist(),
                                                  strict=True)]
    _same_as_repr(np.concatenate([normal, widened, short]))


def test_edges_of_digits_and_layout_print_as_repr():
    _same_as_repr(_edges())


def test_without_the_library_the_text_is_repr(monkeypatch):
    values = np.concatenate([_edges()[:2000], np.random.default_rng(13).standard_normal(1000)])
    compiled = float_reprs(values)
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    assert float_reprs(values) == compiled == list(map(repr, values.tolist()))
    assert float_reprs(np.zeros(0)) == []


def test_a_buffer_or_table_too_small_is_refused_not_overrun():
    function = _function()
    inverse, powers = float_repr.power_tables()
    values = np.full(4, -2.2250738585072014e-308)
    out = bytearray(float_repr.LINE * 4 + 8)
    u64 = ctypes.POINTER(ctypes.c_uint64)

    def call(count, ninv, npow, cap):
        return function(values.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), count, inverse.ctypes.data_as(u64),
                        ninv, powers.ctypes.data_as(u64), npow,
                        ctypes.addressof((ctypes.c_char * len(out)).from_buffer(out)), cap)

    full = len(inverse) // 2, len(powers) // 2
    assert call(4, *full, float_repr.LINE * 4 - 1) == -1
    assert call(4, full[0] - 1, full[1], len(out)) == -1
    assert call(4, full[0], full[1] - 1, len(out)) == -1
    assert call(0, *full, len(out)) == -1 and call(-5, *full, len(out)) == -1
    assert out == bytearray(len(out))                       # nothing written by a refused call
    written = call(4, *full, float_repr.LINE * 4)
    assert out[:written].decode() == "\n".join(["-2.2250738585072014e-308"] * 4)
    assert out[written:] == b"\n" + bytes(len(out) - written - 1)
