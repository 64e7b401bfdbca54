"""A result's JSON document as text pieces, its tables encoded a column at a time.

The text is exactly ``json.dumps(result.to_dict(), indent=2, default=str) + "\\n"``
(``tests/test_report_json_text.py`` holds it to that on hostile tables), without its cost: ``to_dict`` makes
one dict per row and one Python object per cell, then walks them twice (``json_safe``, the encoder); a 200k-row
comparison took 15 s of CPU and 2.2 GB that way. Here each column's cells become their JSON texts at once
(floats by :func:`.float_repr.float_reprs`, strings by ``json``'s own C escaper, each distinct string once), and
each row is joined from them::

    "tables": {                      <- key at indent k (found in the document dumped with a placeholder)
      "pairs": [                     <- k + 2
        {                            <- rows at k + 4
          "name": "Functional.linear.0.forward",      <- cells at k + 6, key texts made once per column
          "max_diff": 0.0001220703125
        },
        ...

A column whose cells are not all strings, numbers, booleans or missing (nested lists, timestamps, pandas'
nullable types) sends its whole table through ``to_dict``'s path, as do results with a payload of their own.
"""
from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING

from .result import Result, json_safe, records

if TYPE_CHECKING:
    import pandas as pd

_PLACEHOLDER = "\x00workbench-table-{}\x00"
_PLAIN = (str, float, int, bool, type(None))


def json_text(result: Result) -> list[str]:
    """The pieces of the result's JSON document, in order."""
    if result.payload is not None or not result.tables:
        return [json.dumps(result.to_dict(), indent=2, default=str) + "\n"]
    names = list(result.tables)
    document = {"schema": result.schema, "title": result.title, "verdict": result.verdict,
                "exit_code": result.exit_code, "sources": result.sources, "summary": result.summary,
                "facts": json_safe(result.facts), "notes": result.notes,
                "tables": {name: _PLACEHOLDER.format(index) for index, name in enumerate(names)}}
    text = json.dumps(document, indent=2, default=str) + "\n"
    pieces: list[str] = []
    for index, name in enumerate(names):        # "tables" is the last key: its placeholders the last texts
        before, _, text = text.rpartition(json.dumps(_PLACEHOLDER.format(index)))
        pieces.append(before)
        key_indent = before[before.rfind("\n") + 1:].index('"')
        pieces.extend(_table(result.tables[name], key_indent))
    pieces.append(text)
    return pieces


def _table(frame: pd.DataFrame, indent: int) -> list[str]:
    """The table's rows as ``json.dumps`` writes a list of row objects whose key sits at ``indent``."""
    if len(frame) == 0:
        return ["[]"]
    if not frame.columns.is_unique or frame.shape[1] == 0:    # to_dict: one key per row object; no rows at all
        return _table_by_rows(frame, indent)
    columns = [_column_lines(frame, position, indent + 4) for position in range(frame.shape[1])]
    if any(lines is None for lines in columns):
        return _table_by_rows(frame, indent)
    row_open, row_close = " " * (indent + 2) + "{\n", "\n" + " " * (indent + 2) + "}"
    rows = [row_open + ",\n".join(cells) + row_close for cells in zip(*columns, strict=True)]
    return ["[\n", ",\n".join(rows), "\n" + " " * indent + "]"]


def _table_by_rows(frame: pd.DataFrame, indent: int) -> list[str]:
    """``to_dict``'s path: the rows as dicts, dumped, each line after the first moved to the table's depth."""
    return [json.dumps(records(frame), indent=2, default=str).replace("\n", "\n" + " " * indent)]


def _column_lines(frame: pd.DataFrame, position: int, indent: int) -> list[str] | None:
    """``    "key": value`` for each cell of the column, or None when a cell is not plain."""
    texts = _cell_texts(frame.iloc[:, position])
    if texts is None:
        return None
    prefix = " " * indent + encode_basestring_ascii(str(frame.columns[position])) + ": "
    return [prefix + text for text in texts]


def _cell_texts(column: pd.Series) -> list[str] | None:
    import numpy as np

    if not isinstance(column.dtype, np.dtype):          # pandas' own types (nullable, categorical): to_dict's way
        return None
    values = column.to_numpy()
    kind = values.dtype.kind
    if kind == "f":
        return _float_texts(values.astype(np.float64, copy=False))
    if kind in "iu":
        return list(map(str, values.tolist()))
    if kind == "b":
        return ["true" if value else "false" for value in values.tolist()]
    if kind == "O":
        return _object_texts(values.tolist())
    return None


def _float_texts(values) -> list[str]:
    import numpy as np

    from .float_repr import float_reprs

    texts = float_reprs(values)
    for index in np.flatnonzero(~np.isfinite(values)).tolist():
        texts[index] = "null"
    return texts


def _object_texts(values: list) -> list[str] | None:
    """Each cell as ``json.dumps`` writes ``json_safe``'s value of it, or None when one is not plain."""
    known: dict = {}
    texts = []
    for value in values:
        kind = type(value)
        if kind is str:
            text = known.get(value)
            if text is None:
                text = known[value] = encode_basestring_ascii(value)
        elif kind not in _PLAIN:
            return None
        elif value is None:
            text = "null"
        elif kind is bool:
            text = "true" if value else "false"
        elif kind is float:
            text = repr(value) if math.isfinite(value) else "null"
        else:
            text = int.__repr__(value)
        texts.append(text)
    return texts
