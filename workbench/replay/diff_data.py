"""``diff_stores``: where two captures of the same steps stop agreeing.

Typical use: Megatron's capture against a capture of what the MindSpore side actually consumed.
Two ways to line them up (``by``):

- ``rank``: the same ranks on both sides; each (step, rank, micro-batch) against its twin;
- ``global``: each step's global batch (the store's ``global_order``, concatenated on the sample
  axis) against the other's, so a D=2 capture compares with a single-card (D'=1) one. Positions are
  (sample, position) of the global batch; rank and micro-batch are A's.

``auto`` picks ``rank`` when both captures have the same ranks, else ``global``. Values are compared
exactly (int32 and int64 tokens with the same values agree). Every difference is a row: status
``differs`` (count of differing elements, first position, both values), ``shape mismatch``,
``structure`` (micro-batch counts differ), ``only in A`` / ``only in B`` (a step or a field).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from .store import CaptureStore, describe_numbers

DIFF_COLUMNS = ["step", "rank", "micro_batch", "field", "status", "position", "a", "b", "count", "detail"]


@dataclass
class DiffRow:
    step: int
    rank: int | None
    micro_batch: int | None
    field: str | None
    status: str
    position: tuple[int, ...] | None = None
    a: object = None
    b: object = None
    count: int = 0
    detail: str = ""


@dataclass
class DataDiff:
    a: Path
    b: Path
    mode: str
    only_in_a: list[int] = field(default_factory=list)
    only_in_b: list[int] = field(default_factory=list)
    steps_compared: int = 0
    steps_identical: int = 0
    comparisons: int = 0
    rows: list[DiffRow] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.rows

    @property
    def first(self) -> DiffRow | None:
        """The first difference in (step, global-batch) order."""
        differing = [row for row in self.rows if row.status not in ("only in A", "only in B") or row.field]
        return differing[0] if differing else (self.rows[0] if self.rows else None)

    def frame(self):
        import pandas as pd

        records = [[r.step, r.rank, r.micro_batch, r.field, r.status,
                    None if r.position is None else ",".join(map(str, r.position)),
                    r.a, r.b, r.count, r.detail] for r in self.rows]
        return pd.DataFrame(records, columns=DIFF_COLUMNS, dtype=object)  # object: None renders empty

    def summary(self) -> dict:
        statuses: dict[str, int] = {}
        for row in self.rows:
            statuses[row.status] = statuses.get(row.status, 0) + 1
        return {"a": str(self.a), "b": str(self.b), "mode": self.mode, "steps_compared": self.steps_compared,
                "steps_identical": self.steps_identical, "comparisons": self.comparisons,
                "only_in_a": describe_numbers(self.only_in_a), "only_in_b": describe_numbers(self.only_in_b),
                "differences": statuses, "identical": self.identical}


def _value(array: np.ndarray, position: tuple[int, ...]):
    value = array[position]
    return value.item() if hasattr(value, "item") else value


def compare_arrays(a: np.ndarray, b: np.ndarray) -> tuple[str, tuple | None, object, object, int] | None:
    """None when equal, else (status, first position, a value, b value, count)."""
    if a.shape != b.shape:
        return "shape mismatch", None, str(list(a.shape)), str(list(b.shape)), 0
    bad = a != b
    if not bad.any():
        return None
    position = tuple(int(i) for i in np.argwhere(bad)[0])
    return "differs", position, _value(a, position), _value(b, position), int(bad.sum())


def _fields(diff: DataDiff, step: int, a: dict, b: dict, chosen, rank=None, micro_batch=None):
    names = [n for n in a if n in b and (chosen is None or n in chosen)]
    for name, side in [(n, "only in A") for n in a if n not in b] + [(n, "only in B") for n in b if n not in a]:
        if chosen is None or name in chosen:
            diff.rows.append(DiffRow(step, rank, micro_batch, name, side, detail="field captured on one side only"))
    return names


def _global(store: CaptureStore, step: int):
    order = store.global_order(step)
    pieces = [store.read(step, rank, mb) for rank, mb in order]
    names = [n for n in pieces[0] if all(n in p for p in pieces)]
    return order, pieces[0]["tokens"].shape[0], {n: np.concatenate([p[n] for p in pieces], axis=0) for n in names}


def _chosen_fields(fields: list[str] | None, store_a: CaptureStore, store_b: CaptureStore) -> set[str] | None:
    """``fields`` as a set (None: all); a name neither capture holds is an error listing those that exist."""
    if fields is None:
        return None
    held = list(dict.fromkeys(store_a.fields + store_b.fields))
    unknown = [name for name in fields if name not in held]
    if unknown or not fields:
        found = f"unknown field(s) {', '.join(unknown)}" if unknown else "no field named"
        raise InputError("--fields", f"{found}; the captures hold {', '.join(held)}",
                         "name fields from that list, comma-separated (or leave --fields out to compare all)")
    return set(fields)


def diff_stores(a, b, fields: list[str] | None = None, by: str = "auto") -> DataDiff:
    """Compare two captures step by step (see the module doc)."""
    store_a = a if isinstance(a, CaptureStore) else CaptureStore(a)
    store_b = b if isinstance(b, CaptureStore) else CaptureStore(b)
    if by not in ("auto", "rank", "global"):
        raise InputError("--by", f"unknown mode {by!r}", "use auto, rank or global")
    mode = by if by != "auto" else ("rank" if store_a.ranks == store_b.ranks else "global")
    if mode == "rank" and store_a.ranks != store_b.ranks:
        raise InputError(str(store_b.root), f"ranks {describe_numbers(store_b.ranks)} differ from A's "
                         f"{describe_numbers(store_a.ranks)}", "compare by global batch (--by global)")
    chosen = _chosen_fields(fields, store_a, store_b)
    diff = DataDiff(store_a.root, store_b.root, mode)
    steps_a, steps_b = set(store_a.steps), set(store_b.steps)
    diff.only_in_a = sorted(steps_a - steps_b)
    diff.only_in_b = sorted(steps_b - steps_a)
    for step in sorted(steps_a | steps_b):
        if step not in steps_b or step not in steps_a:
            side = "only in A" if step in steps_a else "only in B"
            diff.rows.append(DiffRow(step, None, None, None, side, detail="step captured on one side only"))
            continue
        before = len(diff.rows)
        diff.steps_compared += 1
        if mode == "rank":
            order_a, order_b = store_a.global_order(step), store_b.global_order(step)
            if order_a != order_b:
                diff.rows.append(DiffRow(step, None, None, None, "structure", a=len(order_a) // len(store_a.ranks),
                                         b=len(order_b) // len(store_b.ranks), detail="micro-batches per rank differ"))
                continue
            for rank, micro_batch in order_a:
                arrays_a, arrays_b = store_a.read(step, rank, micro_batch), store_b.read(step, rank, micro_batch)
                for name in _fields(diff, step, arrays_a, arrays_b, chosen, rank, micro_batch):
                    diff.comparisons += 1
                    found = compare_arrays(arrays_a[name], arrays_b[name])
                    if found:
                        diff.rows.append(DiffRow(step, rank, micro_batch, name, found[0], found[1], found[2], found[3],
                                                 found[4]))
        else:
            order_a, mbs_a, arrays_a = _global(store_a, step)
            order_b, mbs_b, arrays_b = _global(store_b, step)
            for name in _fields(diff, step, arrays_a, arrays_b, chosen):
                diff.comparisons += 1
                found = compare_arrays(arrays_a[name], arrays_b[name])
                if not found:
                    continue
                rank = micro_batch = None
                detail = "global batch"
                if found[1] is not None and arrays_a[name].shape[0] == len(order_a) * mbs_a:
                    sample = found[1][0]
                    rank, micro_batch = order_a[sample // mbs_a]
                    if arrays_b[name].shape[0] == len(order_b) * mbs_b:
                        rank_b, mb_b = order_b[sample // mbs_b]
                        detail = f"global sample {sample}: A rank {rank} mb {micro_batch}, B rank {rank_b} mb {mb_b}"
                diff.rows.append(DiffRow(step, rank, micro_batch, name, found[0], found[1], found[2], found[3],
                                         found[4], detail))
        if len(diff.rows) == before:
            diff.steps_identical += 1
    return diff
