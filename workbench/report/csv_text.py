"""A report's CSV: the text ``DataFrame.to_csv(index=False)`` writes, built column by column (every ``--format
csv`` goes through :func:`frame_csv`, :mod:`workbench.report.emit`).

pandas formats each column (``get_values_for_csv``) and then hands every row to the ``csv`` module's writer, which
costs about a microsecond per field: 3.5 s for the 72k x 49 fields of a comparison of 200k-row dumps. Here each column becomes its
cells once, with pandas' own formatting (float columns through ``astype(str)``, as pandas does; integers, booleans
and strings as the ``csv`` writer prints them; missing values empty), and rows are joined with ``,``. Quoting stays
the ``csv`` module's: a column whose text holds a character that module quotes has those cells quoted by the
module itself. Anything else (another column type, an object that is not str/int/float/bool, a one-column table,
column labels that are not plain) is written by pandas itself, so the text is always the one ``to_csv`` gives
(``tests/test_compare_csv.py``).
"""
from __future__ import annotations

import csv
import io
import os
import re

from .csv_rows import csv_rows
from .float_repr import float_reprs

BLOCK = 16384                      # rows formatted at a time: one block's cells exist at once, not the table's
_PLAIN_TYPES = (str, int, float, bool)


def _quoted_by_csv() -> str:
    """The ASCII characters that make the ``csv`` module (as pandas sets it up) quote a field (no other character
    can: its delimiter, quote character and line terminator are ASCII)."""
    found = []
    for code in range(128):
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow([f"a{chr(code)}b", "c"])
        if buffer.getvalue() != f"a{chr(code)}b,c\n":
            found.append(chr(code))
    return "".join(found)


QUOTED = _quoted_by_csv()
_QUOTED_ANY = re.compile(f"[{re.escape(QUOTED)}]").search     # a cell that holds one of them
# Every character a float's text can hold (repr and numpy's str: digits, sign, point, exponent, inf, nan): when
# none is quoted, float columns are not searched for quoting (true for the csv module as pandas sets it up).
_FLOATS_UNQUOTED = _QUOTED_ANY("0123456789+-.eEinfa") is None


def frame_csv(frame, header: bool = True) -> str:
    """``frame.to_csv(index=False, header=header)``, faster for the column types report tables have (numbers,
    text, flags). Each row's text depends on that row and the column types only, so the rows of tables with the
    same columns and types can be written apart and joined after one header (``workbench compare``'s units)."""
    return as_text(frame_csv_data(frame, header))


def as_text(data) -> str:
    """:func:`frame_csv_data`'s text (or a piece of it) as str: UTF-8 bytes decoded, str as it is."""
    return data if isinstance(data, str) else str(data, "utf-8")


def frame_csv_data(frame, header: bool = True):
    """:func:`frame_csv`'s text, as the UTF-8 bytes the compiled row writer made (:mod:`.csv_rows`, a uint8
    array: a file takes them as they are, without a decode and an encode of tens of MB), else as str."""
    columns = list(frame.columns)
    if os.linesep != "\n" or len(columns) < 2 or not all(type(c) is str and not _needs_quotes(c) for c in columns) or \
            len(set(columns)) < len(columns) or not all(_supported(frame[c]) for c in columns):     # a repeated label
        return frame.to_csv(index=False, header=header)
    blocks = [",".join(columns) + "\n"] if header else []
    rows = csv_rows(frame, "".join(blocks)) if _FLOATS_UNQUOTED else None
    if rows is not None:
        return rows
    for start in range(0, len(frame), BLOCK):
        part = frame.iloc[start:start + BLOCK]
        cells = [column_cells(part[c]) for c in columns]
        if any(cell is None for cell in cells):
            return frame.to_csv(index=False, header=header)      # an object pandas' writer prints its own way
        blocks.append("\n".join(map(",".join, zip(*cells, strict=True))) + "\n")
    return "".join(blocks)


def _needs_quotes(text: str) -> bool:
    return _QUOTED_ANY(text) is not None


