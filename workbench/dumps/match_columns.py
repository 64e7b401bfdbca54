"""Columns of the pair and unmatched tables (:mod:`.match_rows`) with what is known of their values' types, so the
table gets the column type one dict per row would give without pandas inferring it from a list of Python values.

A column is ``(values, kind)``: ``PLAIN`` an int64/float64/bool array (what a list of its values infers), ``TEXT``
str and None only (an object column), ``None`` anything else (pandas infers from the list, as before). The dump
table's own types say which: numpy columns are plain, string columns are text, a nullable integer column without a
missing value is int64; a list's own types say it for the few values made in Python (fused pairs, layers).
``tests/test_compare_fast_matching.py`` holds the tables to the inference of a list on fuzzed and hostile columns.
"""
from __future__ import annotations

PLAIN, TEXT = "plain", "text"
PLAIN_DTYPES = ("int64", "float64", "bool")          # numpy column types a list of their values infers


def taken(rows, field: str, positions) -> tuple:
    """``field`` of a :class:`.match_calls.Rows` at ``positions``, typed."""
    import numpy as np
    import pandas as pd

    from .schema import object_values

    series = rows.table[field]
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.name in PLAIN_DTYPES:
        return series.to_numpy()[positions], PLAIN
    if isinstance(dtype, pd.StringDtype):
        return rows.take_objects(field, positions), TEXT
    part = series.take(positions)
    if isinstance(dtype, pd.Int64Dtype):
        missing = part.isna()
        if not missing.any():
            return part.to_numpy(dtype=np.int64), PLAIN
        if missing.all():
            return object_values(part), TEXT           # None only
    return object_values(part), None


def listed(values: list) -> tuple:
    """A list of Python values, typed by the types it holds."""
    import numpy as np

    types = set(map(type, values))
    if types <= {str, type(None)}:
        return values, TEXT
    plain = {frozenset((int,)): np.int64, frozenset((float,)): np.float64, frozenset((bool,)): np.bool_}.get(
        frozenset(types))
    if plain is not None:
        try:
            return np.asarray(values, dtype=plain), PLAIN
        except OverflowError:                 # an int beyond int64: pandas' inference decides
            pass
    return values, None


def joined(parts: list[tuple]) -> tuple:
    """The parts one after the other: typed when all are plain of one dtype or all text, else inferred later."""
    import numpy as np


    kinds = {kind for _, kind in parts}
    if kinds == {PLAIN} and len({values.dtype for values, _ in parts}) == 1:
        return np.concatenate([values for values, _ in parts]), PLAIN
    if kinds == {TEXT}:
        return np.concatenate([object_array(values) for values, _ in parts]), TEXT
    return joined_array([values for values, _ in parts]), None


def reordered(column: tuple, order) -> tuple:
    """The column's values at ``order`` (an array: of objects for text and untyped values)."""

    values, kind = column
    array = values if kind == PLAIN else object_array(values) if kind == TEXT else joined_array([values])
    return array[order], kind


def series(column: tuple, order, index):
    """``pd.Series([values[i] for i in order])``: typed columns as their arrays, the rest by the list's inference."""
    import pandas as pd

    from .match_gather import Gather

    values, kind = column
    if isinstance(values, Gather):
        return pd.Series(values.at(order), index=index)
    if kind == PLAIN:
        return pd.Series(values[order], index=index)
    if kind == TEXT:
        return pd.Series(object_array(values)[order], index=index)
    return untyped_series(values, order, index)


def sort_order(columns: list[tuple]):
    """The stable order of rows sorted by ``columns`` (the first the major key), as ``DataFrame.sort_values(keys,
    kind="stable")`` gives it, when every key is an integer/bool array or text without a missing value (np.lexsort
    of the values, or of each text's rank among its sorted distinct values); None otherwise (pandas sorts)."""
    import numpy as np
    import pandas as pd

    keys = []
    for values, kind in columns:
        if kind == PLAIN and values.dtype.kind in "iub":
            keys.append(values)
            continue
        if kind != TEXT:
            return None
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        uniques = list(uniques)
        if not all(type(v) is str for v in uniques) or -1 in codes:
            return None
        rank = np.empty(len(uniques), dtype=np.int64)
        rank[sorted(range(len(uniques)), key=uniques.__getitem__)] = np.arange(len(uniques))
        keys.append(rank[codes])
    return np.lexsort(keys[::-1])


def untyped_series(values, order, index):
    """``pd.Series([values[i] for i in order])`` of a list or an object array: a list's own inference; text (str
    and None only, which a list leaves as objects) goes in as the object array itself, without that pass."""
    import pandas as pd

    array = (values if plain_array(values) else object_array(values))[order]
    if plain_array(array):
        return pd.Series(array, index=index)          # an int64/float64/bool column: a list of its values infers it
    items = array.tolist()
    if set(map(type, items)) <= {str, type(None)}:
        return pd.Series(array, index=index)
    return pd.Series(items, index=index)


def listed_values(values):
    """A plain array as it is, anything else as a list (what pandas infers a column from)."""
    return values if plain_array(values) else values.tolist() if hasattr(values, "tolist") else values


def plain_array(values) -> bool:
    """An int64, float64 or bool array (what a list of its values would infer)."""
    import numpy as np

    return isinstance(values, np.ndarray) and values.dtype in (np.int64, np.float64, np.bool_)


def joined_array(parts: list):
    """Lists and arrays, one after the other, as one array: of their dtype when all are one such array dtype,
    else of objects."""
    import numpy as np

    if parts and all(plain_array(part) and part.dtype == parts[0].dtype for part in parts):
        return np.concatenate(parts)
    return np.concatenate([object_array(part) for part in parts]) if parts else np.empty(0, dtype=object)


def object_array(values):
    """An object array of ``values`` (itself when it is one), as pandas makes one of a list (nested sequences
    stay objects)."""
    import numpy as np

    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def expanded(sizes):
    """(the owner of each of sum(sizes) items, its place within its owner): groups of ``sizes`` laid end to end,
    e.g. the rows of slices ``starts[g]:starts[g] + sizes[g]`` are ``starts[owner] + within``::

        sizes   [2, 0, 3]
        owner   [0, 0, 2, 2, 2]
        within  [0, 1, 0, 1, 2]
    """
    import numpy as np

    owner = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    within = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return owner, within
