"""The JSON document written a column at a time is byte for byte ``json.dumps(result.to_dict(), indent=2,
default=str)``: on tables of every plain type with hostile cells, on tables that must take the row path,
with several tables and with text in the rest of the document that looks like the placeholders."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from workbench.report.emit import render
from workbench.report.json_text import json_text
from workbench.report.result import Result


def _expected(result: Result) -> str:
    return json.dumps(result.to_dict(), indent=2, default=str) + "\n"


def _result(tables: dict, **extra) -> Result:
    return Result(kind="test", title="t", verdict="PASS", tables=tables, **extra)


HOSTILE_STRINGS = ["plain", "", "quote \" and \\ back", "new\nline\ttab", "ünïcødé ✓", "\x00\x1f control",
                   "\ud800 lone surrogate", "😀 astral", "Functional.linear.0.forward"]


def _plain_frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    floats = rng.standard_normal(rows) * 10.0 ** rng.integers(-30, 30, rows)
    floats[::7] = np.nan
    floats[1::11] = np.inf
    floats[2::13] = -np.inf
    floats[3::17] = -0.0
    bits = rng.integers(0, 2**63, rows, dtype=np.int64).view(np.float64)
    objects = [HOSTILE_STRINGS[i % len(HOSTILE_STRINGS)] if i % 5 else None for i in range(rows)]
    mixed = [[None, True, 3, -2.5, float("nan"), "x", 2**70, False][i % 8] for i in range(rows)]
    return pd.DataFrame({
        "float": floats, "bits": bits, "float32": floats.astype(np.float32),
        "int": rng.integers(-2**62, 2**62, rows), "int8": rng.integers(-128, 127, rows).astype(np.int8),
        "uint64": rng.integers(0, 2**63, rows, dtype=np.uint64) * np.uint64(2), "bool": rng.random(rows) < 0.5,
        "text": objects, "mixed": mixed, 7: np.arange(rows), "ключ \"q\"": np.arange(rows) * 0.5,
    })


@pytest.mark.parametrize("rows", [0, 1, 2, 97])
def test_plain_tables_are_written_as_to_dict_writes_them(rows):
    result = _result({"main": _plain_frame(rows, rows), "second": _plain_frame(rows + 3, 1)},
                     facts={"limit": float("nan"), "note": "x"}, notes=["a note"])
    assert "".join(json_text(result)) == _expected(result)


@pytest.mark.parametrize("column", [
    [[1, 2], [3]],                                             # nested lists
    [{"a": 1}, {"b": [2, None]}],                              # nested dicts
    [np.float64(1.5), np.int64(2)],                            # numpy scalars in an object column
    [pd.Timestamp("2026-01-01"), pd.Timestamp("2026-01-02")],  # datetime64
    pd.array([1, None], dtype="Int64"),                        # pandas' nullable integers
    pd.Categorical(["a", "b"]),
    [b"bytes", "text"],
])
def test_columns_that_are_not_plain_take_the_row_path_with_the_same_text(column):
    frame = pd.DataFrame({"value": column, "other": [1.25, float("nan")]})
    result = _result({"main": frame, "empty": frame.iloc[:0], "after": pd.DataFrame({"k": ["z"]})})
    assert "".join(json_text(result)) == _expected(result)


def test_duplicate_column_names_keep_to_dicts_one_key_per_row():
    frame = pd.DataFrame([[1, 2.5], [3, 4.5]], columns=["same", "same"])
    result = _result({"main": frame})
    with pytest.warns(UserWarning):                   # pandas warns that to_dict drops one of them
        expected = _expected(result)
    with pytest.warns(UserWarning):
        assert "".join(json_text(result)) == expected


def test_rows_without_columns_and_placeholder_lookalikes_elsewhere():
    lookalike = "\x00workbench-table-0\x00"
    result = _result({lookalike: pd.DataFrame(index=range(3)), "b": pd.DataFrame({"x": [1]})},
                     summary=[lookalike], notes=[lookalike], facts={lookalike: lookalike})
    assert "".join(json_text(result)) == _expected(result)


def test_a_payload_of_its_own_and_no_tables_are_dumped_as_before():
    for result in (_result({}), _result({"t": pd.DataFrame({"a": [1]})}, payload=lambda: {"x": [1, 2]})):
        assert "".join(json_text(result)) == _expected(result)


def test_emit_renders_a_comparison_like_table_as_json_that_reads_back():
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"name": [f"Functional.op.{i}.forward" for i in range(500)],
                          "max_diff": rng.random(500), "status": ["pass", "error"] * 250})
    text = render(_result({"pairs": frame}), "json")
    assert text == _expected(_result({"pairs": frame}))
    back = json.loads(text)["tables"]["pairs"]
    assert [row["max_diff"] for row in back] == frame["max_diff"].tolist()
