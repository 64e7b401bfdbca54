"""Build the tidy tables from rows collected in lists (one DataFrame per file, never per row).

The series table's ``run`` and ``metric`` columns are pandas Categoricals (categories sorted): a
2.6M-row table of one run and a dozen metrics then holds small integer codes, not millions of
references to the same strings, and is built from the readers' codes without a Python object per
row. Comparisons (``== "lm_loss"``), ``unique``, ``set`` and ``isin`` read them as strings.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

COLUMN_TYPES = {"run": "category", "rank": "int64", "step": "int64", "metric": "category", "value": "float64",
                "line": "int64", "micro_step": "int64", "position": "int64", "param": "object", "numel": "int64",
                "definition": "object"}


def frame(rows: list[tuple], columns: tuple[str, ...]) -> pd.DataFrame:
    """``rows`` as a DataFrame with the schema's columns and dtypes (empty frames keep them too)."""
    table = pd.DataFrame(rows, columns=list(columns))
    return table.astype({column: COLUMN_TYPES[column] for column in columns})


def typed_frame(rows: list[tuple], columns: tuple[str, ...]) -> pd.DataFrame:
    """``frame(rows, columns)`` for rows whose values have their columns' types already (ints within
    int64, floats, strings), built column by column without pandas inferring each cell."""
    if not rows:
        return frame(rows, columns)
    data = {}
    for name, values in zip(columns, zip(*rows, strict=True), strict=True):
        kind = COLUMN_TYPES[name]
        if kind == "category":
            data[name] = pd.Categorical(values)
        elif kind == "object":
            data[name] = np.empty(len(values), dtype=object)
            data[name][:] = values
        else:
            data[name] = np.array(values, dtype=kind)
    return pd.DataFrame(data, copy=False)


def categorical(codes: np.ndarray, names: list[str], counts: np.ndarray | None = None, recode=None) -> pd.Categorical:
    """``names[codes]`` as a Categorical with the used names as sorted categories (what
    ``astype("category")`` gives), built from the codes. ``counts``: how many rows each code has, when
    the caller counted them; ``recode(codes, remap)``: ``remap[codes]`` done in place (the compiled
    scanner's, for its int8 codes)."""
    if counts is None:
        counts = np.bincount(codes, minlength=len(names)) if len(codes) else np.zeros(0, np.int64)
    used = np.flatnonzero(counts[:len(names)])
    ordered = sorted(used.tolist(), key=names.__getitem__)
    if ordered != list(range(len(names))):
        remap = np.full(max(len(names), 1), -1, dtype=np.int32)
        remap[ordered] = np.arange(len(ordered))
        codes = recode(codes, remap) if recode is not None and codes.dtype == np.int8 else remap[codes]
    return pd.Categorical.from_codes(codes, [names[index] for index in ordered], validate=False)


def labels(label: str, count: int) -> pd.Categorical:
    """One run label ``count`` times, as a Categorical."""
    return pd.Categorical.from_codes(np.zeros(count, dtype=np.int8), [label], validate=False)
