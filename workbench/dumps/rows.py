"""Pieces every dump reader shares: numbers and shapes checked with one-line errors, folder walking
by the layouts of ``datasets/dump_formats.yaml``, and the final step from rows to the schema's table."""
from __future__ import annotations

import math
import re
from pathlib import Path

from ..errors import InputError, location
from .formats import DumpFormats
from .msprobe_arrays import integers
from .schema import as_table

_SHAPE = re.compile(r"^\s*[\(\[]?\s*(?P<dims>[0-9,\s]*?)\s*,?\s*[\)\]]?\s*$")
INT64_MAX = (1 << 63) - 1                # element counts are int64 columns
NUMBER_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "+inf": math.inf}


def number(value, where: str, key: str) -> float:
    """A statistic as a float: JSON numbers, ``nan``/``inf`` spellings; empty or null → nan."""
    if type(value) is float:
        return value
    if value is None or value == "" or value == "N/A":
        return math.nan
    if isinstance(value, bool):  # msprobe writes a bool tensor's Max/Min as true/false (Mean/Norm null)
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in NUMBER_WORDS:
            return NUMBER_WORDS[text]
        try:
            return float(text)
        except ValueError:
            pass
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise InputError(where, f"{key} is {shown}, expected a number", "fix or regenerate the dump")


def count(value, where: str, key: str):
    """A non-negative integer count, or None when absent."""
    if value is None or value == "":
        return None
    result = number(value, where, key)
    if not math.isfinite(result) or result < 0 or result != int(result):
        raise InputError(where, f"{key} is {value!r}, expected a non-negative integer", "fix or regenerate the dump")
    return int(result)


def shape_of(value, where: str, key: str = "shape") -> list[int] | None:
    """``[2, 8, 16]`` / ``"(2,8,16)"`` / ``"()"`` → a list of dims; None when absent."""
    if value is None:
        return None
    if isinstance(value, str):
        found = _SHAPE.match(value)
        if not found:
            raise InputError(where, f"{key} is {value[:40]!r}, expected dims such as (2,8,16)", "fix or regenerate the dump")
        value = [int(part) for part in found.group("dims").replace(" ", "").split(",") if part]
    if not isinstance(value, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value):
        raise InputError(where, f"{key} is {str(value)[:40]}, expected a list of non-negative integers",
                         "fix or regenerate the dump")
    if math.prod(value) > INT64_MAX:
        raise InputError(where, f"{key} is {str(value)[:40]}, more elements than a 64-bit count holds",
                         "fix or regenerate the dump")
    return value


def shape_fields(dims: list[int] | None) -> dict:
    """``shape`` and ``numel`` columns of a dims list."""
    if dims is None:
        return {"shape": "", "numel": None}
    return {"shape": "x".join(str(n) for n in dims), "numel": math.prod(dims)}


def folder_number(path: Path, pattern: re.Pattern, group: str) -> int | None:
    found = pattern.match(path.name)
    return int(found.group(group)) if found else None


