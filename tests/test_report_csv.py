"""A report's CSV (workbench/report/csv_text.py) is the text ``DataFrame.to_csv(index=False)`` writes: for
every column type a comparison has, cells that need quoting, missing values, edge floats, tables longer than one
block, and the types it leaves to pandas; and through the real command on generated msprobe dumps."""
from __future__ import annotations

import math
import random
import struct

import numpy as np
import pandas as pd
import pytest
from dump_tables import benchmark_module

from workbench.cli.main import main
from workbench.report import csv_text
from workbench.dumps.compare_run import compare_dumps
from workbench.report.csv_text import frame_csv


EDGE_FLOATS = [0.0, -0.0, 1.0, -1.5, 1e-4, 9.999e-5, 1e-5, 1e15, 1e16, 9999999999999998.0, 1.2345678901234568e17,
               5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, math.inf, -math.inf, math.nan, 0.1 + 0.2,
               123456.789, -7e-300, 3.0e22]
HOSTILE_TEXT = ["plain", "", " leading", "trailing ", "a,b", 'say "hi"', "line\nbreak", "carriage\rreturn",
                "tab\there", "ünïcödé ✓", ",", '"', "\n", "semi;colon", "x" * 300, "-1.5", "None", "nan"]


def _random_floats(count: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    found = []
    while len(found) < count:                       # any bit pattern: every exponent, subnormals, nan, inf
        found.append(struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0])
    return found


