"""Verdicts on matched pairs (:mod:`.match`): differences of max/min/mean/l2norm against dtype-aware
tolerances, widened by the reference's own run-to-run noise; nan/inf on one side; tensor metrics.

Relative differences are taken against the reference's (A's) scale: ``|a - b| / max(|a|, rms_a)`` with
``rms_a = l2norm / sqrt(numel)``, so a mean near zero is judged against the tensor's size, not against 0.
"""
from __future__ import annotations

import math

from .match_calls import STATS
from .schema import row_dicts

WARNING_FACTOR = 10.0                # beyond the tolerance but within 10x: warning; past it: error
NOISE_FACTOR = 2.0                   # a rerun samples the noise once: the tolerance is twice the spread seen
def normalise_dtype(name) -> str:
    """``Float32``, ``torch.float32``, ``mindspore.float32``, ``fp32`` → ``float32``: the readers' one table of
    spellings (``datasets/dump_formats.yaml`` ``dtypes``)."""
    from .formats import load_dump_formats

    return load_dump_formats().dtype(str(name or ""))


def tolerance(dtype_a, dtype_b) -> float:
    """The lower precision's default tolerance (``converters/operators.yaml`` ``tolerances``)."""
    from .match_ops import load_operators

    table = load_operators().tolerances
    return max(table.get(normalise_dtype(d).split("_")[0], table["default"]) for d in (dtype_a, dtype_b))


def relative_differences(row: dict) -> dict[str, float]:
    """Per statistic: |a - b| / max(|a|, rms_a) (nan where a side lacks it)."""
    numel = row.get("a_numel")
    l2 = _float(row.get("a_l2norm"))
    rms = l2 / math.sqrt(float(numel)) if numel and _present(numel) and math.isfinite(l2) else math.nan
    out = {}
    for stat in STATS:
        a, b = _float(row.get(f"a_{stat}")), _float(row.get(f"b_{stat}"))
        scale = max(abs(a) if math.isfinite(a) else 0.0, rms if math.isfinite(rms) else 0.0, 1e-30)
        out[stat] = abs(a - b) / scale if math.isfinite(a) and math.isfinite(b) else math.nan
    return out


def nan_inf_note(row: dict) -> str:
    """Which side alone holds nan/inf (counts, or non-finite statistics); "" when none or both."""
    bad = []
    for side in ("a", "b"):
        counts = [row.get(f"{side}_nan_count"), row.get(f"{side}_inf_count")]
        stats = [_float(row.get(f"{side}_{s}")) for s in ("max", "min")]
        bad.append(any(_present(c) and int(c) > 0 for c in counts) or any(math.isinf(s) or math.isnan(s)
                                                                           for s in stats if _present(s)))
    if bad[0] == bad[1]:
        return ""
    return "nan/inf only in A" if bad[0] else "nan/inf only in B"


def evaluate(pairs, noise: dict | None = None, *, in_place: bool = False):
    """``pairs`` with rel_<stat>, worst_rel, tolerance, noise, note and status (pass | warning | error).
    ``noise``: (rank, step, A row name) -> observed run-to-run relative spread (:func:`noise_spread`).
    ``in_place``: the columns are added to ``pairs`` itself (no copy of a large table).

    Computed on whole columns (numpy), with the arithmetic of :func:`relative_differences`,
    :func:`nan_inf_note` and :func:`tolerance` per row; tolerances and dtype notes once per dtype pair."""
    import numpy as np

    frame = pairs if in_place else pairs.copy()
    if not len(frame):
        for key in (*(f"rel_{s}" for s in STATS), "worst_rel", "tolerance", "noise", "note", "status"):
            frame[key] = []
        return frame
    rel = _relative_columns(frame)
    for stat in STATS:
        frame[f"rel_{stat}"] = rel[stat]
    stacked = np.column_stack([rel[stat] for stat in STATS])
    finite = np.where(np.isfinite(stacked), stacked, -np.inf)
    worst = finite.max(axis=1, initial=-np.inf)
    worst[worst == -np.inf] = np.nan
    pair_of, pairs_found = _dtype_pairs(frame)
    tol = np.array([tolerance(*pair) for pair in pairs_found], dtype=np.float64)[pair_of]
    spread = np.full(len(frame), np.nan)
    if noise:
        keys = zip(frame["rank"].tolist(), frame["step"].tolist(), frame["a_name"].tolist(), strict=True)
        spread = np.array([noise.get(key, math.nan) for key in keys], dtype=np.float64)
    widened = np.isfinite(spread)
    tol[widened] = np.maximum(tol[widened], NOISE_FACTOR * spread[widened])
    bad = _nan_inf_columns(frame)
    # object arrays taken from a few str by code: np.where of str made a fixed-width text array, then a str per row
    alike = bad[0] == bad[1]                                # no nan/inf note
    note = _texts("", "nan/inf only in A", "nan/inf only in B")[np.where(alike, 0, np.where(bad[0], 1, 2))]
    status = _texts("pass", "warning", "error")[np.where(~np.isfinite(worst) | (worst <= tol), 0,
                                                         np.where(worst <= WARNING_FACTOR * tol, 1, 2))]
    status[~alike] = "error"
    dtype_notes = np.array([_dtype_note_of(*pair) for pair in pairs_found], dtype=object)[pair_of]
    note = np.where(alike, dtype_notes, note)
    frame["worst_rel"] = worst
    frame["tolerance"] = tol
    frame["noise"] = spread
    frame["note"] = note                          # object arrays of str: what the lists were
    frame["status"] = status
    return frame


