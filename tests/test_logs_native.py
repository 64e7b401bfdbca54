"""The compiled log scanner (``workbench/native/logscan.c``) against the Python paths: the same tables
(values bit for bit), notes, facts and errors as with ``WORKBENCH_NATIVE=0`` and as the exact per-line
parsers, on every field form, chunk boundaries inside records, CRLF, no final newline, hostile bytes,
and a few thousand random mutations of real lines. Skipped when the library is not built."""
from __future__ import annotations

import math
import struct
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import workbench.logs.lines as lines
from workbench.errors import InputError
from workbench.logs import read_log
from workbench.logs.formats import load_formats
from workbench.logs.logscan import library, mf_library
from workbench.logs.megatron import read_megatron
from workbench.logs.mindformers import read_mindformers
from workbench.reference.mindformers_log import format_local_norm_message, format_loss_message, line_prefix

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_modules import load_benchmark  # noqa: E402
from test_logs_fastpath import megatron_log, mindformers_log  # noqa: E402

pytestmark = pytest.mark.skipif(library() is None or mf_library() is None, reason="the compiled log scanners are not built "
                                "(python workbench/native/build.py), or WORKBENCH_NATIVE=0")
CHUNKS = (8 << 20, 4096, 333)


def bits(value: float) -> bytes:
    return struct.pack("<d", value)


def outcome(read, path: Path, fmt: str, **kwargs):
    """What a reader gives: its tables and what it said, or the error it raised (type and text)."""
    try:
        got = read(path, load_formats()[fmt], **kwargs)
    except InputError as error:
        return ("error", str(error))
    return got


def assert_same(got, want) -> None:
    if isinstance(want, tuple) or isinstance(got, tuple):
        assert got == want
        return
    pd.testing.assert_frame_equal(got.series, want.series, check_exact=True)
    pd.testing.assert_frame_equal(got.local_norms, want.local_norms, check_exact=True)
    assert [bits(v) for v in got.series["value"] if v == v] == [bits(v) for v in want.series["value"] if v == v]
    assert (got.notes, got.facts, got.param_order) == (want.notes, want.facts, want.param_order)


def three_ways(monkeypatch, path: Path, fmt: str) -> None:
    """Native == WORKBENCH_NATIVE=0 (numpy fast path) == the exact per-line parser."""
    reader = read_megatron if fmt == "megatron" else read_mindformers
    native = outcome(reader, path, fmt)
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    try:
        python = outcome(reader, path, fmt)
        exact = outcome(reader, path, fmt, fast=False)
    finally:
        monkeypatch.delenv("WORKBENCH_NATIVE")
    assert_same(native, python)
    assert_same(native, exact)


# ------------------------------------------------------------- every field form, chunk seams ---------

@pytest.mark.parametrize("newline,final", [("\n", True), ("\r\n", True), ("\n", False)])
def test_every_field_form_at_every_chunk_size(tmp_path, monkeypatch, newline, final):
    for fmt, data in (("megatron", megatron_log(newline, final)), ("mindformers", mindformers_log(newline, final))):
        path = tmp_path / f"{fmt}.log"
        path.write_bytes(data)
        for chunk in CHUNKS:
            monkeypatch.setattr(lines, "CHUNK", chunk)
            three_ways(monkeypatch, path, fmt)


def test_the_benchmark_logs_read_the_same(tmp_path, monkeypatch):
    benchmark = load_benchmark("logs")
    benchmark.write_megatron(tmp_path / "megatron.log", 3000)
    benchmark.write_mindformers(tmp_path / "mindformers.log", 6, 1000)
    monkeypatch.setattr(lines, "CHUNK", 100_000)
    three_ways(monkeypatch, tmp_path / "megatron.log", "megatron")
    three_ways(monkeypatch, tmp_path / "mindformers.log", "mindformers")
    assert len(read_log(tmp_path / "megatron.log").series) == 3000 * 13


