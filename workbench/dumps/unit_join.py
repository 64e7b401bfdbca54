"""The units of a comparison joined in the parent without walking their rows again.

A pool's worker compares one (step, rank) unit and hands back its tables, the unit's digest (diverging calls, call
totals: :mod:`.compare_result`) and, when the report is CSV, the text of its rows. The parent then only joins:

- :func:`joined`: the units' tables as ``pd.concat(frames, ignore_index=True)`` gives them, column by column with
  numpy when every table has the same columns of the same types (``pd.concat`` checks each object column that is
  all missing in some unit value by value: half a second on 72k pairs);
- :func:`joined_csv`: the report's CSV as one header and the units' rows in unit order, left in pieces. A row's CSV
  text depends on the row and its columns' types only (:func:`workbench.report.csv_text.frame_csv`), so it is used
  when every unit that has rows wrote them with the same columns and types; otherwise (never seen: it takes one
  unit with a column all missing that another has) the comparison runs again with the units' rows sent back and
  the joined table is written whole. ``tests/test_compare_units.py`` holds both to the straightforward path.
"""
from __future__ import annotations


def joined(frames: list):
    """``pd.concat(frames, ignore_index=True)`` (a single table as it is: no copy of hundreds of MB)."""
    import pandas as pd

    if len(frames) == 1:
        return frames[0]
    if not frames or not _same_columns(frames):
        return pd.concat(frames, ignore_index=True)
    return pd.DataFrame({name: _joined_column([frame[name] for frame in frames]) for name in frames[0].columns},
                        copy=False)


def _joined_column(series: list):
    """One column of every frame (all of one type, :func:`_same_columns`), joined as the readers join chunks."""
    import numpy as np

    from .rows import joined_column

    return joined_column([s.to_numpy() if isinstance(s.dtype, np.dtype) else s.array for s in series])


def _same_columns(frames: list) -> bool:
    """Every frame has the first one's column labels (unique strings, in order) and the same type in each."""
    first = frames[0]
    if not first.columns.is_unique or not all(type(name) is str for name in first.columns):
        return False
    types = list(first.dtypes)
    return all(frame.columns.equals(first.columns) and list(frame.dtypes) == types for frame in frames[1:])


def unit_csv(detail) -> tuple:
    """A unit's CSV rows (no header), as str or as the UTF-8 bytes the compiled writer made (a uint8 array,
    :func:`workbench.report.csv_text.frame_csv_data`), with the column labels and types they were written with."""
    from ..report.csv_text import frame_csv_data

    return frame_csv_data(detail, header=False), list(detail.columns), list(detail.dtypes)


def joined_csv(detail, parts: list[tuple]) -> list | None:
    """The CSV text of ``detail`` (the joined units' table, or its columns only) from the units' :func:`unit_csv`
    in unit order, as its pieces (the header, then each unit's rows: the report writes them one after the other,
    not joined into one more copy first), or None when the units with rows wrote them with different columns or
    types, or with other columns than ``detail`` has. Units without rows do not count: their columns are text
    when a unit has no pairs, and the joined table's then are too, but a column of ints, floats and missing
    values is written the same as text as with its own type (``tests/test_compare_units.py``)."""
    from ..report.csv_text import frame_csv

    written = [(names, kinds) for text, names, kinds in parts if len(text)]
    if any(found != written[0] for found in written) or (written and written[0][0] != list(detail.columns)):
        return None
    return [frame_csv(detail.iloc[:0]), *(text for text, _, _ in parts if len(text))]
