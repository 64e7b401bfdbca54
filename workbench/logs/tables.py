"""Build the tidy tables from rows collected in lists (one DataFrame per file, never per row).

Every text column (``run`` and ``metric``; the local norms' ``param`` and ``definition``) is a pandas
Categorical (categories sorted, only those used): a 2.6M-row table of one run and a dozen metrics then
holds small integer codes, not millions of references to the same strings, and is built from the
readers' codes without a Python object per row (a MindFormers log of 300 steps x 1,000 parameters
faulted in 4.8 MB of object columns a read, ~1,150 fresh pages, for two texts repeated 300,000 times).
Comparisons (``== "lm_loss"``), ``unique``, ``set`` and ``isin`` read them as strings; group by them
with ``observed=True``; set some of their rows with ``set_texts``.

``rank``, ``step`` and ``line`` (and the local norms' ``micro_step``, ``position``, ``numel``) are int32
(a 2.6M-row table then faults in 31 MB less fresh memory than with int64): a file under 2 GiB has fewer than 2^31 lines, and steps and ranks are far below
2^31. One rule for every reader (``narrow``): a table whose column holds a value outside int32 has
that column as int64, so values are never wrapped; ``pd.concat`` of both gives int64.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

COLUMN_TYPES = {"run": "category", "rank": "int32", "step": "int32", "metric": "category", "value": "float64",
                "line": "int32", "micro_step": "int32", "position": "int32", "param": "category", "numel": "int32",
                "definition": "category"}
INT32 = np.iinfo(np.int32)


def narrow(values, kind: str = "int32") -> np.ndarray:
    """An integer column as ``kind``; an int32 column with a value outside int32 as int64 (the module doc)."""
    values = np.asarray(values, dtype=np.int64) if not isinstance(values, np.ndarray) or values.dtype.kind != "i" \
        else values
    if kind == "int32" and len(values) and (values.min() < INT32.min or values.max() > INT32.max):
        return values.astype(np.int64, copy=False)
    return values.astype(kind, copy=False)


def frame(rows: list[tuple], columns: tuple[str, ...]) -> pd.DataFrame:
    """``rows`` as a DataFrame with the schema's columns and dtypes (empty frames keep them too)."""
    table = pd.DataFrame(rows, columns=list(columns))
    types = {column: COLUMN_TYPES[column] for column in columns}
    for column, kind in types.items():
        if kind == "int32" and len(table):
            types[column] = narrow(table[column].to_numpy(dtype=np.int64)).dtype
    return table.astype(types)


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
        elif kind == "int32":
            data[name] = narrow(np.array(values, dtype=np.int64))
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


def code_of(names: list[str], name: str) -> int:
    """The index of ``name`` in ``names`` (appended when new): a Categorical's codes, built row by row."""
    if name not in names:
        names.append(name)
    return names.index(name)




def texts(text: str, count: int) -> pd.Categorical:
    """One text ``count`` times, as a Categorical (codes from ``calloc``: pages never written)."""
    return pd.Categorical.from_codes(np.zeros(count, dtype=np.int8), [text], validate=False)


def set_texts(column: pd.Series, positions, values) -> pd.Categorical:
    """The text column ``column`` with the rows at ``positions`` (0-based) set to ``values``, as a
    Categorical of the texts it then holds (a Categorical takes no text outside its categories in place)."""
    held = column.to_numpy(dtype=object, copy=True)
    held[np.asarray(positions, dtype=np.int64)] = values
    return pd.Categorical(held)
