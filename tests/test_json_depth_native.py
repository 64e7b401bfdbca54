"""JSON nesting depth in one compiled pass (``workbench/native/jsondepth.h`` through
``workbench.input_files.json_depth``) held to the Python count on fuzzed bytes (escapes, runs of backslashes,
unterminated strings, unbalanced brackets, non-UTF-8 bytes), on JSON documents long enough to take it, and at the
edges; errors of ``parse_json`` unchanged in kind and order."""
from __future__ import annotations

import ctypes
import json
import random

import pytest

from workbench import input_files
from workbench.errors import InputError
from workbench.input_files import json_depth, parse_json
from workbench.native import library

pytestmark = pytest.mark.skipif(library("dumpscan") is None,
                                reason="the dumpscan library is not built (python workbench/native/build.py)")


def _compiled(data: bytes) -> int:
    function = library("dumpscan").dumpscan_json_depth
    function.restype = ctypes.c_int64
    return function(ctypes.c_char_p(data), ctypes.c_int64(len(data)))


def _plain(data, monkeypatch) -> int:
    with monkeypatch.context() as patched:
        patched.setenv("WORKBENCH_NATIVE", "0")
        return json_depth(data)


def test_fuzzed_bytes_equal_the_python_count(monkeypatch):
    rng = random.Random(7)
    for size in [0, 1, 2, 3, 5, 9, 30, 200] * 400 + [60_000, 120_000] * 10:
        data = bytes(rng.choice(b'\\\\\\"[[]{}a\xff') for _ in range(size))
        assert _compiled(data) == _plain(data, monkeypatch), data[:200]


def test_long_documents_take_it_and_agree(monkeypatch):
    rng = random.Random(3)
    for _ in range(20):
        value = {f"k{i}\\\"[": [[{"x": "]]\\\\", "y": [i] * rng.randint(0, 30)}]] * rng.randint(1, 5)
                 for i in range(rng.randint(500, 3000))}
        text = json.dumps(value) + rng.choice(["", "[[", '"[[[', "]]"])
        assert len(text) > input_files._FEW_MARKS
        assert json_depth(text) == json_depth(text.encode()) == _plain(text, monkeypatch) == _compiled(text.encode())


def test_edges():
    assert _compiled(b"") == 0 and _compiled(b"]]]") == 0 and _compiled(b"[" * 70_000) == 70_000
    assert _compiled(b'"unterminated [[') == 2 and _compiled(b'"a" "[[') == 2 and _compiled(b'"\\" [[') == 2
    assert _compiled(b'"\\\\" [[') == 2 and _compiled(b'"\\\\\\" [[') == 2 and _compiled(b'"x" [[ "y"') == 2
    assert _compiled(b"[") == 1 and _compiled(b"x") == 0
    assert library("dumpscan").dumpscan_json_depth(b"[", ctypes.c_int64(-1)) == -1


def test_parse_json_errors_keep_their_order(monkeypatch):
    deep = b'{"a": ' + b"[" * 60_000 + b"]" * 60_000 + b"}"
    for native in ("1", "0"):
        monkeypatch.setenv("WORKBENCH_NATIVE", native)
        with pytest.raises(InputError, match="nests 60001 levels deep"):
            parse_json(deep, "x.json")
        with pytest.raises(InputError, match="not UTF-8"):                     # decoding is checked first
            parse_json(b"[" * 60_000 + b"\xff", "x.json")
        assert parse_json(b'{"a": [1, "[["]}' + b" " * 60_000, "x.json") == {"a": [1, "[["]}
