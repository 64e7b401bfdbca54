"""The side columns of the fused pairs (:meth:`.match_rows.PairBuilder.add_fused`), made for all pairs at once from
the tables' own arrays: a side of a pair is one row (its fields as they are) or a fused tensor's parts (their texts
joined by "+", the first part's dtype, the combined statistics of :func:`.match_combine.combine_groups`).

Each column comes typed (:mod:`.match_columns`) as :func:`.match_columns.listed` types the list of the values one
dict per pair held: a float or integer array where that list would infer one, an object array of str and None for
text, and that list itself for anything else (pandas infers it, as before). Reading every field of every row into
Python values, a dict per fused tensor and a list per column made these ~0.09 s of the bench's 0.17 s pair table.
"""
from __future__ import annotations

from itertools import chain

from .match_columns import PLAIN, TEXT, expanded, listed, object_array, taken
from .match_combine import COUNTS, NUMBERS, combine_groups, count_values, number

JOINED = ("name", "op", "module_path", "shape", "stack_id", "source")       # a fused tensor's: its parts' joined


def side_rows(lists: list[list[int]]) -> tuple:
    """Per pair row positions (lists) as (flat positions, each pair's start in them, each pair's count)."""
    import numpy as np

    sizes = np.fromiter(map(len, lists), np.int64, len(lists))
    flat = np.fromiter(chain.from_iterable(lists), np.int64, int(sizes.sum()))
    return flat, np.cumsum(sizes) - sizes, sizes


def side_columns(rows, spans: tuple, fields: tuple[str, ...]) -> dict[str, tuple]:
    """``fields`` of one side of every pair, typed; ``spans``: :func:`side_rows`."""
    import numpy as np

    flat, starts, sizes = spans
    first = flat[starts]
    several = (sizes > 1).nonzero()[0]
    inner = _inner(flat, starts[several], sizes[several])          # the fused tensors' parts, and their groups
    combined = _combined(rows, inner) if len(several) else {}
    found = {}
    for field in fields:
        base = (taken(rows, field, first) if field in rows.columns
                else (np.full(len(first), None, dtype=object), TEXT))
        if not len(several) or field == "dtype":                   # a fused tensor's dtype: its first part's
            found[field] = typed(base)
            continue
        found[field] = _merged(base, several, _joined(rows, field, inner) if field in JOINED else combined[field])
    return found


def first_orders(rows, spans: tuple) -> tuple:
    """Each pair's smallest ``order`` among its rows of ``rows``, typed."""
    import numpy as np

    flat, starts, sizes = spans
    values, kind = taken(rows, "order", flat)
    if kind == PLAIN and values.dtype.kind in "iu":
        return np.minimum.reduceat(values, starts), PLAIN
    values = values.tolist()
    return listed([min(values[start:start + size]) for start, size in zip(starts.tolist(), sizes.tolist(),
                                                                           strict=True)])


def typed(column: tuple) -> tuple:
    """A :func:`.match_columns.taken` column as ``listed`` types the list of its values."""
    values, kind = column
    return column if kind in (PLAIN, TEXT) else listed(values.tolist())


def _inner(flat, starts, sizes) -> tuple:
    """The rows of the groups at ``starts`` (``sizes`` rows each) of ``flat``: (their positions, their starts
    there, their sizes)."""
    import numpy as np

    owner, within = expanded(sizes)
    return flat[starts[owner] + within], np.cumsum(sizes) - sizes, sizes


def _combined(rows, inner: tuple) -> dict:
    positions, starts, sizes = inner
    numbers = {field: _floats(rows, field, positions) for field in NUMBERS}
    counts = {field: _counts(rows, field, positions) for field in COUNTS}
    return combine_groups(numbers, counts, starts, sizes)


def _joined(rows, field: str, inner: tuple) -> list[str]:
    """Each group's texts joined by "+", a missing or empty one as ""."""
    import numpy as np
    import pandas as pd

    positions, starts, sizes = inner
    if field not in rows.columns:
        texts = [""] * len(positions)
    else:
        values = rows.take_objects(field, positions)
        if isinstance(rows.table[field].dtype, pd.StringDtype):           # str, or None where missing
            values[np.equal(values, None)] = ""
            texts = values.tolist()
        else:
            texts = [str(v or "") for v in values.tolist()]
    return ["+".join(texts[start:start + size]) for start, size in zip(starts.tolist(), sizes.tolist(), strict=True)]


def _floats(rows, field: str, positions):
    """``field`` at ``positions`` as floats, NaN where missing (:func:`.match_combine.number` of each value)."""
    import numpy as np
    import pandas as pd

    if field not in rows.columns:
        return np.full(len(positions), np.nan)
    series = rows.table[field]
    if series.dtype == np.float64:
        return series.to_numpy()[positions]
    if isinstance(series.dtype, pd.Int64Dtype):
        array = series.array
        values = array._data[positions].astype(np.float64)        # float(int): both round to nearest even
        values[array._mask[positions]] = np.nan
        return values
    return np.fromiter(map(number, rows.take_objects(field, positions).tolist()), np.float64, len(positions))


def _counts(rows, field: str, positions) -> tuple:
    """``field`` at ``positions`` as :func:`.match_combine.count_values`."""
    import numpy as np
    import pandas as pd

    if field in rows.columns and isinstance(rows.table[field].dtype, pd.Int64Dtype):
        array = rows.table[field].array
        missing = array._mask[positions]
        return np.where(missing, 0, array._data[positions]).tolist(), missing
    if field in rows.columns and rows.table[field].dtype == np.int64:
        return rows.table[field].to_numpy()[positions].tolist(), np.zeros(len(positions), dtype=bool)
    values = rows.take_objects(field, positions).tolist() if field in rows.columns else [None] * len(positions)
    return count_values(values)


def _merged(base: tuple, several, replaced) -> tuple:
    """The column ``base`` (typed, one value per pair) with the rows ``several`` replaced (a float array, or a list
    of int/None or of str), typed as ``listed`` types the list of those values."""
    import numpy as np

    values, kind = base
    if kind == PLAIN and isinstance(replaced, np.ndarray) and replaced.dtype == values.dtype:
        values[several] = replaced
        return values, PLAIN
    if kind == PLAIN and values.dtype == np.int64 and isinstance(replaced, list) and None not in replaced:
        try:
            values[several] = np.asarray(replaced, dtype=np.int64)
            return values, PLAIN
        except OverflowError:                         # a sum beyond int64: as the list of values, below
            pass
    if kind == TEXT and isinstance(replaced, list) and all(type(v) is str for v in replaced):
        values[several] = object_array(replaced)
        return values, TEXT
    found = values.tolist()
    for at, value in zip(several.tolist(), replaced.tolist() if isinstance(replaced, np.ndarray) else replaced,
                         strict=True):
        found[at] = value
    return listed(found)
