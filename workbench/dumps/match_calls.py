"""Calls: the rows of one operator or module invocation (its inputs, outputs, parameters), the unit that
matching pairs, found for a whole table at once (:func:`calls_of`; a side's calls share one :class:`CallIndex`). The
pairing of rows inside paired calls: :mod:`.match_pairs`; a fused tensor's combined statistics: :mod:`.match_combine`.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Callable

from .api_stems import ends_in_digits
from .formats import load_dump_formats
from .match_names import cell_text
from .match_codes import IO_CODE, IOS, few_codes, io_codes, tuple_codes
from .match_stems import CallStems, call_stems

STATS = ("max", "min", "mean", "l2norm")


class Rows:
    """A dump table's columns by row position, with the values :func:`.schema.row_dicts` gives (Python scalars,
    None for <NA>): ``rows[column]`` a list (made on first use), ``rows.take(column, positions)`` a few rows."""

    def __init__(self, table):
        self.table = table                     # positions, not index labels, address its rows
        self.columns = tuple(self.table.columns)
        self.size = len(self.table)
        self._lists: dict[str, list] = {}
        self.derived: dict[str, object] = {}          # per-row values computed once from the columns (matching's)
        self._texts: dict[str, tuple] = {}            # string columns: their objects and missing masks (take_objects)

    def __getitem__(self, column: str) -> list:
        found = self._lists.get(column)
        if found is None:
            found = self._lists[column] = self.take(column, None)
        return found

    def take(self, column: str, positions) -> list:
        """The values of ``column`` at ``positions`` (all rows for None), as row_dicts gives them."""
        whole = self.strings(column) if positions is None else None
        return (self.take_objects(column, positions) if whole is None else whole).tolist()   # no copy to list

    def take_objects(self, column: str, positions):
        """:meth:`take` as an object array. A string column's values are indexed in its own array of str and <NA>
        with its missing mask, both found once per column: pandas' ``take`` then ``to_numpy`` built and checked a
        new string array and walked it for missing values at every take (four to six per column in matching)."""

        from .schema import object_values

        series = self.table[column]
        texts = self._texts.get(column) or self._text_column(column, series)
        if texts is None:
            return object_values(series if positions is None else series.take(positions))
        values, missing, any_missing = texts
        found = values.copy() if positions is None else values[positions]
        if any_missing:
            found[missing if positions is None else missing[positions]] = None
        return found

    def _text_column(self, column: str, series):
        """(its str and <NA> objects, not copied; missing mask, None when all are str; any missing) of a
        python-backed string column, kept in ``_texts``; None for any other column type."""
        import numpy as np
        import pandas as pd

        dtype = series.dtype
        if not (isinstance(dtype, pd.StringDtype) and dtype.storage == "python"):
            return None
        values = np.asarray(series.array)
        if pd.api.types.infer_dtype(values, skipna=False) == "string":      # all str: a quicker walk than isna's
            found = self._texts[column] = (values, None, False)
            return found
        missing = pd.isna(values)
        found = self._texts[column] = (values, missing, bool(missing.any()))
        return found

    def strings(self, column: str):
        """The column's own object array when it is a string column without a missing value (every value a str;
        not a copy: not to be written), else None."""
        series = self.table[column]
        texts = self._texts.get(column) or self._text_column(column, series)
        return texts[0] if texts is not None and not texts[2] else None

    def typed(self, column: str, positions):
        """``column`` at ``positions`` in the table's own dtype (a Series)."""
        return self.table[column].take(positions)

    def release(self, keep: tuple[str, ...] = ()) -> None:
        """Forget the column lists but ``keep`` (the tables are built from the table itself). The string columns'
        masks stay (a byte per row and column, no Python object): the pair and unmatched tables take them again."""
        for column in [c for c in self._lists if c not in keep]:
            del self._lists[column]
        if not keep:
            self.derived.clear()

    def rows_at(self, positions: list[int]) -> dict[int, dict]:
        """``{position: row dict}`` of a few rows (each column taken once for all of them)."""
        values = [self.take(column, positions) for column in self.columns]
        return {position: dict(zip(self.columns, row, strict=True))
                for position, row in zip(positions, zip(*values, strict=True), strict=True)}


