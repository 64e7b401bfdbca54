"""The compiled Megatron scan's last-line memo (``same_line`` in ``workbench/native/logmemo.h``: a line
of the last one's length that differs from it only inside numbers reads only those numbers again),
its rows' one allocation (``megatron_native.block``) and ``_interval``'s piecewise check, against the
Python paths (``WORKBENCH_NATIVE=0`` and the exact per-line parser), values bit for bit."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import workbench.logs.lines as lines
from workbench.logs import megatron_native
from workbench.logs.formats import load_formats
from workbench.logs.logscan import library
from workbench.logs.megatron import _interval, read_megatron

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_logs_native import three_ways  # noqa: E402

native = pytest.mark.skipif(library() is None, reason="the compiled log scanner is not built, or WORKBENCH_NATIVE=0")
LINE = (b" [2025-01-01 12:00:00] iteration        7/     100 | consumed samples:          512 | lm loss: 1.000126E+01 "
        b"| loss scale: 1.0 | grad norm: 2.000 | num zeros: 0 | params norm: 123.456 | number of nan iterations: nan |")
BYTES = [b"0", b"7", b"9", b".", b"e", b"E", b"-", b"+", b" ", b"\t", b"|", b":", b"x", b"n", b"a", b"\x00"]
# (not b"\xff": the non-UTF-8 note counts the chunks holding such bytes, which differ between the paths'
# chunk sizes on a file over 1 MiB; tests/test_logs_native.py tests those bytes in lines like these)


@native
def test_every_byte_of_a_line_changed_in_place_reads_the_same(tmp_path, monkeypatch):
    """Each line below has the last one's length and differs from it in one byte (in a number, at its
    edge, between numbers, in a key), then the intact line again: the memo takes the ones that are
    numbers ending where the last one's did, every other goes the template or field-by-field way."""
    out = [LINE, LINE]
    start = LINE.index(b"|")
    for at in range(start, len(LINE)):
        for byte in BYTES:
            out += [LINE[:at] + byte + LINE[at + 1:], LINE]
    path = tmp_path / "in_place.log"
    path.write_bytes(b"\n".join(out) + b"\n")
    three_ways(monkeypatch, path, "megatron")


@native
def test_chains_of_lines_each_changed_from_the_one_before(tmp_path, monkeypatch):
    """Random same-length changes that build on each other (the memo's bytes and values follow the last
    line taken: a number read again must stay consistent with the next lines), several bytes a line,
    with chunk seams inside the chains."""
    rng = np.random.default_rng(9)
    start = LINE.index(b"|")
    for round_ in range(6):
        out, line = [], bytearray(LINE)
        for _ in range(300):
            for _ in range(int(rng.integers(1, 4))):
                at = int(rng.integers(start, len(line)))
                if rng.random() < 0.3:                             # any byte: mostly not a number's
                    line[at] = BYTES[int(rng.integers(len(BYTES)))][0]
                elif chr(line[at]).isdigit():                      # a digit for a digit: the memo's case
                    line[at] = b"0123456789"[int(rng.integers(10))]
            out.append(bytes(line))
            if rng.random() < 0.05:
                line = bytearray(LINE)
        path = tmp_path / f"chain{round_}.log"
        path.write_bytes(b"\n".join(out) + b"\n")
        monkeypatch.setattr(lines, "CHUNK", 4096)
        three_ways(monkeypatch, path, "megatron")


@native
def test_numbers_that_change_length_or_form_in_place(tmp_path, monkeypatch):
    """Same-length lines whose numbers change form (a digit to a point or an exponent, 'nan' to digits,
    a sign) or would have to be read past where the last one ended ('1.0' then '1.0e', '2.000' then
    '2.0e1'): read as the exact parser reads them."""
    pairs = [(b"1.0 |", b"1.0e|"), (b"1.0 |", b"1e0 |"), (b"1.0 |", b"-10 |"), (b"1.0 |", b"nan |"),
             (b"2.000 |", b"2.0e1 |"), (b"2.000 |", b"2.0E+1|"), (b"2.000 |", b"2000. |"), (b"nan |", b"1.5 |"),
             (b"nan |", b"nanx|"), (b"0 |", b"- |"), (b"512 |", b"5 2 |"), (b"123.456 |", b"123.45e |"),
             (b"123.456 |", b"1e-4567 |"), (b"1.000126E+01 |", b"1.000126E+0| |")]
    out = [LINE]
    for old, new in pairs:
        assert len(old) == len(new) and old in LINE
        out += [LINE.replace(old, new, 1), LINE, LINE.replace(old, new, 1), LINE.replace(old, new, 1)]
    path = tmp_path / "forms.log"
    path.write_bytes(b"\n".join(out) + b"\n")
    three_ways(monkeypatch, path, "megatron")
    got = read_megatron(path, load_formats()["megatron"]).series
    assert len(got) and got["line"].is_monotonic_increasing