def test_plain_lines_never_reach_python(tmp_path, monkeypatch):
    """Spies (the real functions run) show the compiled scanner reads plain lines itself: no iteration
    line goes to the Python line parser, no array to the Python block parser."""
    import workbench.logs.megatron as megatron
    import workbench.logs.mindformers_scan as scan

    calls = {"line": 0, "block": 0}
    slow_line, fast_block_python = megatron._slow_line, scan.NOT_ARRAY_LINE

    def counted_line(*args):
        calls["line"] += 1
        return slow_line(*args)

    class Counted:
        def search(self, body):
            calls["block"] += 1
            return fast_block_python.search(body)
    monkeypatch.setattr(megatron, "_slow_line", counted_line)
    monkeypatch.setattr(scan, "NOT_ARRAY_LINE", Counted())
    path = tmp_path / "meg.log"
    path.write_bytes(megatron_log().split(b"\n(min")[0] + b"\n")
    assert len(read_megatron(path, load_formats()["megatron"]).series) > 50 and calls["line"] == 0
    mf = tmp_path / "mf.log"
    prefix = line_prefix()
    mf.write_text("\n".join(prefix + format_local_norm_message([4] * 1000, np.random.default_rng(step).random(
        1000, dtype=np.float32)) + "\n" + prefix + format_loss_message(1, 1, step, 5, 1.0, 10, 1e-5, 1.0)
        for step in range(1, 6)) + "\n")
    assert len(read_mindformers(mf, load_formats()["mindformers"]).local_norms) == 5000 and calls["block"] == 0


def test_mindformers_chunks_end_before_a_block(tmp_path, monkeypatch):
    """With the compiled scan, a MindFormers chunk ends before the last norm_size line it holds: every
    chunk after the first starts with one, no block is cut by a seam (none reaches the Python block
    parser, whose spy counts them) and the tables are the exact parser's. A block longer than the chunk
    is cut as before (the 333-byte chunks of test_every_field_form_at_every_chunk_size)."""
    import workbench.logs.mindformers as mindformers
    import workbench.logs.mindformers_scan as scan

    calls, starts, spans = {"block": 0}, [], mindformers.spans
    not_array = scan.NOT_ARRAY_LINE

    class Counted:
        def search(self, body):
            calls["block"] += 1
            return not_array.search(body)

    def recorded(*args, **kwargs):
        for first, data, size in spans(*args, **kwargs):
            starts.append(bytes(data[:data.find(b"\n")]))
            yield first, data, size
    monkeypatch.setattr(scan, "NOT_ARRAY_LINE", Counted())
    monkeypatch.setattr(mindformers, "spans", recorded)
    monkeypatch.setattr(lines, "CHUNK", 4096)                             # about five blocks a chunk
    prefix, rng = line_prefix(), np.random.default_rng(0)
    path = tmp_path / "mf.log"
    path.write_text("".join(prefix + format_local_norm_message([4] * 40, rng.random(40, dtype=np.float32)) + "\n"
                            + prefix + format_loss_message(1, 1, step, 60, 1.0, 10, 1e-5, 1.0) + "\n"
                            for step in range(1, 61)))
    got = read_mindformers(path, load_formats()["mindformers"])
    assert len(got.local_norms) == 2400 and set(got.local_norms["step"]) == set(range(1, 61))
    assert len(starts) > 10 and all(b"norm_size:" in start for start in starts) and calls["block"] == 0
    monkeypatch.setattr(mindformers, "spans", spans)
    three_ways(monkeypatch, path, "mindformers")


def test_mindformers_values_over_several_arrays(tmp_path, monkeypatch):
    """Blocks whose values C wrote into several arrays (a long log: a fresh array when one is full)
    make one table equal to the exact parser's (the values copied into one column)."""
    import workbench.logs.mindformers_native as mindformers_native

    monkeypatch.setattr(mindformers_native, "HUGE", 0)                    # an array holds ~8 blocks
    monkeypatch.setattr(lines, "CHUNK", 4096)
    prefix, rng = line_prefix(), np.random.default_rng(1)
    path = tmp_path / "mf.log"
    path.write_text("".join(prefix + format_local_norm_message([4] * 40, rng.random(40, dtype=np.float32)) + "\n"
                            + prefix + format_loss_message(1, 1, step, 60, 1.0, 10, 1e-5, 1.0) + "\n"
                            for step in range(1, 61)))
    assert len(read_mindformers(path, load_formats()["mindformers"]).local_norms) == 2400
    three_ways(monkeypatch, path, "mindformers")


# ------------------------------------------------------------- numbers, bit for bit -----------------

NUMBERS = ["0", "-0.0", "+7", "1.", ".5", "5e3", "1E+05", "1e22", "9e22", "1e23", "1e-22", "1e-23",
           "9007199254740993", "123456789012345678", "0.1", "0.30000000000000004", "2.2250738585072011e-308",
           "4.9e-324", "2.4703282292062327e-324", "1.7976931348623157e308", "1e999", "-1e999", "1e-999",
           "1" * 400, "0." + "0" * 380 + "1", "1" * 200 + "." + "9" * 200, "nan", "000000000000000000000001.5",
           "1.000126E+01", "9.999950E-06", "123.456", "  1234.5", "1e0000000000000000000005"]


