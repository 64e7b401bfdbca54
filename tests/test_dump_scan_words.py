"""The dump.json scanner's word-at-a-time steps (``workbench/native/dumpjson.h``): a string's plain run skipped 8
bytes at a time up to a quote, a backslash or a control character, and spellings interned by a hash of 8-byte
words. The end of a string must be found wherever its special byte sits in a word, near the end of the bytes too,
and spellings that share whole words must stay apart: each read here is held to the Python reader's (the table, or
the same one-line error), in dump.json and in stack.json's lines."""
from __future__ import annotations

import json

import pytest

from test_dump_native import TENSOR, _dump, _read, _same
from test_dump_read_fast import DATA, _both, _unit
from workbench.native import library

pytestmark = pytest.mark.skipif(library("dumpscan") is None,
                                reason="the dumpscan library is not built (python workbench/native/build.py)")

# an escaped quote, an escaped backslash, a \u escape, a raw tab (invalid JSON), two-byte UTF-8, DEL (plain)
SPECIALS = ['\\"', "\\\\", "\\u00e9", "\t", "é", "\x7f"]


def _record_text(dtype: str, name: str = "Tensor.add.0.forward") -> str:
    """A dump.json text with one record, its dtype and entry name written as given (escapes kept)."""
    record = json.dumps(TENSOR).replace('"torch.float32"', f'"{dtype}"')
    return '{"data": {"%s": {"output": [%s]}}}' % (name, record)


@pytest.mark.parametrize("special", SPECIALS)
def test_a_special_byte_at_each_place_of_a_word(special, tmp_path, monkeypatch):
    for at in range(18):
        spelling = "a" * at + special + "b" * (17 - at)
        for where, text in (("dtype", _record_text(spelling)), ("name", _record_text("x", f"Tensor.{spelling}.0.forward"))):
            path = _dump(tmp_path / f"{where}{at}", None, text)
            plain = special in ("é", "\x7f")
            kind, found = _same(_read(path), monkeypatch, expect_native=plain or None)  # the columns, or the error
            if plain:                            # plain bytes: read by the scan, kept whole
                column = found["dtype"] if where == "dtype" else found["name"]
                assert kind == "table" and spelling in column[0]


@pytest.mark.parametrize("length", [0, 1, 7, 8, 9, 15, 16, 17, 24])
def test_plain_strings_of_every_length_and_cut_near_the_end(length, tmp_path, monkeypatch):
    spelling = "".join(chr(ord("a") + k % 26) for k in range(length))
    text = _record_text(spelling)[:-1] + ', "tail": "%s"}' % spelling
    kind, table = _same(_read(_dump(tmp_path / "whole", None, text)), monkeypatch, expect_native=True)
    assert kind == "table" and table["dtype"][0] == spelling
    for cut in range(1, min(len(text), 40)):                       # inside the last strings, the closing braces
        kind, message = _same(_read(_dump(tmp_path / f"cut{cut}", None, text[:-cut])), monkeypatch)
        assert kind == "error" and "\n" not in message


def test_spellings_sharing_words_stay_apart(tmp_path, monkeypatch):
    """2000 records whose dtype, md5 and shape spellings share their first 8 or 16 bytes and differ in one byte of
    a later word or of the tail (the hash only spreads them; equality is decided by the bytes)."""
    records = [dict(TENSOR, dtype=f"torch.float{k % 97:02d}", md5=f"{'0' * 16}{k:016x}"[:16 + 1 + k % 16],
                    shape=[1, 4096, k % 300]) for k in range(2000)]
    data = {f"Tensor.add.{k}.forward": {"output": records[k * 20:(k + 1) * 20]} for k in range(100)}
    kind, columns = _same(_read(_dump(tmp_path, data)), monkeypatch, expect_native=True)
    assert kind == "table" and len(columns["name"]) == 2000
    assert len(set(columns["dtype"])) == 97 and len(set(columns["shape"])) == 300
    assert list(columns["md5"]) == [r["md5"] for r in records]


@pytest.mark.parametrize("special", SPECIALS)
def test_stack_lines_with_a_special_byte_at_each_place(special, tmp_path, monkeypatch):
    lines = ["a" * at + special + "b" * (17 - at) for at in range(18)]
    stack = '{"0": [["Functional.linear.0.forward"], [%s]]}' % ", ".join(f'"{line}"' for line in lines)
    kind, table = _both(_unit(tmp_path, DATA, stack=stack), monkeypatch)
    if special != "\t":                                             # a raw control character: json's error
        assert kind == "table" and table.set_index("name")["stack_id"]["Functional.linear.0.forward.input.0"] == "0"
