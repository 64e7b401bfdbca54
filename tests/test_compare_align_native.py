"""The compiled aligner (workbench/native/callalign.c through workbench/dumps/match_align_native.py) pairs the calls
:func:`workbench.dumps.match_align.align` pairs: fuzzed sequences with repeated and unique keys (anchors), classes
that never pair, equal and different sizes, levels nan/inf/huge/zero/signed zeros, gaps through the table and
through the greedy walk; features it does not take go to Python; the C function refuses sizes and ids Python did not
make; ``WORKBENCH_NATIVE=0`` turns it off."""
from __future__ import annotations

import ctypes
import math
import random

import numpy as np
import pytest

from workbench.dumps import match_align, match_align_native
from workbench.dumps.match_align import Feature, align
from workbench.dumps.match_align_native import aligned

LEVELS = [math.nan, math.inf, -math.inf, 1e308, -1e308, 0.0, -0.0, 1.5, 2.5, 1e-300, 5e-324, 3.0, 0.1 + 0.2]


def _function():
    function = match_align_native._function()
    if function is None:
        pytest.skip("the callalign library is not built (python workbench/native/build.py)")
    return function


def _features(rng: random.Random, count: int, classes: list[str]) -> list[Feature]:
    return [Feature(rng.choice(classes), rng.choice(["forward", "forward", "backward"]),
                    tuple(rng.choice([4, 8, 16, -1, 2 ** 40]) for _ in range(rng.randint(0, 3))),
                    rng.choice(LEVELS) if rng.random() < 0.5 else rng.uniform(-4, 4)) for _ in range(count)]


@pytest.mark.parametrize("seed", range(6))
def test_fuzzed_sequences_pair_as_in_python(seed):
    _function()
    rng = random.Random(seed)
    for _ in range(150):
        classes = rng.sample(["linear", "softmax", "add", "cast", "mul", "matmul", "norm"], rng.randint(1, 7))
        a = _features(rng, rng.randint(0, 60), classes)
        b = _features(rng, rng.randint(0, 60), classes)
        expected = align(a, b)
        if a and b:
            assert match_align_native._compiled(_function(), a, b) == expected
        assert aligned(a, b) == expected


@pytest.mark.parametrize("seed", range(3))
def test_greedy_gaps_pair_as_in_python(seed, monkeypatch):
    """Gaps above MAX_CELLS are walked greedily (lowered here so that small gaps take that path)."""
    _function()
    rng = random.Random(100 + seed)
    for cells in (0, 1, 20, 200):
        monkeypatch.setattr(match_align, "MAX_CELLS", cells)
        monkeypatch.setattr(match_align_native, "MAX_CELLS", cells)
        for _ in range(40):
            a = _features(rng, rng.randint(1, 80), ["linear", "add", "cast"])
            b = _features(rng, rng.randint(1, 80), ["linear", "add", "cast"])
            assert match_align_native._compiled(_function(), a, b) == align(a, b)


def test_long_sequences_with_anchors_pair_as_in_python():
    _function()
    rng = random.Random(9)
    base = [Feature(f"op{k}", "forward", (k,), float(k)) for k in range(300)]        # unique keys: anchors
    a = [f for f in base if rng.random() < 0.9] + _features(rng, 200, ["linear", "add"])
    b = [f for f in base if rng.random() < 0.9] + _features(rng, 200, ["linear", "add"])
    head = b[:50]
    rng.shuffle(head)                                                               # anchors out of order
    b[:50] = head
    assert match_align_native._compiled(_function(), a, b) == align(a, b)


def test_levels_that_are_not_floats_go_to_python():
    _function()
    a = [Feature("add", "forward", (4,), 3), Feature("add", "forward", (4,), 2.0)]
    b = [Feature("add", "forward", (4,), 3.0000000000000004)]
    assert match_align_native._compiled(_function(), a, b) is None
    assert aligned(a, b) == align(a, b)


def test_the_c_function_refuses_what_python_did_not_size():
    function = _function()
    i64, f64 = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_double)
    ids = np.zeros(4, dtype=np.int64)
    levels = np.zeros(4)

    def call(n=2, m=2, kinds=1, keys=1, ints=None, cells=None, capacity=2, kind=ids):
        ints = 3 * keys + 7 * n + kinds + 1 + m if ints is None else ints
        cells = 2 * min(n * m, 100) + n + m + 1 if cells is None else cells
        scratch, table, out = np.zeros(max(ints, 1), dtype=np.int64), np.zeros(max(cells, 1)), np.zeros(4, np.int64)
        p = [x.ctypes.data_as(i64) for x in (kind, ids, ids)]
        return function(n, m, *p, levels.ctypes.data_as(f64), *p, levels.ctypes.data_as(f64), kinds, keys, 100,
                        scratch.ctypes.data_as(i64), ints, table.ctypes.data_as(f64), cells, out.ctypes.data_as(i64),
                        out[2:].ctypes.data_as(i64), capacity)

    assert call() == 2
    assert call(ints=3 + 14 + 2 + 2 - 1) == -1
    assert call(cells=8 + 5 - 1) == -1
    assert call(capacity=1) == -1
    assert call(kinds=0) == -1                                         # an id out of its range
    assert call(kind=np.array([0, 3, 0, 0], dtype=np.int64)) == -1
    assert call(n=-1) == -1


def test_off_without_the_library(monkeypatch):
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    assert match_align_native._function() is None
    a = [Feature("add", "forward", (4,), 1.0)]
    assert aligned(a, a) == [(0, 0)]