def test_the_rows_block_is_aligned_and_its_arrays_apart():
    for capacity in (1, 1000, 3_000_000):
        arrays = megatron_native.block(capacity, (np.float64, np.int32, np.int8, np.int64))
        assert [len(array) for array in arrays] == [capacity] * 4
        assert all(array.ctypes.data % 64 == 0 for array in arrays)
        if capacity == 3_000_000:
            assert arrays[0].ctypes.data % megatron_native.HUGE == 0
        for index, array in enumerate(arrays):
            array[:] = index + 1
        assert [int(array[0]) for array in arrays] == [1, 2, 3, 4] and [int(array[-1]) for array in arrays] == [1, 2, 3, 4]
        assert all(array.base is arrays[0].base for array in arrays)


@pytest.mark.parametrize("iterations,want", [
    (list(range(1, 60, 2)), 2), ([5], 1), ([], 1), (list(range(10, 100, 10)) + [95], 10),
    (list(range(0, 40)) + [40, 41, 43] + list(range(44, 60)), 1), ([3, 1, 2], 1), ([1, 1, 1], 1),
    ([10, 20, 30, 50, 70, 90], 20)])
def test_the_log_interval_piece_by_piece(monkeypatch, iterations, want):
    """The in-order check goes a piece at a time: a break at or across a piece's edge is still seen."""
    import workbench.logs.megatron as megatron

    array = np.array(iterations, dtype=np.int64)
    whole = _interval(array)
    for piece in (1, 2, 3, 7, 8192):
        monkeypatch.setattr(megatron._evenly, "__defaults__", (piece,))
        assert _interval(array) == whole == want


@native
def test_heads_that_differ_digit_for_digit_or_not(tmp_path, monkeypatch):
    """A line whose start (up to its first '|' after "iteration N/ T") is the last templated line's but
    digit for digit takes that head's '|', needles and ASCII check (its rank and iteration are read
    again); any other difference, or digits that make a number C hands back, goes the whole way."""
    body = LINE[LINE.index(b"|"):]
    heads = [b" [2025-01-01 12:00:00] iteration        7/     100 ", b" [2025-01-01 12:00:01] iteration        8/     100 ",
             b" [2025-01-01 12:59:59] iteration     9999/     999 ", b"[default1]: iteration        7/     100 ",
             b"[default2]: iteration        8/     100 ", b"[default9]: iteration 2147483646/ 100 ",
             b"[default9]: iteration 9147483646/ 100 ", b"[default9]: iteration 2147483647/ 100 ",
             b"3: iteration        7/     100 ", b"9: iteration        8/     100 ", b"9x iteration        8/     100 ",
             b"tensor(1) iteration        7/     100 ", b"tensor(2) iteration        8/     100 ",
             b"tensor[2] iteration        8/     100 ", b"local_norm/1 iteration 7/ 100 ", b"local_norm/2 iteration 8/ 100 ",
             b" [2025-01-01 12:00:00] iteratiom        7/     100 ", b" [2025-01-01 12:00:00] iteration        7/     10| ",
             b" [2025-01-01 12:00:00] iteration        7/     100|", b" [2025-01-01 12:00:00] iteration        7 /    100 ",
             b"\xc3\xa9[2025-01-01 12:00:00] iteration        7/     100 ", b"\xc3\xa9[2025-01-01 12:00:00] iteration        8/     100 ",
             b" [2025-01-01 12:00:00] iteration        7/     100 "]
    out = []
    for first in heads:
        for second in heads:
            out += [first + body, first + body, second + body]
    path = tmp_path / "heads.log"
    path.write_bytes(b"\n".join(out) + b"\n")
    three_ways(monkeypatch, path, "megatron")


def test_the_non_utf8_note_counts_lines_at_every_chunk_size(tmp_path, monkeypatch):
    """Every line with bytes that are not UTF-8 is counted once (iteration lines, named local norms,
    others; several bad bytes in one line; the last line without its newline), whatever the chunk size:
    it counted a chunk's first such line only, so the compiled scan's 1 MiB chunks and the Python
    path's 8 MiB ones disagreed on a file over 1 MiB."""
    from workbench.logs.lines import bad_lines

    good = LINE + b"\n"
    bad = [LINE.replace(b"lm loss", b"lm \xff\xfeloss"), b"local_norm/w\xe9: 1.0E+00", b"junk \xc3 and \xc3",
           LINE.replace(b" [2025", b"\xff[2025"), b"\xe9\xe9"]
    body = b"".join(good * 3 + line + b"\n" for line in bad) * 40 + good * 3 + b"tail \xff"
    want = [1 + index * 4 + 3 for index in range(len(bad) * 40)] + [len(bad) * 40 * 4 + 4]
    found: list[int] = []
    bad_lines(body, 1, found)
    assert found == want
    path = tmp_path / "bad.log"
    path.write_bytes(body)
    for chunk in (1 << 20, 4096, 333):
        monkeypatch.setattr(lines, "CHUNK", chunk)
        three_ways(monkeypatch, path, "megatron")
        note = [note for note in read_megatron(path, load_formats()["megatron"]).notes if "not UTF-8" in note]
        assert note == [f"{len(want)} line(s) with bytes that are not UTF-8 read with U+FFFD in their place (first: line 4)"]