def subfolders(folder: Path) -> list[Path]:
    try:
        return sorted((p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")), key=_natural)
    except OSError as error:
        raise InputError(str(folder), f"cannot list it ({error.strerror})", "check the path") from None


def _natural(path: Path):
    return [int(piece) if piece.isdigit() else piece for piece in re.split(r"(\d+)", path.name)]


def check_same_ranks(found: dict[int, set[int]], root: Path, what: str) -> None:
    """Every step holds the same rank folders; a rank present in one step and missing in another is an error."""
    every = set().union(*found.values()) if found else set()
    for step, ranks in sorted(found.items()):
        missing = sorted(every - ranks)
        if missing:
            raise InputError(str(root), f"step {step} has no {what} for rank(s) {', '.join(map(str, missing))}, "
                             "which other steps have", "the dump is incomplete: re-dump or remove that step")


def finish(rows: list[dict], side: str, fmt: DumpFormats):
    """Rows → the schema's table: side, execution order per (rank, step), layer from the module path."""
    counters: dict[tuple[int, int], int] = {}
    for row in rows:
        key = (row.get("rank", 0), row.get("step", 0))
        row["order"] = counters.get(key, 0)
        counters[key] = row["order"] + 1
        row["side"] = side
        row.setdefault("logical_module", "")
        row.setdefault("module_path", "")
        row["layer"] = fmt.layer(row["module_path"]) if row["module_path"] else None
        for text in ("md5", "stack_id", "name", "op"):
            row.setdefault(text, "")
    return as_table(rows)


def where_line(path: Path, line: int | None = None, key: str | None = None) -> str:
    return location(path, line, key)


def concat_columns(parts: list[dict]) -> dict:
    """Several readers' column dicts (same keys) → one, in order."""

    if len(parts) == 1:
        return parts[0]
    keys = dict.fromkeys(key for part in parts for key in part)
    return {key: joined_column([part[key] for part in parts]) for key in keys}


def joined_column(columns: list):
    """One column of several parts: pandas arrays of one type joined as such, the rest as numpy arrays."""
    import numpy as np
    import pandas as pd

    first = columns[0]
    if isinstance(first, pd.api.extensions.ExtensionArray) and all(
            type(c) is type(first) and c.dtype == first.dtype for c in columns):
        return type(first)._concat_same_type(columns)
    return np.concatenate([np.asarray(c, dtype=_kind(c)) for c in columns])


def _kind(values):
    import numpy as np

    return values.dtype if isinstance(values, np.ndarray) else object


def table_from_columns(columns: dict, side: str, fmt: DumpFormats):
    """Column values (lists or arrays, any subset of the schema's) → the table, as :func:`finish` makes it from
    row dicts: side, execution order per (rank, step), layer from the module path, "" for absent text. The arrays
    are the table's afterwards (not copied): the caller hands them over."""
    import numpy as np
    import pandas as pd

    from .layers import layer_numbers
    from .schema import COLUMNS

    size = len(columns["name"])
    columns = dict(columns)
    rank = np.asarray(columns.get("rank", np.zeros(size, np.int64)), dtype=np.int64)
    step = np.asarray(columns.get("step", np.zeros(size, np.int64)), dtype=np.int64)
    columns["rank"], columns["step"] = rank, step
    if size and rank.min() == rank.max() and step.min() == step.max():
        columns["order"] = np.arange(size, dtype=np.int64)      # one (rank, step): its count is the position
    else:
        columns["order"] = pd.DataFrame({"r": rank, "s": step}).groupby(["r", "s"], sort=False).cumcount().to_numpy()
    columns["side"] = repeated(side, size)
    module = columns.get("module_path", repeated("", size))
    if isinstance(module, pd.Categorical):                 # numbered by the reader (msprobe_arrays.spread_codes)
        codes, paths = module.codes, module.categories
        module = np.asarray(module, dtype=object)
    else:
        module = np.asarray(module, dtype=object)
        codes, paths = pd.factorize(module, use_na_sentinel=False)
    columns["module_path"] = module
    layers = layer_numbers(paths.tolist(), fmt)
    # the codes are already the distinct ids 0..k-1, each present: no second factorize of every row
    columns["layer"] = integers(codes, layers.__getitem__, (np.arange(len(layers)), codes))
    for text in ("logical_module", "md5", "stack_id", "name", "op"):
        if text not in columns:
            columns[text] = repeated("", size)
    data, taken = {}, set()
    for name, dtype in COLUMNS.items():
        values = columns.get(name)
        if values is None:
            data[name] = pd.array([None] * size, dtype=dtype) if dtype in ("string", "Int64") else \
                pd.array(np.full(size, np.nan), dtype=dtype)
        else:
            # the readers' arrays are handed over: taken as they are (a copy of an object column counted every
            # str's references once more), unless one array is given for two columns
            data[name] = pd.array(values if not isinstance(values, np.ndarray) or values.dtype != object
                                  or dtype == "string" else values.tolist(), dtype=dtype, copy=id(values) in taken)
            taken.add(id(values))
    # pd.array made each column a new array: the frame takes them as they are (a second copy of every column,
    # the object columns' references counted one by one, took a third of this function)
    return pd.DataFrame(data, copy=False)


def repeated(value, size: int):
    """An object array holding ``value`` ``size`` times: one object (``np.full`` would make a str per row)."""
    import numpy as np

    out = np.empty(size, dtype=object)
    out.fill(value)
    return out