def _texts(*texts: str):
    """An object array of ``texts``."""
    import numpy as np

    array = np.empty(len(texts), dtype=object)
    array[:] = texts
    return array


def _dtype_pairs(frame) -> tuple:
    """(each row's number of its (A dtype, B dtype) pair, the distinct pairs): tolerances and notes are found
    once per pair, numbered by whole columns (:func:`.match_codes.tuple_codes`), not a tuple per row."""
    import numpy as np
    import pandas as pd

    from .match_codes import tuple_codes

    a, b = frame["a_dtype"].to_numpy(dtype=object), frame["b_dtype"].to_numpy(dtype=object)
    if pd.isna(a).any() or pd.isna(b).any():      # None and nan are one value to pandas, not to normalise_dtype
        found: dict = {}
        pair_of = np.asarray([found.setdefault(pair, len(found)) for pair in zip(a.tolist(), b.tolist(), strict=True)])
        return pair_of, list(found)
    pair_of = tuple_codes((a, b))
    firsts = np.full(int(pair_of.max()) + 1, len(pair_of), dtype=np.int64)
    np.minimum.at(firsts, pair_of, np.arange(len(pair_of), dtype=np.int64))
    return pair_of, list(zip(a[firsts].tolist(), b[firsts].tolist(), strict=True))


def _column(frame, name: str):
    """A column as float64 (None / <NA> / missing: nan)."""
    import numpy as np
    import pandas as pd

    if name not in frame:
        return np.full(len(frame), np.nan)
    column = frame[name]
    if column.dtype == object and column.isna().all():   # the nan/inf counts most dumps lack: to_numeric of
        return np.full(len(frame), np.nan)               # None is nan, found a value at a time (~6 ms per column)
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _relative_columns(frame) -> dict:
    """:func:`relative_differences` on every row at once."""
    import numpy as np

    numel, l2 = _column(frame, "a_numel"), _column(frame, "a_l2norm")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        usable = (numel != 0) & np.isfinite(numel) & np.isfinite(l2)
        rms = np.where(usable, l2 / np.sqrt(np.where(usable, numel, 1.0)), np.nan)
        rms_part = np.where(np.isfinite(rms), rms, 0.0)
        out = {}
        for stat in STATS:
            a, b = _column(frame, f"a_{stat}"), _column(frame, f"b_{stat}")
            scale = np.maximum(np.maximum(np.where(np.isfinite(a), np.abs(a), 0.0), rms_part), 1e-30)
            out[stat] = np.where(np.isfinite(a) & np.isfinite(b), np.abs(a - b) / scale, np.nan)
    return out


def _nan_inf_columns(frame) -> tuple:
    """:func:`nan_inf_note`'s test per side on every row: a positive nan/inf count, or an infinite max/min."""
    import numpy as np

    out = []
    for side in ("a", "b"):
        bad = np.zeros(len(frame), dtype=bool)
        for name in (f"{side}_nan_count", f"{side}_inf_count"):
            bad |= _column(frame, name) > 0
        for stat in ("max", "min"):
            bad |= np.isinf(_column(frame, f"{side}_{stat}"))
        out.append(bad)
    return tuple(out)


def _dtype_note_of(dtype_a, dtype_b) -> str:
    a, b = normalise_dtype(dtype_a), normalise_dtype(dtype_b)
    if a == b:
        return ""
    from .match_ops import load_operators

    table = load_operators().tolerances
    lower = a if table.get(a, 0) >= table.get(b, 0) else b
    return f"{a} vs {b}: judged at {lower}'s tolerance"


def noise_spread(reference, rerun) -> dict:
    """The run-to-run spread of the reference side: rows of two dumps of the same framework and code pair up
    by (rank, step, name); the worst relative difference of their statistics, per row."""
    keys = ["rank", "step", "name"]
    merged = reference.merge(rerun, on=keys, suffixes=("_a", "_b"))
    spread = {}
    for row in row_dicts(merged):
        view = {f"a_{s}": row[f"{s}_a"] for s in STATS} | {f"b_{s}": row[f"{s}_b"] for s in STATS}
        view["a_numel"] = row["numel_a"]
        finite = [v for v in relative_differences(view).values() if math.isfinite(v)]
        spread[(row["rank"], row["step"], row["name"])] = max(finite) if finite else math.nan
    return spread


def tensor_metrics(a, b) -> dict[str, float]:
    """Both sides' tensors: cosine, max abs error, max relative error, and the share of elements whose
    relative error is within one-thousandth and five-thousandths (msprobe's "One/Five Thousandth Err Ratio")."""
    import numpy as np

    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.size != y.size:
        raise ValueError(f"tensors of {x.size} and {y.size} elements")
    diff = np.abs(x - y)
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    rel = diff / np.maximum(np.abs(x), np.finfo(np.float64).tiny)
    return {"cosine": float(x @ y / norms) if norms else (1.0 if not diff.any() else math.nan),
            "max_abs_err": float(diff.max(initial=0.0)), "max_rel_err": float(rel.max(initial=0.0)),
            "one_thousandth_ratio": float((rel <= 1e-3).mean()) if x.size else 1.0,
            "five_thousandths_ratio": float((rel <= 5e-3).mean()) if x.size else 1.0}


def _float(value) -> float:
    try:
        return float(value) if _present(value) else math.nan
    except (TypeError, ValueError):
        return math.nan


def _present(value) -> bool:
    import pandas as pd

    return value is not None and not (pd.isna(value) if not isinstance(value, str) else False)