@dataclass
class CallIndex:
    """What :func:`calls_of` knows of a side's calls, by call number (``Call.index``), as arrays and flat lists: no
    list or dict per call. The row positions stay int64 arrays: the few readers of one call's rows (parameters,
    fused parts) slice them, and a list of every row (200k Python ints a side) was made for them."""

    call_of: object          # row -> its call number (int64 array)
    io_rank: object          # row -> its io's place in IOS, 3 for any other io (int8 array)
    slots: object            # row -> its slot (int64 array)
    ops: list[str]           # call number -> its op text
    passes: list[str]        # call number -> its pass text
    modules: list[str]       # call number -> its module path text
    call_at: object          # call number -> where its rows start in by_call_array (one more: the end; int64 array)
    by_call_array: object    # row positions by call, each call's in row (execution) order (int64 array)
    by_io_array: object      # row positions by call, then io (IOS order), then slot, then row (int64 array)
    io_at_array: object      # 4 * call number + io code -> where those rows start in by_io_array (one more: the end)
    stem_of: Callable[[int], str]       # call number -> its stem, made when asked (a third of the calls are paired)

    def rows_by_call(self) -> tuple:
        """(by_call, call_at) as int64 arrays."""
        return self.by_call_array, self.call_at


@dataclass(slots=True)
class Call:
    side: str
    rank: int
    step: int
    op: str
    module_path: str
    pass_: str
    is_module: bool
    order: int
    index: int               # its number in the side's CallIndex
    table: CallIndex

    @property
    def stem(self) -> str:
        return self.table.stem_of(self.index)

    @property
    def rows(self) -> list[int]:
        """Its row positions, in execution order."""
        table = self.table
        start, end = table.call_at[self.index:self.index + 2].tolist()
        return table.by_call_array[start:end].tolist()

    def io_rows(self, io: str) -> list[int]:
        """The positions of its rows of ``io`` (one of IOS), in slot order (ties in row order)."""
        table, code = self.table, 4 * self.index + IO_CODE[io]
        start, end = table.io_at_array[code:code + 2].tolist()
        return table.by_io_array[start:end].tolist()

    @property
    def by_io(self) -> dict[str, list[int]]:
        """io -> :meth:`io_rows`, for the ios of IOS it has."""
        return {io: found for io in IOS if (found := self.io_rows(io))}


def calls_of(rows: Rows) -> list[Call]:
    """The table's calls in execution order (per rank and step: the caller groups by unit). Rows are grouped
    with numpy (a call: its rank, step, stem and pass, numbered in order of first appearance), each io's rows
    in slot order (ties in row order)."""
    import numpy as np

    if not rows.size:
        return []
    names, passes = rows["name"], rows.strings("pass")
    passes = few_codes(passes) if passes is not None else None        # a pass or two: no hash of each row
    passes = rows["pass"] if passes is None else passes
    found = call_stems(names)
    call_of = tuple_codes((_integers(rows, "rank"), _integers(rows, "step"), found.keys, passes))
    count = int(call_of.max()) + 1
    by_call = np.argsort(call_of, kind="stable")
    call_at = np.concatenate([[0], np.cumsum(np.bincount(call_of, minlength=count))])
    at_firsts = by_call[call_at[:-1]]
    earliest = _earliest(_integers(rows, "order"), by_call, call_at)
    texts = [_texts(rows.take_objects(column, at_firsts)) for column in ("side", "op", "module_path", "pass")]
    numbers = [_integers_at(rows, column, at_firsts) for column in ("rank", "step")]
    keys = [np.asarray(found, dtype=np.int64) for found in (*numbers, earliest)]     # the calls' execution order
    side, op, module, pass_ = texts
    is_module = _module_calls(at_firsts, found)
    slots = np.asarray(_integers(rows, "slot"), dtype=np.int64)
    ios = rows.strings("io")
    io_rank = io_codes(rows.take_objects("io", None) if ios is None else ios)
    by_io = np.lexsort((np.arange(rows.size), slots, io_rank, call_of))      # io groups in slot order, ties by row
    io_at = np.concatenate([[0], np.cumsum(np.bincount(call_of * 4 + io_rank, minlength=4 * count))])
    index = rows.derived["calls"] = CallIndex(call_of, io_rank, slots, op, pass_, module, call_at, by_call, by_io, io_at,
                                              found.one_at(at_firsts))
    calls = list(map(Call, side, *numbers, op, module, pass_, is_module, earliest.tolist(), range(count),
                     repeat(index, count)))                               # no loop frame
    if _ordered(*keys):                     # numbered by first row: usually in execution order already
        return calls
    ranked = np.lexsort(keys[::-1])                                     # stable: ties in call order
    return [calls[i] for i in ranked.tolist()]


