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

from .schema import row_dicts

SUSPECTS = 10
SUSPECT_COLUMNS = ("step", "rank", "order", "level", "call_a", "call_b", "layer", "logical_module", "module_a",
                   "module_b", "pass", "input_worst", "output_worst", "tolerance", "amplification", "stack_a", "stack_b")


def diverging_calls(evaluated) -> list[dict]:
    """Every diverging call, in (step, rank, order) order."""
    calls: dict[tuple, dict] = {}
    for row in row_dicts(evaluated):
        key = (row["step"], row["rank"], row["call_a"], row["call_b"])
        call = calls.setdefault(key, {"rows": [], "order": row["order"]})
        call["rows"].append(row)
        call["order"] = min(call["order"], row["order"])
    found = []
    for (step, rank, call_a, call_b), call in calls.items():
        rows = call["rows"]
        inputs = [r for r in rows if r["io"] == "input"]
        outputs = [r for r in rows if r["io"] == "output"]
        if not outputs or any(r["status"] != "pass" for r in inputs) or all(r["status"] == "pass" for r in outputs):
            continue
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
    return sorted(found, key=lambda c: (c["step"], c["rank"], c["order"]))


FLOATS = ("float64", "float32", "bfloat16", "float16", "float8")


def first_precision_change(evaluated) -> dict | None:
    """The earliest matched call with a row whose floating dtypes differ between the sides, or None."""
    rows = sorted(row_dicts(evaluated), key=lambda r: (r["step"], r["rank"], r["order"]))
    changed = next((r for r in rows if r["a_dtype"] in FLOATS and r["b_dtype"] in FLOATS
                    and r["a_dtype"] != r["b_dtype"]), None)
    if changed is None:
        return None
    call = [r for r in rows if (r["step"], r["rank"], r["call_a"], r["call_b"]) ==
            (changed["step"], changed["rank"], changed["call_a"], changed["call_b"])]
    inputs, outputs = ([r for r in call if r["io"] == io] for io in ("input", "output"))
    worst_in = max((_finite(r["worst_rel"]) for r in inputs), default=0.0)
    worst_out = max((_finite(r["worst_rel"]) for r in outputs), default=0.0)
    tol = max((r["tolerance"] for r in call), default=0.0)
    return {"step": changed["step"], "rank": changed["rank"], "order": min(r["order"] for r in call),
            "level": changed["level"], "call_a": changed["call_a"], "call_b": changed["call_b"],
            "layer": changed["layer"], "logical_module": changed["logical_module"],
            "module_a": changed["a_module_path"], "module_b": changed["b_module_path"], "pass": changed["pass"],
            "input_worst": worst_in, "output_worst": worst_out, "tolerance": tol,
            "amplification": worst_out / max(worst_in, tol, 1e-30), "stack_a": changed["a_stack_id"],
            "stack_b": changed["b_stack_id"],
            "note": f"precision: A {changed['a_dtype']}, B {changed['b_dtype']} ({changed['io']} {changed['slot']})"}


def first_divergence(evaluated) -> dict | None:
    """The earliest diverging call (values, or a precision change) across steps and ranks, or None."""
    found = diverging_calls(evaluated)
    precision = first_precision_change(evaluated) if len(evaluated) else None
    candidates = [c for c in (found[0] if found else None, precision) if c is not None]
    return min(candidates, key=lambda c: (c["step"], c["rank"], c["order"])) if candidates else None


def suspects(evaluated, limit: int = SUSPECTS):
    """The diverging calls ranked by amplification (a table)."""
    import pandas as pd

    ranked = sorted(diverging_calls(evaluated), key=lambda c: -c["amplification"])[:limit]
    return pd.DataFrame(ranked, columns=[*SUSPECT_COLUMNS, "note"])


def _finite(value) -> float:
    return float(value) if value is not None and math.isfinite(float(value)) else 0.0