def test_numbers_are_float_bit_for_bit(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    printed = list(NUMBERS)
    for form in ("%.6E", "%.3f", "%.17g", "%.15e", "%.20f", "%.1f", "%+.9e", "%d"):
        values = rng.normal(0, 10.0 ** rng.integers(-30, 30, 300))
        printed += [form % (int(v) if form == "%d" else v) for v in values]
    path = tmp_path / "numbers.log"
    path.write_text("".join(f" iteration {i:8d}/ 9999 | lm loss: {text} | grad norm: {text} |\n"
                            for i, text in enumerate(printed, start=1)))
    got = read_megatron(path, load_formats()["megatron"]).series
    values = got[got["metric"] == "lm_loss"]["value"].tolist()
    want = [float(text) for text in printed]
    assert [bits(v) for v in values if v == v] == [bits(v) for v in want if v == v]
    assert [math.isnan(v) for v in values] == [math.isnan(v) for v in want]
    three_ways(monkeypatch, path, "megatron")


def test_digit_runs_of_every_length_and_alignment(tmp_path, monkeypatch):
    """Digits are read eight at a time: runs of 0 to 24 digits before and after the point, shifted
    by 0 to 7 bytes, with an exponent or not, a byte above 0xF9 or a blank right after them."""
    printed, rng = [], np.random.default_rng(3)
    for whole in range(0, 25):
        for fraction in (0, 1, 7, 8, 9, 16):
            digits = "".join(rng.choice(list("0123456789"), whole + fraction))
            text = digits[:whole] + ("." + digits[whole:] if fraction else "")
            if text.strip(".") and text != ".":
                printed += [text, text + "e-7", text + "E+03"]
    lines_ = [f" iteration {i:8d}/ 99999 |{' ' * (i % 8)}lm loss:{' ' * (i % 5)}{text} | grad norm: {text}|"
              for i, text in enumerate(printed, start=1)]
    odd = [b" iteration 9000/ 99999 | lm loss: 12\xfe34 | grad norm: 123456789\xfa |",
           b" iteration 9001/ 99999 | lm loss: 1234567\t| grad norm: 12345678\x0b|",
           b" iteration 9002/ 99999 | lm loss: 99999999|"]
    path = tmp_path / "digits.log"
    path.write_bytes("\n".join(lines_).encode() + b"\n" + b"\n".join(odd))
    got = read_megatron(path, load_formats()["megatron"]).series
    values = got[(got["metric"] == "lm_loss") & (got["line"] <= len(printed))]["value"].tolist()
    assert [bits(v) for v in values] == [bits(float(text)) for text in printed]
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        three_ways(monkeypatch, path, "megatron")


E_FORMS = ["1.23456789e-04", "9.99999999E+22", "1.00000000e+30", "1.00000000e+31", "4.94065646e-14",
           "4.94065646e-15", "1.23456789e-99", "1.23456789e+00", "0.00000000e+00", "1.23456789e04",
           "1.23456789e-045", "1.2345678xe-04", "1.23456789f-04", "1.23456789e*04", "12.3456789e-04",
           "1.234567891e-04", "1.2345678e-04", "-1.23456789e-04", "1.23456789e-04.5", "1.23456789e-0",
           "1.\xb2345678e-04", "8.5062423e-04", "1.5e-04", "1.50e+00", "3.0000e-01", "1.5e+23", "1.5e+24",
           "1.5e-21", "1.5e-22", "1.e-04", "1.5e-4", "1.5e-04e", "9.9999999e+29", "9.9999999e+30", "1.2E-05"]


def test_numpy_float32_forms_are_float_bit_for_bit(tmp_path, monkeypatch):
    """Arrays of numpy's float32 forms (``d.`` 1 to 8 digits ``e-dd``: read with word tests) and of
    forms one byte away from them (powers of ten at 10^22 and past it, a ninth digit, no digit, a sign,
    a shorter or longer exponent, the end of the array or of the file right after) read as float() reads
    them, three ways, every chunk size; the forms that are not numbers give the same error three ways."""
    def block(step: int, tokens: list[str]) -> str:
        body = "\n ".join(" ".join(tokens[i:i + 2]) for i in range(0, len(tokens), 2))
        return (f"{prefix} norm_size: {tuple([4] * len(tokens))}\nlocal_norm:\n[{body}]\n"
                f"{prefix}{format_loss_message(1, 1, step, 99, 1.0, 10, 1e-5, 1.0)}")

    prefix, blocks, want = line_prefix(), [], []
    for index, text in enumerate(E_FORMS):
        if _float_or_none(text) is None:
            path = tmp_path / f"bad{index}.log"
            path.write_bytes(block(1, [text, "1.50000000e-03"]).encode("latin-1"))
            three_ways(monkeypatch, path, "mindformers")
            continue
        for tokens in ([text, "1.50000000e-03", text], ["2.5e-03", text]):
            blocks.append(block(len(blocks) + 1, tokens))
            want += tokens
    path = tmp_path / "e8.log"
    path.write_bytes("\n".join(blocks).encode() + f"\n{prefix} norm_size: (4,)\nlocal_norm:\n[1.23456789e-04]".encode())
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        three_ways(monkeypatch, path, "mindformers")
    got = read_mindformers(path, load_formats()["mindformers"]).local_norms["value"].tolist()
    assert [bits(v) for v in got] == [bits(float(token)) for token in want] + [bits(1.23456789e-04)]


def _float_or_none(text: str):
    try:
        return float(text)
    except ValueError:
        return None


def test_more_metrics_than_the_int8_codes(tmp_path, monkeypatch):
    """C writes int8 metric codes: past the first 128 metrics, lines go to the Python parser and the
    table is the same (a Categorical of 200 metrics)."""
    keys = " | ".join(f"term{k} loss: {k}.5" for k in range(200))
    path = tmp_path / "many.log"
    path.write_text("".join(f" iteration {i:8d}/ 100 | lm loss: {i}.25 |{' ' + keys + ' |' if i % 2 else ''}\n"
                            for i in range(1, 21)))                    # C reads the even lines
    got = read_megatron(path, load_formats()["megatron"]).series
    assert got["metric"].nunique() == 201 and len(got) == 10 * 201 + 10
    three_ways(monkeypatch, path, "megatron")


# ------------------------------------------------------------- hostile bytes ------------------------

HOSTILE = [
    b" iteration        7/     100 | lm loss: 1.0E+00 | grad norm: 2.0",          # cut before its last '|'
    b" iteration        8/     100 | lm loss: 1.0E+00\x00 | grad norm: \x002.0 |",  # NUL bytes
    b" iteration        9/     100 | lm loss: \xff1.0 | gr\xe9d norm: 2.0 |",       # not UTF-8
    b"|||||||||||||||||||||||",
    b"|",
    b" iteration       10/     100 |||| lm loss: 3.0 ||| grad norm: nan |",
    b" iteration       11/     100 | lm loss: -0.0 | grad norm: 1e999 | loss scale: -1e999 |",
    b" iteration       12/     100 | lm loss: " + b"1" * 400 + b" | grad norm: 0." + b"0" * 400 + b"1 |",
    b" iteration       13/     100 | lm loss: 1_0 | grad norm: [1.5] | loss scale: inf | num zeros: 0x10 |",
    b" iteration 1234567890123456789/ 100 | lm loss: 1.0 |",                       # 19 digits: not a counter
    b"[default99999999999999999999]: iteration 14/ 100 | lm loss: 1.0 |",          # a rank past int64
    b"12345678901234567890:  iteration 15/ 100 | lm loss: 1.0 |",
    b" iteration       16/     100 | lm loss: 1.0 | unknown key: tensor(5) | local_norm/x: 2 |",
    b" iteration       17/     100 | lm loss: 1.0 | lm loss: 2.0 | lm  loss: 3.0 | mtp loss: 4 | mtp_loss: 5 |",
    b"iteration\t18 /\t100|lm loss:1.0|grad norm:2.0|",
    b" iteration       19/     100 | lm loss: 1.0 | ms: 5ms | per_step_time: 7ms |",
    b"iteration 20/",
    b" iteration       21/     100 | lm loss: 1e | grad norm: . | loss scale: +-1 | num zeros: 1e+ |",
]


def test_hostile_lines_read_the_same(tmp_path, monkeypatch):
    base = megatron_log().split(b"\n")[:40]
    data = b"\n".join(base[:10] + HOSTILE + base[10:] + [b"x" * (1 << 20)] + base[:3] + [b"\xff" * 100])
    path = tmp_path / "hostile.log"
    path.write_bytes(data)
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        three_ways(monkeypatch, path, "megatron")
    got = read_megatron(path, load_formats()["megatron"])
    lm = got.series[got.series["metric"] == "lm_loss"].set_index("line")["value"]
    assert bits(lm[len(base[:10]) + 7]) == bits(-0.0)


TEMPLATE_VALUES = [b"1.5x", b"1e", b"1e+", b"nan", b"nanx", b"-nan", b"NaN", b"1..5", b"", b"+1", b"-0", b"1 2", b"0x10",
                   b"1_0", b"9007199254740993", b"1e999", b"1.", b".5", b"\x00", b"1|2", b"1:2", b"inf", b"12345678901234567890"]


def test_lines_shaped_as_the_last_one_read_the_same(tmp_path, monkeypatch):
    """C takes a line whose text between its numbers is the last taken line's without matching its
    keys again: every line below follows an intact one and differs from it in one value (a token that
    is or is not a number) or in one byte between the values; each reads as the exact parser reads it."""
    line = (b"[default0]: iteration        7/     100 | consumed samples:          512 | lm loss: 1.000126E+01 | "
            b"loss scale: 1.0 | grad norm: 2.000 | num zeros: 0 | params norm: 123.456 |")
    values = [b"512", b"1.000126E+01", b"1.0", b"2.000", b"0", b"123.456"]
    out = [line]
    for value in values:
        for token in TEMPLATE_VALUES:
            out += [line.replace(b": " + value + b" ", b": " + token + b" ", 1), line]
        out += [line.replace(b":" + b" " * 10 + value, b":" + b" " * 9 + value, 1), line]
    for at in range(len(line.split(b"|", 1)[0]) + 1, len(line)):           # one byte between the values
        if line[at:at + 1] not in b"0123456789.E+":
            for byte in (b" ", b"\t", b"|", b":", b"x"):
                out += [line[:at] + byte + line[at + 1:], line]
    out += [line + b" x", line, line[:-1], line, line + b" |", line, line + b"  \t", line]
    path = tmp_path / "shaped.log"
    path.write_bytes(b"\n".join(out) + b"\n")
    three_ways(monkeypatch, path, "megatron")


def test_bytes_that_are_not_utf8_in_lines_shaped_as_the_last_one(tmp_path, monkeypatch):
    """C checks only the bytes before the first '|' of a line shaped as the last one (the rest is the
    template's text, numbers and blanks): a byte that is not UTF-8 anywhere in such a line, as its
    file's first one, is still the line the note names, as the exact parser says."""
    line = b" [2025-01-01 12:00:00] iteration        7/     100 | lm loss: 1.000126E+01 | grad norm: 2.000 |"
    for at in range(0, len(line), 3):
        path = tmp_path / f"bad{at}.log"
        path.write_bytes(b"\n".join([line, line, line[:at] + b"\xff" + line[at + 1:], line]) + b"\n")
        three_ways(monkeypatch, path, "megatron")
        assert "not UTF-8 read with U+FFFD in their place (first: line 3)" in " ".join(read_log(path).notes)


INT32_MAX = 2**31 - 1


@pytest.mark.parametrize("iteration,rank,wide", [(INT32_MAX - 1, INT32_MAX, set()), (INT32_MAX, 0, {"step"}),
                                                 (7, INT32_MAX + 1, {"rank"}), (2**40, 2**40, {"rank", "step"})])
def test_steps_and_ranks_at_the_int32_boundary(tmp_path, monkeypatch, iteration, rank, wide):
    """rank, step and line are int32; a table whose column holds a value outside int32 has that column
    as int64 (tables.narrow), the values exact, whichever path read them (C hands such lines back).
    The learning rate is put on iteration + 1: iteration 2^31 - 1 makes a step of 2^31."""
    line = (f"[default{rank}]: iteration {iteration:8d}/     100 | learning rate: 1.0E-05 | lm loss: 1.000126E+01 |"
            " grad norm: 2.000 |")
    intact = " iteration        5/     100 | learning rate: 1.0E-05 | lm loss: 1.000126E+01 | grad norm: 2.000 |"
    path = tmp_path / "boundary.log"
    path.write_text("\n".join([intact, intact, line, intact]) + "\n")
    three_ways(monkeypatch, path, "megatron")
    series = read_megatron(path, load_formats()["megatron"]).series
    assert {column for column in ("rank", "step", "line") if series[column].dtype == np.int64} == wide
    assert {column for column in ("rank", "step", "line") if series[column].dtype == np.int32} == \
        {"rank", "step", "line"} - wide
    assert series["step"].max() == iteration + 1 and series["rank"].max() == rank
    assert len(series) == 12


def test_every_reader_narrows_by_the_same_rule(tmp_path, monkeypatch):
    """A table reader's steps (frame) and the MindFormers local-norm blocks (norm_rows) follow the
    same int32-else-int64 rule as the Megatron table."""
    from workbench.logs.sources import read_table

    for step, kind in ((INT32_MAX, np.int32), (INT32_MAX + 1, np.int64)):
        path = tmp_path / f"loss{step}.csv"
        path.write_text(f"step,loss\n1,2.5\n{step},2.0\n")
        table = read_table(path).series
        assert table["step"].dtype == kind and table["step"].tolist() == [1, step]
        assert table["line"].dtype == np.int32 and table["rank"].dtype == np.int32
    prefix = line_prefix()
    block = prefix + format_local_norm_message([4] * 3, np.arange(3, dtype=np.float32))
    for step, kind in ((INT32_MAX, np.int32), (INT32_MAX + 1, np.int64)):
        path = tmp_path / f"mf{step}.log"
        path.write_text("\n".join([block, prefix + format_loss_message(1, 1, step, step, 2.0, 1000, 1e-5, 1.5)]) + "\n")
        got = read_log(path)
        assert got.local_norms["step"].dtype == kind and set(got.local_norms["step"]) == {step}
        assert got.series["step"].dtype == kind and got.local_norms["line"].dtype == np.int32
        three_ways(monkeypatch, path, "mindformers")


def test_hostile_blocks_read_the_same(tmp_path, monkeypatch):
    prefix = line_prefix()
    block = (prefix + format_local_norm_message([4] * 40, np.arange(40, dtype=np.float32) * 1e-3)).split("\n")
    step = prefix + format_loss_message(1, 1, 1, 10, 2.0, 1000, 1e-5, 1.5)
    odd = [block[:3] + [block[3].replace(" ", "\x00", 1)] + block[4:],           # NUL inside the array
           block[:3] + [block[3] + " " + "1" * 400] + block[4:],                  # one value too many
           block[:3] + [" 1e999 -0.0 nan inf"] + block[4:],
           block[:3] + ["", *block[3:]],                                          # an empty line inside
           block[:2] + ["|||"] + block[2:],
           block[:3] + [block[3].replace("e-", "e-" + "0" * 30, 1)] + block[4:]]
    data = "\n".join(sum(([*lines_, step] for lines_ in odd), [])).encode() + b"\n\xff[1 2]\n"
    path = tmp_path / "blocks.log"
    path.write_bytes(data)
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        three_ways(monkeypatch, path, "mindformers")


# ------------------------------------------------------------- random mutations ---------------------

ALPHABET = [b"|", b":", b" ", b"\r", b"\x00", b"\xff", b"e", b"E", b"-", b"+", b".", b"[", b"]", b"nan", b"0",
            b"9", b"1e999", b"iteration", b"iteration 5/ 9", b"\n", b"\t", b"lm loss", b"...", b"]\n[", b"/"]


def mutate(line: bytes, rng) -> bytes:
    for _ in range(rng.integers(1, 4)):
        at = int(rng.integers(0, len(line) + 1))
        kind = rng.integers(0, 4)
        if kind == 0:
            line = line[:at] + ALPHABET[rng.integers(len(ALPHABET))] + line[at:]
        elif kind == 1:
            line = line[:at] + line[at + int(rng.integers(1, 12)):]
        elif kind == 2 and line:
            line = line[:at] + bytes([int(rng.integers(0, 256))]) + line[at + 1:]
        else:
            line = line[:at] + line[at:at + int(rng.integers(1, 30))] + line[at:]
    return line


@pytest.mark.parametrize("fmt", ["megatron", "mindformers"])
def test_random_mutations_of_real_lines(tmp_path, monkeypatch, fmt):
    """3,000 mutated lines per format, 150 to a file: every file reads the same three ways (or fails
    with the same error)."""
    rng = np.random.default_rng(1 if fmt == "megatron" else 2)
    real = (megatron_log() if fmt == "megatron" else mindformers_log()).split(b"\n")
    monkeypatch.setattr(lines, "CHUNK", 2048)
    for round_ in range(20):
        out = list(real)
        for _ in range(150):
            at = int(rng.integers(len(out)))
            out[at] = mutate(out[at], rng)
        path = tmp_path / f"{fmt}{round_}.log"
        path.write_bytes(b"\n".join(out))
        three_ways(monkeypatch, path, fmt)


# ------------------------------------------------------------- MindFormers step lines in C -----------

STEP_PIECES = [
    "loss: 10.633, per_step_time: 1752ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0, global_norm: [1.508834]",
    "loss:[10.633/10.700], per_step_time: 1752ms, lr: 1e-05, overflow cond: True, loss_scale: 65536.0, global_norm: None",
    "loss: 2.5, lm_loss: 1.5, load_balancing_loss: 0.01, mtp_loss: 0.3, aux_loss: 7, train_throughput_per_npu: 0.123T",
    "loss: NaN, lr: -inf, loss_scale: +inf, global_norm: inf, per_step_time: 1752 ms, overflow cond: TRUE",
    "loss: 1_0, lr: 1e999, global_norm: [ 1.5 ], loss_scale: [1 31049], per_step_time: ms",
    "loss: [], lr: [, global_norm: ], loss_scale: 5msms, per_step_time: 5ms ms",
    "unknown_key: 5, weird:: 5, loss:, noColonPiece, ,, , loss: 1.0,loss_scale: 2",
    "loss: 1.0\r", "loss: 1.0  ", "loss: \x1c1.0\x1f, lr: \x0b2.0", "loss: 1.0ms, lr: 0x10, global_norm: -nan",
    "loss: 9007199254740993, lr: 0.1000000000000000055511151231257827, global_norm: 1e-400",
    "loss:[ 2.5 / 2.25 ], lr: [1e-5/2]", "loss:[2.5/], lr: 1", "loss:[2.5/x]", "loss:[2.5/[3]]", "loss:[/2.5]",
    "loss:[nan/None], overflow cond: [True/1]", "loss:[2.5/2 5]", "loss:[2.5 /2.5/2.5]", "loss: [1.5]",
    ", ".join(f"loss: {k}" for k in range(70)),
]
STEP_HEADS = ["{ Epoch:[  1/  2], step:[    3/   19], ", "Epoch:[1/2],step:[3/19],", "Epoch:[\x1c1/\t2],\x0bstep:[ 3/ 19],\x1d",
              "Epoch:[1234567890/  2], step:[1/2], ", "Epoch:[  0/  1], step:[    5/   10], ",
              "Epoch:[  1/  1], step:[    1/    1] ", "Epoch:[  1/  1], step:[    1/    1],, ",
              "x Epoch:[ 1/ 1], step:[1/1] bad Epoch:[ 2/ 1], step:[ 1/ 1], ", "\u00e9 Epoch:[ 1/ 1], step:[ 1/ 1], ",
              "Epoch:[  3/  4], step:[ 1234567890123/ 5], ", "Epoch:[ 1/ 1], step:[ 1/ 1], loss: 7 Epoch:[ 2/ 2], step:[ 1/ 1], "]


def test_step_lines_read_the_same(tmp_path, monkeypatch):
    """Every step-line head and piece form (sink and non-sink, units, words, brackets, unknown keys,
    Python's \\s, monitor lines, a later match, non-ASCII, overflowing counters) between blocks."""
    prefix = line_prefix()
    block = prefix + format_local_norm_message([4] * 40, np.arange(40, dtype=np.float32) * 1e-3)
    out = []
    for head in STEP_HEADS:
        for pieces in STEP_PIECES:
            out += [block, prefix + head + pieces, prefix + "   0.3% |      | 10.00000 samples/s/p  0:04:59 }"]
    out += [block.replace("norm_size: (4, 4", "norm_size: (4,  4"), prefix + STEP_HEADS[0] + STEP_PIECES[0],
            block.replace("norm_size", "norm_size: \u00e9 norm_size"), prefix + STEP_HEADS[0] + STEP_PIECES[0],
            block.replace("local_norm:", "local_norm:\nlocal_norm:"), prefix + STEP_HEADS[0] + STEP_PIECES[0],
            block, block, prefix + STEP_HEADS[0] + STEP_PIECES[0], block]
    path = tmp_path / "steps.log"
    path.write_bytes("\n".join(out).encode().replace(b"\xc3\xa9 Epoch", b"\xff Epoch", 3))
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        three_ways(monkeypatch, path, "mindformers")
    got = read_mindformers(path, load_formats()["mindformers"])
    assert len(got.series) > 500 and len(got.local_norms) > 100 * 40 and any("not a number" in n for n in got.notes)
    odd = tmp_path / "odd.log"                          # a norm_size line where the array should start: an error
    odd.write_text(block.replace(" norm_size", " norm_size: (4,)\n norm_size") + "\n" + prefix + STEP_HEADS[0] + "loss: 1")
    three_ways(monkeypatch, odd, "mindformers")


def test_markers_at_the_edges_of_lines_read_the_same(tmp_path, monkeypatch):
    """C finds "Epoch:[", "norm_size:", "local_norm:" and "Param groups = {" by their last byte: markers
    at a line's first and last byte, a line shorter than a marker, near misses and repeats."""
    block = format_local_norm_message([4] * 6, np.arange(6, dtype=np.float32) * 1e-3).lstrip()
    step = "Epoch:[1/1], step:[{}/9], loss: 2.0, lr: 1e-05"
    out = [block, step.format(1), "Epoch:[", "x Epoch:[", "Epoch", "[", ":", "Epoch:Epoch:[1/1], step:[2/9], loss: 3",
           "EEpoch:[1/1], step:[3/9], loss: 4", "poch:[1/1], step:[4/9], loss: 5", block.replace("norm_size:", "norm_size::"),
           step.format(5), "norm_size", "local_norm:", block.replace("local_norm:", "local_norm::"),
           step.format(6), "Param groups = {", "}", "Param groups = ", block, "[Epoch:[1/1], step:[7/9], loss: 6"]
    path = tmp_path / "edges.log"
    path.write_text("\n".join(out))
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        three_ways(monkeypatch, path, "mindformers")
    assert len(read_mindformers(path, load_formats()["mindformers"]).local_norms) == 4 * 6


def test_a_step_past_int64_is_one_error(tmp_path, monkeypatch):
    path = tmp_path / "big.log"
    path.write_text("{ Epoch:[999999999/1], step:[999999999999/999999999999], loss: 1.0, lr: 2\n")
    three_ways(monkeypatch, path, "mindformers")
    with pytest.raises(InputError, match="big.log:1.*64-bit"):
        read_mindformers(path, load_formats()["mindformers"])


@pytest.fixture
def python_lines(monkeypatch) -> list[int]:
    """The line numbers the MindFormers per-line parser reads (a spy: the real parser runs)."""
    import workbench.logs.mindformers as mindformers

    calls: list[int] = []
    per_line = mindformers._line

    def counted(state, raw, number):
        calls.append(number)
        return per_line(state, raw, number)
    monkeypatch.setattr(mindformers, "_line", counted)
    return calls


def test_step_and_progress_lines_never_reach_python(tmp_path, python_lines):
    """C reads every step, progress, norm_size and local_norm line but the first norm_size line and the
    first step line (which teach it the keys)."""
    load_benchmark("logs").write_mindformers(tmp_path / "mf.log", 20, 1000)
    got = read_mindformers(tmp_path / "mf.log", load_formats()["mindformers"])
    assert len(got.local_norms) == 20_000 and len(got.series) == 20 * 6
    assert len(python_lines) <= 4, python_lines


def test_a_library_is_stale_when_a_header_it_includes_changes(tmp_path):
    """The scanners share ``lognum.h``: the source hash a library carries covers the headers its
    source includes, so an edited header never runs with an old library (a missing one: not loaded)."""
    from workbench.native import build, load

    (tmp_path / "part.h").write_text("static int twice(int value) { return 2 * value; }\n")
    (tmp_path / "probe.c").write_text('#include "part.h"\nconst char *workbench_source_hash(void) '
                                      '{ return WORKBENCH_SOURCE_HASH; }\nint four(void) { return twice(2); }\n')
    build.compile_library(tmp_path / "probe.c")
    assert load("probe", tmp_path).four() == 4
    load.cache_clear()
    (tmp_path / "part.h").write_text("static int twice(int value) { return 3 * value; }\n")
    assert load("probe", tmp_path) is None
    load.cache_clear()
    (tmp_path / "part.h").unlink()
    assert load("probe", tmp_path) is None
    with pytest.raises(RuntimeError, match="part.h"):
        build.compile_library(tmp_path / "probe.c")
    load.cache_clear()


def test_non_sink_step_lines_never_reach_python(tmp_path, monkeypatch, python_lines):
    """``loss:[current/mean]`` (non-sink mode) is read by C, and the note it calls for is made."""
    prefix = line_prefix()
    path = tmp_path / "nonsink.log"
    path.write_text("\n".join(prefix + f"{{ Epoch:[  1/  1], step:[{step:5d}/  200], loss:[{5 - step / 100:.6f}/"
                              f"{5 - step / 200:.6f}], per_step_time: 1000ms, lr: 1e-05, overflow cond: False, "
                              "loss_scale: 1.0, global_norm: [1.5]" for step in range(1, 201)) + "\n")
    got = read_mindformers(path, load_formats()["mindformers"])
    assert len(got.series) == 200 * 6 and len(python_lines) <= 1 and any("non-sink" in note for note in got.notes)
    assert got.metric("loss").iloc[-1] == 3.0
    python_lines.clear()
    three_ways(monkeypatch, path, "mindformers")
