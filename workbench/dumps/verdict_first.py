"""The first divergence and the top suspects, from evaluated pairs (:func:`.verdict.evaluate`).

A matched call (operator or module) DIVERGES when its inputs are within tolerance (or it has none matched)
and one of its outputs is not. The first call where the two sides' floating dtypes part (A float32, B float16:
a cast the reference does not make) is a divergence too: dtype-aware tolerances would otherwise let a
lowered precision pass where it starts and flag only where its error has grown. The first divergence is the earliest such call by (step, rank, execution
order of A); suspects are every diverging call ranked by how much it amplified the difference
(worst output difference over max(worst input difference, tolerance)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .schema import row_dicts

SUSPECTS = 10
SUSPECT_COLUMNS = ("step", "rank", "order", "level", "call_a", "call_b", "layer", "logical_module", "module_a",
                   "module_b", "pass", "input_worst", "output_worst", "tolerance", "amplification", "stack_a", "stack_b")


def diverging_calls(evaluated) -> list[dict]:
    """Every diverging call, in (step, rank, order) order. The calls are told apart on whole columns; only the
    diverging ones are read row by row."""
    found = []
    for rows in _candidate_calls(evaluated):
        call = {"order": min(r["order"] for r in rows)}
        first_row = rows[0]
        step, rank, call_a, call_b = first_row["step"], first_row["rank"], first_row["call_a"], first_row["call_b"]
        inputs = [r for r in rows if r["io"] == "input"]
        outputs = [r for r in rows if r["io"] == "output"]
        worst_in = max((_finite(r["worst_rel"]) for r in inputs), default=0.0)
        worst_out = max(_finite(r["worst_rel"]) for r in outputs)
        tol = max(r["tolerance"] for r in outputs)
        first = outputs[0]
        found.append({"step": step, "rank": rank, "order": call["order"], "level": first["level"], "call_a": call_a,
                      "call_b": call_b, "layer": first["layer"], "logical_module": first["logical_module"],
                      "module_a": first["a_module_path"], "module_b": first["b_module_path"], "pass": first["pass"],
                      "input_worst": worst_in, "output_worst": worst_out, "tolerance": tol,
                      "amplification": worst_out / max(worst_in, tol, 1e-30),
                      "stack_a": first["a_stack_id"], "stack_b": first["b_stack_id"],
                      "note": "; ".join(sorted({r["note"] for r in outputs if r["note"]}))})
    return sorted(found, key=_call_key)


def _call_ids(evaluated):
    """Each row's call (step, rank, call_a, call_b), numbered in order of first appearance."""
    import numpy as np

    keys = zip(*(evaluated[c].tolist() for c in ("step", "rank", "call_a", "call_b")), strict=True)
    ids: dict[tuple, int] = {}
    return np.asarray([ids.setdefault(key, len(ids)) for key in keys], dtype=np.int64), len(ids)


def _candidate_calls(evaluated) -> list[list[dict]]:
    """The rows (dicts, in table order) of each call with an output, every input passing and an output not
    passing; calls in order of first appearance."""
    import numpy as np

    if not len(evaluated):
        return []
    ids, count = _call_ids(evaluated)
    io = evaluated["io"].to_numpy(dtype=object)
    failing = evaluated["status"].to_numpy(dtype=object) != "pass"
    is_in, is_out = io == "input", io == "output"
    has_out = np.bincount(ids[is_out], minlength=count) > 0
    bad_in = np.bincount(ids[is_in & failing], minlength=count) > 0
    bad_out = np.bincount(ids[is_out & failing], minlength=count) > 0
    chosen = np.flatnonzero(has_out & ~bad_in & bad_out)
    if not len(chosen):
        return []
    positions = np.flatnonzero(np.isin(ids, chosen))
    groups: dict[int, list[dict]] = {int(call): [] for call in chosen}
    for call, row in zip(ids[positions].tolist(), row_dicts(evaluated.iloc[positions]), strict=True):
        groups[call].append(row)
    return list(groups.values())


FLOATS = ("float64", "float32", "bfloat16", "float16", "float8")


def first_precision_change(evaluated) -> dict | None:
    """The earliest matched call with a row whose floating dtypes differ between the sides, or None."""
    found = _precision_change(evaluated)
    return found[1] if found else None