def _supported(series) -> bool:
    import numpy as np

    dtype = series.dtype
    return isinstance(dtype, np.dtype) and dtype.kind in "fiubO"


def column_cells(series) -> list[str] | None:
    """One column's cells as the csv text holds them, or None when pandas must write the table."""
    import pandas as pd

    values = series.to_numpy()
    kind = values.dtype.kind
    if kind == "f":                                   # pandas: astype(str), missing values empty
        cells = _float_cells(values)
        return cells if _FLOATS_UNQUOTED else quote_cells(cells)
    if kind in "iub":                                 # pandas: Python ints/bools, printed with str()
        return list(map(str, values.tolist()))
    items = values.tolist()
    types = set(map(type, items))
    if not types <= {str, int, bool}:                 # pandas: missing values (pd.isna) empty
        if types <= {str, int, bool, float, type(None)}:
            items = ["" if v is None or v != v else v for v in items]           # what pd.isna finds among these
        else:
            missing = pd.isna(values)
            values = values.copy()
            values[missing] = ""
            items = values.tolist()
        types = set(map(type, items))
        if not types <= set(_PLAIN_TYPES):
            return None
    if types != {str}:                                # the csv writer: repr for floats, str for the rest
        items = [repr(v) if type(v) is float else str(v) for v in items]
    return quote_cells(items)


def _float_cells(values) -> list[str]:
    """``values.astype(str)`` with missing values empty; each distinct bit pattern formatted once (a column all
    missing, or one tolerance for every row, is not formatted row by row; -0.0 and 0.0 stay apart)."""
    import numpy as np
    import pandas as pd

    missing = np.isnan(values)
    if missing.all():
        return [""] * len(values)
    codes, uniques = (pd.factorize(values.view(f"i{values.dtype.itemsize}")) if values.dtype.itemsize in (2, 4, 8)
                      else (None, values))
    if 4 * len(uniques) > len(values):
        text = _float_texts(values)
        for index in np.flatnonzero(missing).tolist():
            text[index] = ""
        return text
    text = _float_texts(uniques.view(values.dtype))
    for index in np.flatnonzero(np.isnan(uniques.view(values.dtype))).tolist():
        text[index] = ""
    return np.asarray(text, dtype=object)[codes].tolist()


def _float_texts(values) -> list[str]:
    """``values.astype(str).tolist()``: for float64, ``repr`` of each value, which prints the same shortest
    round-trip digits in the same layout (numpy's Dragon4 against Python's dtoa; tests/test_report_csv.py holds
    them equal on random bit patterns and edges), compiled where the library is built (:mod:`.float_repr`, a
    third of repr's time), with no fixed-width string array between; other float types keep numpy's own
    (shortest digits of their own precision)."""
    import numpy as np

    if values.dtype == np.float64:
        return float_reprs(values)
    return values.astype(str).tolist()


def quote_cells(cells: list[str]) -> list[str]:
    """Cells the csv module would quote, quoted by it; the rest as they are."""
    text = "".join(cells)
    if not any(char in text for char in QUOTED):          # one fast substring search per character, not a regex
        return cells
    quoted = dict(zip(cells, cells, strict=True))          # each distinct cell looked at once
    needing = [cell for cell in quoted if _QUOTED_ANY(cell) is not None]
    quoted.update(zip(needing, _quoted(needing), strict=True))
    return list(map(quoted.__getitem__, cells))


def _quoted(cells: list[str]) -> list[str]:
    """Each cell as the csv module writes it as a field: one writer writes them all, each as a row of its own
    handed to ``list.append`` (thousands of distinct labels with commas: a StringIO and a writer per cell cost
    ~3 us each)."""
    lines: list[str] = []
    csv.writer(_Sink(lines.append), lineterminator="\n").writerows([(cell, "") for cell in cells])
    return [line[:-2] for line in lines]              # the field, without ",\n" (the empty second field)


class _Sink:
    """What csv.writer writes to: each row's text goes to ``write``."""

    def __init__(self, write):
        self.write = write
