"""Columns of msprobe rows, filled one tensor record at a time: no per-row dict, no per-row Series.

Per-entry values (op, module path, pass, stack id) are kept once per entry and spread over the entry's rows
by index when the columns are handed over (:meth:`Sink.columns`)."""
from __future__ import annotations

import math

from ..errors import InputError
from .formats import DumpFormats
from .rows import count, number, repeated, shape_fields, shape_of

FIX = "fix or regenerate the msprobe dump"
ROW_COLUMNS = ("name", "io", "slot", "dtype", "shape", "numel", "nan_count", "inf_count", "md5")
SCALAR_STATS = ("max", "min", "mean", "l2norm")
_INT_TYPES = frozenset((int,) * rank for rank in range(33))     # the element types of an integer shape
ENTRY_COLUMNS = ("op", "module_path", "pass", "stack_id")
IO_LABELS = {"input": "input", "output": "output", "parameter": "parameters"}
"""A row's io -> the word its name carries (``<entry>.parameters.0``); both readers name rows with it."""


class Sink:
    def __init__(self, path: str, fmt: DumpFormats):
        self.path, self.fmt = path, fmt
        m = fmt.msprobe
        self.tensor_types, self.scalar_types, self.scalar_rows = m["tensor_types"], m["scalar_types"], m["scalar_rows"]
        fields = m["stats"]
        self.stat_columns = tuple(dict.fromkeys((*SCALAR_STATS, *fields)))
        self.stat_fields = tuple(fields.get(column) for column in self.stat_columns)     # None: not dumped
        self.md5_fields = m["md5_fields"]
        self.records: list[tuple] = []           # one tuple a row: ROW_COLUMNS, the stats, the entry's number
        self.entries: list[tuple] = []           # one tuple an entry: ENTRY_COLUMNS
        self._shapes: dict[tuple, tuple[str, int]] = {}
        self._dtypes: dict[str, str] = {}

    def start_entry(self, op: str, module_path: str, pass_: str, stack_id: str) -> None:
        self.entries.append((op, module_path, pass_, stack_id))

    def leaf(self, value: dict, name: str, io: str, slot: int) -> None:
        """One tensor record (a mapping with ``type``) → one row; numbers only with ``scalar_rows``; other
        types (dtypes, strings, slices) are not data. The common case costs a few dict look-ups: dtype
        spellings and shapes are converted once each."""
        kind = value["type"]
        if type(kind) is not str:
            if not isinstance(kind, str):
                raise InputError(self._where(name), f"type is {type(kind).__name__}, expected a string", FIX)
        if kind not in self.tensor_types:
            self._scalar(value, kind, name, io, slot)
            return
        dtype = value.get("dtype")
        normalised = self._dtypes.get(dtype) if type(dtype) is str else None
        if normalised is None:
            normalised = self._dtype(dtype, name)
        dims = value.get("shape")
        found = None
        if type(dims) is list:
            found = self._shapes.get(tuple(dims))
            if found is not None and tuple(map(type, dims)) not in _INT_TYPES:
                found = None                                # True/1.0 hash like 1: checked the long way
        if found is None:
            found = self._shape(dims, name)
        get = value.get
        stats = [get(field) if field is not None else math.nan for field in self.stat_fields]
        for index, stat in enumerate(stats):
            if type(stat) is not float:
                field = self.stat_fields[index]
                stats[index] = number(stat, f"{self._where(name)} {field}", field)
        md5 = ""
        for field in self.md5_fields:
            text = get(field)
            if text is not None and isinstance(text, (str, int)):
                md5 = str(text)
                break
        nan = count(value["nan_count"], self._where(name), "nan_count") if "nan_count" in value else None
        inf = count(value["inf_count"], self._where(name), "inf_count") if "inf_count" in value else None
        self.records.append((name, io, slot, normalised, *found, nan, inf, md5, *stats, len(self.entries) - 1))

    def _dtype(self, dtype, name: str) -> str:
        if not isinstance(dtype, str):
            raise InputError(self._where(name), f"dtype is {type(dtype).__name__}, expected a string such as "
                             "torch.float32", FIX)
        found = self._dtypes[dtype] = self.fmt.dtype(dtype)
        return found

    def _scalar(self, value: dict, kind: str, name: str, io: str, slot: int) -> None:
        """A number passed as an argument: a row only with ``scalar_rows`` (max = min = mean = the value)."""
        if kind not in self.scalar_types or not self.scalar_rows:
            return
        number_ = value.get("value")
        if not isinstance(number_, (int, float)):
            return                                     # None / non-numeric: nothing to compare
        number_ = float(number_)
        scalar = {"max": number_, "min": number_, "mean": number_, "l2norm": abs(number_)}
        self.records.append((name, io, slot, self.scalar_types[kind], "", 1, None, None, "",
                             *(scalar.get(column, math.nan) for column in self.stat_columns), len(self.entries) - 1))

    def _shape(self, dims, name: str) -> tuple[str, int | None]:
        fields = shape_fields(shape_of(dims, self._where(name)))
        found = (fields["shape"], fields["numel"])
        if type(dims) is list and all(type(n) is int for n in dims):
            self._shapes[tuple(dims)] = found
        return found

    def _where(self, name: str) -> str:
        return f"{self.path} [{name}]"

    def columns(self, *, step: int, rank: int) -> dict:
        """Every row's values by column (numpy arrays or lists), ``rank``/``step``/``source`` filled in."""
        import numpy as np

        size = len(self.records)
        names = (*ROW_COLUMNS, *self.stat_columns, "entry")
        values = list(zip(*self.records, strict=True)) if size else [() for _ in names]
        self.records = []
        out: dict = {name: list(column) for name, column in zip(names, values, strict=True)}
        entry_of = np.asarray(out.pop("entry"), dtype=np.int64)
        entries = list(zip(*self.entries, strict=True)) if self.entries else [() for _ in ENTRY_COLUMNS]
        for name, column in zip(ENTRY_COLUMNS, entries, strict=True):
            out[name] = np.asarray(column, dtype=object)[entry_of] if size else np.empty(0, dtype=object)
        out["rank"] = np.full(size, rank, dtype=np.int64)
        out["step"] = np.full(size, step, dtype=np.int64)
        out["source"] = repeated(self.path, size)
        return out
