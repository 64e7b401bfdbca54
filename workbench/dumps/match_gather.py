"""A pair or unmatched table column read straight from the sides' own arrays (:mod:`.match_rows`): the table's rows
are parts, each the positions of one source array, and the column is made by one take per part into its final
order. Taking each part into an object array, joining the parts, reordering them and sorting made three or four
passes over a million Python references per table; this makes one.

A column is gathered only where every part has one type (:mod:`.match_columns`' ``PLAIN`` of one dtype, or
``TEXT``); anything else goes through :func:`.match_columns.taken` and :func:`.match_columns.joined` as before.
"""
from __future__ import annotations

from .match_columns import PLAIN, PLAIN_DTYPES, TEXT


class Gather:
    """A column of a table whose rows are its parts one after the other, put in the :class:`Layout`'s order. A
    part is ``(values, missing, positions)``: its rows are ``values[positions]``, None where ``missing`` (a mask
    over ``values``, or None) is set."""

    def __init__(self, parts: list[tuple], dtype, layout: Layout):
        self.parts, self.dtype, self.layout = parts, dtype, layout

    def __len__(self) -> int:
        return self.layout.length

    def at(self, order):
        """The column's values at ``order`` (None: all, in order) as one array of its dtype."""
        import numpy as np

        if len(self.parts) == 1:
            values, missing, positions = self.parts[0]
            rows = self.layout.rows(order)
            return _taken(values, missing, positions if rows is None else positions[rows], self.dtype)
        out = np.empty(len(self) if order is None else len(order), dtype=self.dtype)
        for (values, missing, positions), (chosen, local) in zip(self.parts, self.layout.split(order), strict=True):
            out[chosen] = _taken(values, missing, positions if local is None else positions[local], self.dtype)
        return out


class Layout:
    """The row counts of a table's parts and the order its rows are in (None: the parts one after the other),
    and where each part's rows go for an order of those (the last order asked for is kept: every column of the
    table is taken in the same one)."""

    def __init__(self, sizes: list[int], order=None):
        self.sizes, self.order, self._split = sizes, order, (None, None, None)
        self.length = sum(sizes) if order is None else len(order)

    def rows(self, order):
        """The parts' rows (one after the other) at ``order`` of the table's; None for all in order."""
        if order is not None and self._split[0] is order:
            return self._split[1]
        if self.order is None:
            return order
        return self.order if order is None else self.order[order]

    def split(self, order) -> list[tuple]:
        """Per part, (where its rows go in the output: a slice where they are one run, else indices; which of
        its rows, None for all in order)."""
        import numpy as np

        if order is not None and self._split[0] is order:
            return self._split[2]
        rows = self.rows(order)
        starts = np.cumsum([0, *self.sizes])
        if rows is None:
            return [(slice(starts[k], starts[k + 1]), None) for k in range(len(self.sizes))]
        part_of = np.searchsorted(starts[1:], rows, side="right")
        found = []
        for k in range(len(self.sizes)):
            chosen = np.flatnonzero(part_of == k)
            run = len(chosen) and chosen[-1] - chosen[0] + 1 == len(chosen)
            found.append((slice(chosen[0], chosen[-1] + 1) if run else chosen, rows[chosen] - starts[k]))
        if order is not None:
            self._split = (order, rows, found)
        return found


def _taken(values, missing, positions, dtype):
    found = values[positions]
    if missing is not None:
        if found.dtype != dtype:
            found = found.astype(dtype)
        found[missing[positions]] = None
    return found


def source(rows, field: str):
    """``(values, missing, kind, dtype)`` of a :class:`.match_calls.Rows` column that can be gathered whatever
    positions are taken (a numpy column of a plain dtype, a python string column, a nullable integer column
    without a missing value, or with nothing else: None only, which is text's type); None for any other."""
    import numpy as np
    import pandas as pd

    if field not in rows.columns:
        return None
    series = rows.table[field]
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.name in PLAIN_DTYPES:
        return series.to_numpy(), None, PLAIN, dtype
    if isinstance(dtype, pd.Int64Dtype):
        array = series.array
        if len(array) and array._mask.all():      # every value missing (the nan and inf counts of most dumps): None only
            return _missing_values(len(array)), None, TEXT, np.dtype(object)
        return (None if array._mask.any() else (array._data, None, PLAIN, np.dtype(np.int64)))
    if isinstance(dtype, pd.StringDtype):
        texts = rows._texts.get(field) or rows._text_column(field, series)
        if texts is None:
            return None
        values, missing, any_missing = texts
        return values, missing if any_missing else None, TEXT, np.dtype(object)
    return None


def _missing_values(size: int):
    """An object array of ``size`` None: what a column of nothing but missing values takes its rows from."""
    import numpy as np

    return np.empty(size, dtype=object)          # numpy fills an object array with None


def constant(value, size: int):
    """A part of ``size`` rows all ``value`` (a str or None): ``TEXT``."""
    import numpy as np

    values = np.empty(1, dtype=object)
    values[0] = value
    return (values, None, np.zeros(size, dtype=np.int64)), TEXT, np.dtype(object)


def gathered(parts: list[tuple], layout: Layout):
    """``(Gather, kind)`` of parts given as ``(part, kind, dtype)`` (None where one cannot be), or None where one
    is None or their kinds or dtypes differ."""
    if not parts or None in parts or len({(kind, dtype) for _, kind, dtype in parts}) != 1:
        return None
    return Gather([part for part, _, _ in parts], parts[0][2], layout), parts[0][1]


def typed_part(column: tuple):
    """``(part, kind, dtype)`` of a typed column ``(values, kind)`` of :mod:`.match_columns`, all its rows in
    order; None for an untyped one."""
    import numpy as np

    from .match_columns import object_array

    values, kind = column
    if kind == PLAIN:
        return (values, None, np.arange(len(values))), PLAIN, values.dtype
    if kind == TEXT:
        return (object_array(values), None, np.arange(len(values))), TEXT, np.dtype(object)
    return None


def plain_part(source_found, positions):
    """``(part, kind, dtype)`` of a :func:`source` at ``positions``."""
    values, missing, kind, dtype = source_found
    return (values, missing, positions), kind, dtype


def resolved(column: tuple) -> tuple:
    """A column with a :class:`Gather` made into its array (the sort keys, which are read as arrays)."""
    values, kind = column
    return (values.at(None), kind) if isinstance(values, Gather) else column