def _precision_change(evaluated) -> tuple[tuple, dict] | None:
    """(the changed row's (step, rank, order), :func:`first_precision_change`), or None."""
    import numpy as np

    a, b = evaluated["a_dtype"], evaluated["b_dtype"]
    changed_rows = np.flatnonzero((a.isin(FLOATS) & b.isin(FLOATS) & (a != b)).to_numpy(dtype=bool))
    if not len(changed_rows):
        return None
    step, rank, order = (evaluated[c].to_numpy() for c in ("step", "rank", "order"))
    earliest = int(min(changed_rows, key=lambda i: (step[i], rank[i], order[i])))      # first of a stable sort
    key = (step[earliest], rank[earliest], order[earliest])
    changed = row_dicts(evaluated.iloc[[earliest]])[0]
    ids, _ = _call_ids(evaluated)
    members = np.flatnonzero(ids == ids[earliest])
    call = sorted(row_dicts(evaluated.iloc[members]), key=lambda r: (r["step"], r["rank"], r["order"]))
    inputs, outputs = ([r for r in call if r["io"] == io] for io in ("input", "output"))
    worst_in = max((_finite(r["worst_rel"]) for r in inputs), default=0.0)
    worst_out = max((_finite(r["worst_rel"]) for r in outputs), default=0.0)
    tol = max((r["tolerance"] for r in call), default=0.0)
    return key, {"step": changed["step"], "rank": changed["rank"], "order": min(r["order"] for r in call),
            "level": changed["level"], "call_a": changed["call_a"], "call_b": changed["call_b"],
            "layer": changed["layer"], "logical_module": changed["logical_module"],
            "module_a": changed["a_module_path"], "module_b": changed["b_module_path"], "pass": changed["pass"],
            "input_worst": worst_in, "output_worst": worst_out, "tolerance": tol,
            "amplification": worst_out / max(worst_in, tol, 1e-30), "stack_a": changed["a_stack_id"],
            "stack_b": changed["b_stack_id"],
            "note": f"precision: A {changed['a_dtype']}, B {changed['b_dtype']} ({changed['io']} {changed['slot']})"}


@dataclass(frozen=True)
class Calls:
    """What the first divergence and the suspects are read from: the diverging calls in (step, rank, order)
    order and the first precision change. A unit's calls never reach into another unit (a call is keyed by its
    step and rank), so units' ``Calls`` :func:`combined` in unit order are those of their joined pairs: a process
    pool's workers find them per unit and the parent only combines."""

    diverging: list[dict]
    precision: tuple[tuple, dict] | None           # (the changed row's (step, rank, order), the call)


def calls_of(evaluated) -> Calls:
    return Calls(diverging_calls(evaluated), _precision_change(evaluated) if len(evaluated) else None)


def combined(parts: list[Calls]) -> Calls:
    """The units' calls as one: diverging calls joined and stably sorted (within a unit they are sorted
    already, so equal keys keep their order of appearance), the earliest precision change (the first unit's
    on equal keys, as a stable sort of the joined rows would)."""
    diverging = sorted((c for part in parts for c in part.diverging), key=_call_key)
    changes = [part.precision for part in parts if part.precision is not None]
    return Calls(diverging, min(changes, key=lambda change: change[0]) if changes else None)


def _call_key(call: dict) -> tuple:
    return call["step"], call["rank"], call["order"]


def first_divergence(evaluated, calls: Calls | None = None) -> dict | None:
    """The earliest diverging call (values, or a precision change) across steps and ranks, or None."""
    calls = calls_of(evaluated) if calls is None else calls
    precision = calls.precision[1] if calls.precision else None
    candidates = [c for c in (calls.diverging[0] if calls.diverging else None, precision) if c is not None]
    return min(candidates, key=_call_key) if candidates else None


def suspects(evaluated, limit: int = SUSPECTS, calls: Calls | None = None):
    """The diverging calls ranked by amplification (a table)."""
    import pandas as pd

    found = diverging_calls(evaluated) if calls is None else calls.diverging
    ranked = sorted(found, key=lambda c: -c["amplification"])[:limit]
    return pd.DataFrame(ranked, columns=[*SUSPECT_COLUMNS, "note"])


def _finite(value) -> float:
    return float(value) if value is not None and math.isfinite(float(value)) else 0.0
