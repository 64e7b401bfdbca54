"""layers.layer_numbers (the compiled dumpscan_layers where the layer pattern has its usual form) against one
``re.search`` per path (fmt.layer): fuzzed paths with every near miss (no dot before the word, no digits, a
letter after them, runs of 30 digits, non-ASCII digits and letters, newlines), other words, other forms and
flags, and the library off."""
from __future__ import annotations

import ctypes
import dataclasses
import random
import re

import numpy as np
import pytest

from workbench.dumps import layers
from workbench.dumps.formats import load_dump_formats
from workbench.dumps.layers import layer_numbers, layer_word
from workbench.native import library

PIECES = ["layers", "layers", "blocks", "blocks", "layer", "Layers", "xlayers", "0", "7", "12", "007", "9" * 30, "3x",
          "", "decoder", "mlp", "é", "٣", "\n"]
JOINS = [".", ".", ".", ".", "", "x"]


def _paths(rng: random.Random, count: int, ascii_only: bool) -> list[str]:
    pieces = [p for p in PIECES if p.isascii() and p != "\n"] if ascii_only else PIECES
    out = []
    for _ in range(count):
        path = rng.choice(pieces)
        for _ in range(rng.randrange(0, 7)):
            path += rng.choice(JOINS) + rng.choice(pieces)
        out.append(path)
    return out


def _with_pattern(pattern: str, flags: int = 0):
    return dataclasses.replace(load_dump_formats(), layer_pattern=re.compile(pattern, flags))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pattern", [r"(?:^|\.)layers\.(\d+)(?:\.|$)", r"(?:^|\.)blocks\.(\d+)(?:\.|$)"])
def test_numbers_equal_one_search_per_path(seed, pattern, monkeypatch):
    fmt = _with_pattern(pattern)
    rng = random.Random(seed)
    paths = _paths(rng, 3000, ascii_only=seed % 2 == 0)
    expected = [fmt.layer(path) if path else None for path in paths]
    used = []
    compiled = layers._compiled
    monkeypatch.setattr(layers, "_compiled", lambda *a: used.append(compiled(*a)) or used[-1])
    assert layer_numbers(paths, fmt) == expected
    if library("dumpscan") is not None:
        assert (used[0] is not None) == (seed % 2 == 0)              # non-ASCII or a newline: one by one
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    assert layer_numbers(paths, fmt) == expected


def test_other_forms_and_flags_are_searched_one_by_one():
    assert layer_word(load_dump_formats().layer_pattern) == "layers"
    for pattern, flags in ((r"(?:^|\.)layers\.(\d+)(?:\.|$)", re.IGNORECASE), (r"layers\.(\d+)", 0),
                           (r"(?:^|\.)lay.rs\.(\d+)(?:\.|$)", 0), (r"(?:^|\.)layers\.(\d+)(?:\.|$)", re.MULTILINE),
                           (r"(?:^|\.)layers\.([0-9]+)(?:\.|$)", 0)):
        fmt = _with_pattern(pattern, flags)
        assert layer_word(fmt.layer_pattern) is None
        paths = ["LAYERS.3", "layers.4", "a.layers.5.b", "layers.6\n"]
        assert layer_numbers(paths, fmt) == [fmt.layer(p) for p in paths]


def test_paths_not_all_text_are_read_one_by_one():
    fmt = load_dump_formats()
    assert layer_numbers(["layers.1", None, ""], fmt) == [1, None, None]
    assert layer_numbers([], fmt) == []


@pytest.mark.skipif(library("dumpscan") is None, reason="the dumpscan library is not built")
def test_compiled_layers_refuse_spans_outside_the_text():
    scanner = library("dumpscan")
    scanner.dumpscan_layers.restype = ctypes.c_int64
    text, word = b"layers.3", b"layers"
    out = np.zeros(1, np.int64)
    p = ctypes.POINTER(ctypes.c_int64)
    for spans in ([0, 9], [-1, 2], [8, 1], [0, -1]):
        rows = np.array(spans, np.int64)
        assert scanner.dumpscan_layers(text, ctypes.c_int64(len(text)), rows.ctypes.data_as(p), ctypes.c_int64(1),
                                       word, ctypes.c_int64(len(word)), out.ctypes.data_as(p)) == -1
    rows = np.array([0, 8], np.int64)
    assert scanner.dumpscan_layers(text, ctypes.c_int64(len(text)), rows.ctypes.data_as(p), ctypes.c_int64(1),
                                   word, ctypes.c_int64(0), out.ctypes.data_as(p)) == -1       # no word
    assert scanner.dumpscan_layers(text, ctypes.c_int64(len(text)), rows.ctypes.data_as(p), ctypes.c_int64(1),
                                   word, ctypes.c_int64(len(word)), out.ctypes.data_as(p)) == 0 and out[0] == 3