def _ordered(*keys) -> bool:
    """Whether the tuples of ``keys`` (int64 arrays of one length) never decrease: a stable sort by them keeps
    everything where it is."""
    import numpy as np

    ordered = np.ones(max(len(keys[0]) - 1, 0), dtype=bool)     # the tuples of the keys after this one never decrease
    for key in keys[::-1]:                  # last key first: (a, b) <= (c, d) when a < c or (a == c and b <= d)
        before, after = key[:-1], key[1:]
        ordered = (before < after) | ((before == after) & ordered)
    return bool(ordered.all())


def _module_calls(at_firsts, found: CallStems) -> list[bool]:
    """Whether each call is a module call: its stem matches the YAML's ``module_pattern`` (Module./Cell. calls,
    dump_formats.yaml). When every match of the pattern ends in a digit (:func:`.api_stems.ends_in_digits`) and the
    compiled pass read the names (ASCII, no line break: ``\\d`` is [0-9] and ``$`` the end), only the stems that end
    in a digit are tried: most calls are API calls, whose stems end in their pass."""
    pattern = load_dump_formats().msprobe["module_pattern"]
    if found.digit_ends is None or not ends_in_digits(pattern):
        return [match is not None for match in map(pattern.match, found.at(at_firsts.tolist()))]
    flags = [False] * len(at_firsts)
    tried = found.digit_ends(at_firsts).nonzero()[0]
    for i, stem in zip(tried.tolist(), found.at(at_firsts[tried].tolist()), strict=True):
        flags[i] = pattern.match(stem) is not None
    return flags


def call_numbers(calls: list[Call]):
    """The calls' numbers in their side's :class:`CallIndex`, an int64 array."""
    import numpy as np

    return np.fromiter((call.index for call in calls), np.int64, len(calls))


def _integers(rows: Rows, column: str):
    """A column as the table's own integer array when it is one (no Python int per row), else its values."""
    import numpy as np

    values = rows.table[column].to_numpy() if column in rows.columns else None
    return values if isinstance(values, np.ndarray) and values.dtype.kind in "iu" else rows[column]


def _integers_at(rows: Rows, column: str, positions) -> list[int]:
    """``int`` of the column's values at ``positions`` (an array), from the integer array when it is one."""
    values = _integers(rows, column)
    if not isinstance(values, list):
        return values[positions].tolist()
    return [int(values[i]) for i in positions.tolist()]


def _earliest(orders, by_call, call_at):
    """The smallest execution order of each call's rows (an int64 array): each call's rows are a run of by_call."""
    import numpy as np

    return np.minimum.reduceat(np.asarray(orders, dtype=np.int64)[by_call], call_at[:-1])


def _texts(values) -> list[str]:
    """``cell_text`` of each value of an object array: the array's own str when all are str (one C pass decides)."""
    import pandas as pd

    if pd.api.types.infer_dtype(values, skipna=False) == "string":
        return values.tolist()
    return [v if type(v) is str else cell_text(v) for v in values.tolist()]


def known(value) -> bool:
    """Not None / NaN / <NA>."""
    if value is None:
        return False
    if type(value) is float:
        return value == value
    if type(value) in (int, str):
        return True
    import pandas as pd

    return not pd.isna(value)