def _table(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = random.Random(seed)
    floats = (EDGE_FLOATS * (rows // len(EDGE_FLOATS) + 1))[:rows]
    rng.shuffle(floats)
    texts = [rng.choice(HOSTILE_TEXT) for _ in range(rows)]
    mixed = [rng.choice([None, math.nan, pd.NA, 7, -3, 2.5, True, "word", "a,b"]) for _ in range(rows)]
    return pd.DataFrame({
        "status": [rng.choice(["pass", "error", None]) for _ in range(rows)],
        "f64": floats, "bits": _random_floats(rows, seed),
        "f32": np.frombuffer(rng.randbytes(4 * rows), dtype=np.float32),          # any float32 bit pattern
        "i64": [rng.randint(-2**63, 2**63 - 1) for _ in range(rows)],
        "u64": np.asarray([rng.randint(0, 2**64 - 1) for _ in range(rows)], dtype=np.uint64),
        "flag": [rng.random() < 0.5 for _ in range(rows)],
        "text": texts, "mixed": mixed,
        "counts": [rng.choice([None, 0, 3]) for _ in range(rows)],       # object: ints and None (nan/inf counts)
        "none": [None] * rows})


@pytest.mark.parametrize("rows", [0, 1, 7, csv_text.BLOCK + 5])
def test_every_comparison_column_type_gives_to_csv_text(rows):
    frame = _table(rows, seed=rows)
    assert all(csv_text._supported(frame[c]) and csv_text.column_cells(frame[c]) is not None for c in frame.columns)
    assert frame_csv(frame) == frame.to_csv(index=False)          # the fast path's text (checked above: no fallback)


def test_quoting_is_the_csv_modules():
    """Each cell alone and among others: commas, quotes and line breaks quoted exactly as pandas' writer does."""
    for text in HOSTILE_TEXT:
        frame = pd.DataFrame({"a": [text, "x"], "b": [1.5, math.nan], "c": ["y", text]})
        assert frame_csv(frame) == frame.to_csv(index=False), text


@pytest.mark.parametrize("column", [
    pd.array([1, None, 3], dtype="Int64"), pd.array(["a", None, "c"], dtype="string"),
    pd.Categorical(["a", "b", "a"]), pd.to_datetime(["2024-01-01", None, "2024-03-01"]),
    [(1, 2), "x", None],                          # an object pandas' writer prints its own way
    [np.float64(0.1), "x", None], [b"raw", "x", None], [1 + 2j, 0, None]])
def test_other_types_are_left_to_pandas(column):
    frame = pd.DataFrame({"a": column, "b": ["p", "q", "r"]})
    assert frame_csv(frame) == frame.to_csv(index=False)


@pytest.mark.parametrize("frame", [
    pd.DataFrame({"only": ["", "x", None]}),                       # one column: an empty row is written '""'
    pd.DataFrame({"a,b": [1, 2], "c": [3, 4]}),                   # a label that needs quotes
    pd.DataFrame({0: [1, 2], "c": [3, 4]}),                        # a label that is not a str
    pd.DataFrame([[1, 2.5, "x"]], columns=["a", "a", "b"]),         # a label repeated (main raised AttributeError)
    pd.DataFrame(), pd.DataFrame({"a": [], "b": []})])
def test_odd_tables_give_to_csv_text(frame):
    assert frame_csv(frame) == frame.to_csv(index=False)


def test_cells_quoted_together_are_each_quoted_alone():
    """The cells one writer quotes in one go (a row each) are what the csv module writes for each cell alone."""
    import csv
    import io

    rng = random.Random(5)
    cells = [*HOSTILE_TEXT, *("".join(rng.choice('a,"\n\r\tü ') for _ in range(rng.randint(0, 9))) for _ in range(300))]
    alone = []
    for cell in cells:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow([cell, ""])
        alone.append(buffer.getvalue()[:-2])
    assert csv_text._quoted(cells) == alone and csv_text._quoted([]) == []
    assert csv_text.quote_cells(cells * 2) == [quoted if csv_text._needs_quotes(cell) else cell
                                               for cell, quoted in zip(cells * 2, alone * 2, strict=True)]


def test_quoted_characters_are_what_the_csv_module_quotes():
    assert set(csv_text.QUOTED) >= {",", '"', "\n"}
    assert all(ord(c) < 128 for c in csv_text.QUOTED)


@pytest.fixture(scope="module")
def generated_dumps(tmp_path_factory):
    root, bench = tmp_path_factory.mktemp("bench_dumps"), benchmark_module()
    bench.write_dump(root / "torch" / "step0" / "proc0", "pytorch", 3000, 1)
    bench.write_dump(root / "mindspore" / "step0" / "proc0", "mindspore", 3000, 2)
    return root


def test_compare_csv_through_the_command_is_pandas_text(generated_dumps, tmp_path):
    out = tmp_path / "pairs.csv"
    code = main(["compare", str(generated_dumps / "torch"), str(generated_dumps / "mindspore"), "--out", str(out)])
    assert code in (0, 1)
    expected = compare_dumps(generated_dumps / "torch", generated_dumps / "mindspore").main_table
    assert len(expected) > 100
    assert out.read_text() == expected.to_csv(index=False)


def test_every_reports_csv_is_pandas_text():
    """``emit``'s csv format is :func:`frame_csv` for every command: a checklist-like table (text with commas and
    quotes, NaN, ints, bools, a nullable Int64 column left to pandas) renders as ``to_csv`` writes it."""
    import pandas as pd

    from workbench.report.emit import render
    from workbench.report.result import Result

    table = pd.DataFrame({"key": ["a,b", 'say "x"', "plain"], "value": [1.5, float("nan"), 1e-300],
                          "count": [1, 2, 3], "ok": [True, False, True],
                          "maybe": pd.array([1, None, 3], dtype="Int64")})
    result = Result("checklist", "t", "PASS", tables={"main": table})
    assert render(result, "csv") == table.to_csv(index=False)
    assert render(Result("checklist", "t", "PASS", tables={"main": table.drop(columns="maybe")}), "csv") == \
        table.drop(columns="maybe").to_csv(index=False)


def test_float_texts_are_numpys_for_every_bit_pattern():
    """``repr`` of a float64 (Python's dtoa) against numpy's ``astype(str)`` (Dragon4): the same text for any bit
    pattern (both signs, every exponent, subnormals, inf), the edges, and around every power of ten where the
    layout turns scientific; float32 and float16 keep numpy's own shortest digits."""
    rng = np.random.default_rng(11)
    bits = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, 200_000, dtype=np.int64, endpoint=True)
    tens = np.asarray([10.0 ** e for e in range(-310, 309)])
    near = np.concatenate([tens, np.nextafter(tens, 0), np.nextafter(tens, np.inf), -tens])
    values = np.concatenate([bits.view(np.float64), near, np.asarray(EDGE_FLOATS), np.arange(-500.0, 500.0, 0.125)])
    values = values[~np.isnan(values)]
    texts = csv_text._float_texts(values)
    assert texts == values.astype(str).tolist()
    assert set("".join(texts)) <= set("0123456789+-.eEinfa") and csv_text._FLOATS_UNQUOTED    # never quoted
    for dtype in (np.float32, np.float16, np.dtype(">f8")):
        with np.errstate(over="ignore"):
            other = values.astype(dtype)
        assert csv_text._float_texts(other) == other.astype(str).tolist()
