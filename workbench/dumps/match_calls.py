"""Calls: the rows of one operator or module invocation (its inputs, outputs, parameters), the unit that
matching pairs; the pairing of rows inside two paired calls; the combined statistics of fused parts.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_STEM = re.compile(r"^(?P<stem>.+?\.parameters_grad(?:\.\d+)?)(?:\.|$)|^(?P<io>.+?)\.(?:input|output|parameters)(?:\.|$)")
MODULE_PREFIXES = ("Module.", "Cell.")
STATS = ("max", "min", "mean", "l2norm")


def call_stem(name: str) -> str:
    """The invocation a row belongs to: ``Functional.linear.0.forward.output.0`` → ``Functional.linear.0.forward``;
    a name without an io part (a MindSpore Dump kernel ``MatMul-op12``) is its own call."""
    found = _STEM.match(str(name))
    if not found:
        return str(name)
    return found.group("stem") or found.group("io")


def is_module_row(name: str) -> bool:
    """A module/cell-level row (msprobe ``Module.…``/``Cell.…``) rather than an operator row."""
    return str(name).startswith(MODULE_PREFIXES)


def param_name(name: str) -> str:
    """The parameter a ``parameter`` row holds: the last dotted piece of its name."""
    return str(name).rsplit(".", 1)[-1]


@dataclass
class Call:
    side: str
    rank: int
    step: int
    stem: str
    op: str
    module_path: str
    pass_: str
    is_module: bool
    order: int
    rows: list[int] = field(default_factory=list)      # table index labels, in execution order


def calls_of(table) -> list[Call]:
    """The table's calls in execution order (per rank and step: the caller groups by unit)."""
    if table.empty:
        return []
    stems = table["name"].map(call_stem)
    calls: dict[tuple, Call] = {}
    columns = zip(table.index, stems, table["side"], table["rank"], table["step"], table["op"], table["module_path"],
                  table["pass"], table["order"], table["name"], strict=False)
    for index, stem, side, rank, step, op, module, pass_, order, name in columns:
        key = (int(rank), int(step), stem, pass_)
        call = calls.get(key)
        if call is None:
            calls[key] = call = Call(str(side), int(rank), int(step), stem, str(op), str(module), str(pass_),
                                     is_module_row(name), int(order))
        call.rows.append(index)
        call.order = min(call.order, int(order))
    return sorted(calls.values(), key=lambda c: (c.rank, c.step, c.order))


def pair_rows(recs_a: dict, call_a: Call, recs_b: dict, call_b: Call, ops) -> tuple[list, list]:
    """Rows of two paired calls matched by io: parameters by (normalised) parameter name, inputs and
    outputs position by position among the tensors of that io, only with the same element count.
    ``recs_*``: index label -> row dict. Returns (pairs of index labels, unmatched (side, label, reason))."""
    pairs: list[tuple] = []
    unmatched: list[tuple] = []
    for io in ("input", "output", "parameter"):
        part_a = sorted((i for i in call_a.rows if recs_a[i]["io"] == io), key=lambda i: recs_a[i]["slot"])
        part_b = sorted((i for i in call_b.rows if recs_b[i]["io"] == io), key=lambda i: recs_b[i]["slot"])
        if io == "parameter":
            by_key = {ops.param_class(param_name(recs_b[i]["name"])): i for i in part_b}
            used = set()
            for index in part_a:
                key = ops.param_class(param_name(recs_a[index]["name"]))
                other = by_key.get(key)
                if other is None:
                    unmatched.append(("A", index, f"parameter {key!r} not in {call_b.stem} (B)"))
                else:
                    used.add(other)
                    _pair_or_reason(recs_a[index], index, recs_b[other], other, pairs, unmatched)
            unmatched += [("B", i, f"parameter not in {call_a.stem} (A)") for i in part_b if i not in used]
            continue
        for index_a, index_b in zip(part_a, part_b, strict=False):
            _pair_or_reason(recs_a[index_a], index_a, recs_b[index_b], index_b, pairs, unmatched)
        unmatched += [("A", i, f"{call_b.stem} (B) has no {io} {k + len(part_b)}")
                      for k, i in enumerate(part_a[len(part_b):])]
        unmatched += [("B", i, f"{call_a.stem} (A) has no {io} {k + len(part_a)}")
                      for k, i in enumerate(part_b[len(part_a):])]
    return pairs, unmatched


def _pair_or_reason(row_a: dict, index_a, row_b: dict, index_b, pairs: list, unmatched: list) -> None:
    numel_a, numel_b = row_a["numel"], row_b["numel"]
    if known(numel_a) and known(numel_b) and int(numel_a) != int(numel_b):
        reason = f"element counts differ: {row_a['shape'] or 'scalar'} (A) vs {row_b['shape'] or 'scalar'} (B)"
        unmatched.append(("A", index_a, reason))
        unmatched.append(("B", index_b, reason))
    else:
        pairs.append((index_a, index_b))


def known(value) -> bool:
    """Not None / NaN / <NA>."""
    import pandas as pd

    return not pd.isna(value)


def combine(rows: list[dict]) -> dict:
    """Statistics of the concatenation of several tensors (a fused tensor's parts) from theirs alone:
    max of maxes, min of mins, numel-weighted mean, l2 = sqrt of summed squares; counts summed."""
    numels = [_number(r["numel"]) for r in rows]
    total = math.fsum(numels)
    mean = math.fsum(_number(r["mean"]) * n for r, n in zip(rows, numels, strict=False)) / total if total else math.nan
    return {"max": max(_number(r["max"]) for r in rows), "min": min(_number(r["min"]) for r in rows),
            "mean": mean, "l2norm": math.sqrt(math.fsum(_number(r["l2norm"]) ** 2 for r in rows)),
            "numel": int(total) if math.isfinite(total) else None,
            "nan_count": _sum_counts(r["nan_count"] for r in rows), "inf_count": _sum_counts(r["inf_count"] for r in rows)}


def _number(value) -> float:
    return math.nan if not known(value) else float(value)


def _sum_counts(values):
    values = list(values)
    return None if not all(known(v) for v in values) else int(sum(int(v) for v in values))
