"""Statistics of a fused tensor from its parts' statistics alone (:mod:`.match_fused`): the concatenation's max,
min, mean, l2 norm and counts, and the pair side those rows make."""
from __future__ import annotations

import math

from .match_calls import known


def combined_side(rows: list[dict]) -> dict:
    """A pair side of several rows (a fused tensor's parts): their texts joined by "+", the first dtype, the
    combined statistics."""
    joined = {k: "+".join(str(r.get(k) or "") for r in rows) for k in ("name", "op", "module_path", "shape",
                                                                      "stack_id", "source")}
    return {**joined, "dtype": rows[0].get("dtype"), **combine(rows)}


def combine(rows: list[dict]) -> dict:
    """Statistics of the concatenation of several tensors (a fused tensor's parts) from theirs alone:
    max of maxes, min of mins, numel-weighted mean, l2 = sqrt of summed squares; counts summed."""
    numels = [_number(r["numel"]) for r in rows]
    total = _fsum(numels)
    mean = _fsum([_number(r["mean"]) * n for r, n in zip(rows, numels, strict=False)]) / total if total else math.nan
    return {"max": max(_number(r["max"]) for r in rows), "min": min(_number(r["min"]) for r in rows),
            "mean": mean, "l2norm": math.sqrt(_fsum([_square(_number(r["l2norm"])) for r in rows])),
            "numel": int(total) if math.isfinite(total) else None,
            "nan_count": _sum_counts(r["nan_count"] for r in rows), "inf_count": _sum_counts(r["inf_count"] for r in rows)}


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


def _number(value) -> float:
    return math.nan if not known(value) else float(value)


def _sum_counts(values):
    values = list(values)
    return None if not all(known(v) for v in values) else int(sum(int(v) for v in values))
