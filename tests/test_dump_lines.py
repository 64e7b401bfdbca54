"""Strings as lines of one buffer (``workbench/dumps/msprobe_lines.py``, ``workbench/native/dumplines.h``) held to
the same strings made one by one: spans of UTF-8 bytes (non-ASCII included), row names of three pieces, random
layouts; and hostile pieces (outside their source, a bad source, negative lengths, a buffer of the wrong size, a
newline in the extra bytes) refused without writing past the buffer."""
from __future__ import annotations

import ctypes
import random

import numpy as np
import pytest

from workbench.dumps import msprobe_lines
from workbench.dumps.msprobe_lines import EXTRA, TEXT, lines, row_names, spans
from workbench.native import library

pytestmark = pytest.mark.skipif(library("dumpscan") is None,
                                reason="the dumpscan library is not built (python workbench/native/build.py)")
WORDS = ["Tensor.pow.0.forward", "Module.a.b.Linear.forward.3", "é", "ü.ß", "x", "", "数据.1.backward", "a b"]


def _raw(rng: random.Random) -> tuple[bytes, list[tuple[int, int]]]:
    """JSON-like bytes and the (offset, length) of each quoted word in them."""
    raw, found = bytearray(b"{"), []
    for _ in range(rng.randint(0, 300)):
        word = rng.choice(WORDS).encode("utf-8")
        raw += b'"'
        found.append((len(raw), len(word)))
        raw += word + b'": 1, '
    return bytes(raw + b"}"), found


def test_spans_equal_decoding_each():
    rng = random.Random(3)
    for _ in range(50):
        raw, found = _raw(rng)
        array = np.array(found, np.int64).reshape(-1, 2)
        assert spans(raw, array) == [raw[o:o + n].decode("utf-8") for o, n in found]


def test_row_names_equal_concatenation():
    rng = random.Random(5)
    for _ in range(50):
        raw, found = _raw(rng)
        if not found:
            continue
        names = [raw[o:o + n].decode("utf-8") for o, n in found]
        middles = [".input.", ".output.", ".parameters.", ".ü."]
        tails = [str(i) for i in range(rng.randint(1, 40))]
        size = rng.randint(0, 500)
        entry = np.array([rng.randrange(len(found)) for _ in range(size)], np.int64)
        middle = np.array([rng.randrange(len(middles)) for _ in range(size)], np.int64)
        tail = np.array([rng.randrange(len(tails)) for _ in range(size)], np.int64)
        got = row_names(raw, np.array(found, np.int64), entry, middles, middle, tails, tail)
        assert got == [names[e] + middles[m] + tails[t] for e, m, t in zip(entry, middle, tail, strict=True)]


def test_without_the_library_the_caller_decides(monkeypatch):
    monkeypatch.setattr(msprobe_lines, "library", lambda name: None)
    assert spans(b'"ab"', np.array([[1, 2]], np.int64)) is None
    assert row_names(b'"ab"', np.array([[1, 2]], np.int64), np.zeros(1, np.int64), ["."], np.zeros(1, np.int64),
                     ["0"], np.zeros(1, np.int64)) is None


def test_hostile_pieces_are_refused():
    raw, extra = b'{"abc": 1}', b".x."
    items = np.array([[TEXT, 2, 3], [EXTRA, 0, 3]], np.int64)
    index = np.array([[0, 1], [1, 0]], np.int64)
    assert lines(raw, extra, items, index) == ["abc.x.", ".x.abc"] and lines(raw, extra, items) == ["abc", ".x."]
    for source, offset, length in [(2, 0, 1), (-1, 0, 1), (TEXT, -1, 2), (TEXT, 0, -1), (TEXT, 9, 2),
                                   (TEXT, 11, 0), (EXTRA, 3, 1), (EXTRA, 1 << 62, 1 << 62), (TEXT, 2, 1 << 62)]:
        bad = items.copy()
        bad[1] = source, offset, length
        assert lines(raw, extra, bad, index) is None and lines(raw, extra, bad) is None, (source, offset, length)
    for bad_index in ([[0, 2]], [[-1, 0]], [[0, 1 << 62]]):
        assert lines(raw, extra, items, np.array(bad_index, np.int64)) is None, bad_index
    assert lines(raw, b".\n.", items, index) is None                      # a newline would split a string
    assert lines(raw, extra, items[:, :2]) is None and lines(raw, extra, items[0]) is None
    assert lines(raw, extra, items, index[0]) is None and lines(raw, extra, items, index[:, :0]) is None
    assert lines(raw, extra, items[:0]) == [] and lines(raw, extra, items, index[:0]) == []
    assert lines(b'"\xc3"', b"", np.array([[TEXT, 1, 1]], np.int64)) is None   # half a character


def _call(raw: bytes, items, index, nlines: int, per_line: int, out: bytearray, size: int) -> int:
    scanner = library("dumpscan")
    scanner.dumpscan_lines.restype = ctypes.c_int64
    pointer = ctypes.POINTER(ctypes.c_int64)
    return scanner.dumpscan_lines(raw, ctypes.c_int64(len(raw)), b"", ctypes.c_int64(0), items.ctypes.data_as(pointer),
                                  ctypes.c_int64(len(items)), None if index is None else index.ctypes.data_as(pointer),
                                  ctypes.c_int64(nlines), ctypes.c_int64(per_line),
                                  (ctypes.c_char * len(out)).from_buffer(out), ctypes.c_int64(size))


def test_the_buffer_is_filled_exactly_or_refused():
    raw = b"abcdef"
    items = np.array([[TEXT, 0, 3], [TEXT, 3, 3]], np.int64)
    index = np.array([[0, 1], [1, 1]], np.int64)
    for size, expected in [(8, 8), (7, -1), (9, -1), (0, -1)]:
        out = bytearray(size + 4)
        guard = bytes(out[size:])
        assert _call(raw, items, None, 2, 1, out, size) == expected and bytes(out[size:]) == guard
        if expected > 0:
            assert bytes(out[:size]) == b"abc\ndef\n"
    out = bytearray(14)
    assert _call(raw, items, index, 2, 2, out, 14) == 14 and bytes(out) == b"abcdef\ndefdef\n"
    for nlines, per_line, with_index in [(-1, 1, False), (1, 0, True), (3, 1, False), (1, 2, False)]:
        assert _call(raw, items, index if with_index else None, nlines, per_line, bytearray(8), 8) == -1
    assert _call(raw, items, np.array([[0, 2]], np.int64), 1, 2, bytearray(8), 7) == -1      # index past the items


def test_packed_lines_are_the_strings_packed():
    """The strings packed a line each, made strs only where picked (any rows, in any order), or all at once."""
    rng = random.Random(9)
    for _ in range(30):
        raw, found = _raw(rng)
        array = np.array(found, np.int64).reshape(-1, 2)
        names = msprobe_lines.packed_lines(raw, array)
        strings = spans(raw, array)
        joined, expected = msprobe_lines.packed(strings, array[:, 1])
        assert names.rows.tolist() == expected.tolist() and names.text == (joined + b"\n" if strings else b"")
        rows = [rng.randrange(len(strings)) for _ in range(rng.randint(0, 20))] if strings else []
        assert msprobe_lines.pick(names, rows) == [strings[i] for i in rows] == msprobe_lines.pick(strings, rows)
        assert msprobe_lines.as_list(names) == strings and msprobe_lines.pick(names, rows) == [strings[i] for i in rows]
