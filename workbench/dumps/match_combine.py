"""Statistics of a fused tensor from its parts' statistics alone (:mod:`.match_fused`): the concatenation's max,
min, mean, l2 norm and counts, for many fused tensors at once (:func:`combine_groups`: a group is a run of rows of
whole columns). Every value is the one the per-tensor formulas give in Python: the sums are ``math.fsum`` of each
group (correctly rounded, which a running sum is not), max and min keep the first of equal or unordered values as
Python's ``max`` and ``min`` do, squares are libm's ``pow``; only what IEEE arithmetic makes identical (products,
quotients, square roots, comparisons) is done on whole arrays."""
from __future__ import annotations

import math

from .match_calls import known

NUMBERS = ("numel", "max", "min", "mean", "l2norm")      # read as floats, NaN where missing
COUNTS = ("nan_count", "inf_count")                      # read as integers with a missing mask


def combine(rows: list[dict]) -> dict:
    """Statistics of the concatenation of several tensors (a fused tensor's parts) from theirs alone:
    max of maxes, min of mins, numel-weighted mean, l2 = sqrt of summed squares; counts summed."""
    import numpy as np

    numbers = {field: np.asarray([number(r[field]) for r in rows], dtype=np.float64) for field in NUMBERS}
    counts = {field: count_values([r[field] for r in rows]) for field in COUNTS}
    found = combine_groups(numbers, counts, np.zeros(1, dtype=np.int64), np.asarray([len(rows)], dtype=np.int64))
    return {field: values[0] if isinstance(values, list) else float(values[0]) for field, values in found.items()}


def combine_groups(numbers: dict, counts: dict, starts, sizes) -> dict:
    """:func:`combine` of every group (rows ``starts[g]`` to ``starts[g] + sizes[g]``, ``sizes`` ≥ 1) of the
    columns ``numbers`` (NUMBERS: float arrays, NaN for missing) and ``counts`` (COUNTS: :func:`count_values`).
    Returns the float statistics as float arrays, numel and the counts as lists of int or None."""
    import numpy as np

    spans = list(zip(starts.tolist(), (starts + sizes).tolist(), strict=True))
    numels = numbers["numel"]
    totals = _group_sums(numels.tolist(), spans)
    with np.errstate(all="ignore"):                       # inf and nan are values here, as in Python's floats
        sums = _group_sums((numbers["mean"] * numels).tolist(), spans)
        mean = np.where(totals != 0, sums / totals, np.nan)                # NaN != 0: NaN / NaN, as in Python
        l2 = np.sqrt(_group_sums(list(map(_square, numbers["l2norm"].tolist())), spans))
    finite = np.isfinite(totals).tolist()
    return {"max": _first_extreme(numbers["max"], starts, sizes, np.greater),
            "min": _first_extreme(numbers["min"], starts, sizes, np.less), "mean": mean, "l2norm": l2,
            "numel": [int(total) if ok else None for total, ok in zip(totals.tolist(), finite, strict=True)],
            **{field: _count_sums(*counts[field], spans) for field in COUNTS}}


def _group_sums(values: list[float], spans: list[tuple]):
    import numpy as np

    return np.asarray([_fsum(values[start:end]) for start, end in spans], dtype=np.float64)


def _first_extreme(values, starts, sizes, beats):
    """Python's ``max`` (``beats`` np.greater) or ``min`` (np.less) of each group: the first value, replaced by
    each later one that beats it. NaN and -0.0 come out as Python's do, which np.maximum's would not."""
    import numpy as np

    found = values[starts]
    for k in range(1, int(sizes.max())):
        groups = (sizes > k).nonzero()[0]
        later, current = values[starts[groups] + k], found[groups]
        found[groups] = np.where(beats(later, current), later, current)
    return found


def _count_sums(values: list[int], missing, spans: list[tuple]) -> list:
    """Each group's sum (Python ints: no overflow), None where one of its values is missing."""
    gaps = missing.tolist()
    return [None if any(gaps[start:end]) else sum(values[start:end]) for start, end in spans]


def count_values(values) -> tuple:
    """Counts as (their ints, 0 where missing; the missing mask) from Python values."""
    import numpy as np

    missing = [not known(v) for v in values]
    return [0 if gap else int(v) for v, gap in zip(values, missing, strict=True)], np.asarray(missing, dtype=bool)


def _fsum(values: list[float]) -> float:
    """``math.fsum``, or where it refuses (+inf with -inf, or partial sums past the largest double, which a dump's
    statistics can hold) the IEEE sum: inf or nan instead of an exception."""
    try:
        return math.fsum(values)
    except (ValueError, OverflowError):
        return sum(values)


def _square(value: float) -> float:
    """``value ** 2`` (libm's pow, as before), inf where that overflows (Python raises there)."""
    try:
        return value ** 2
    except OverflowError:
        return math.inf


def number(value) -> float:
    """A statistic as a float, NaN where missing."""
    return math.nan if not known(value) else float(value)
