"""CheckList rules: each takes the item and both sides' canonical values, returns an Outcome.

Verdicts: PASS, MISMATCH (a failed rule of severity error), RISK (a failed rule of severity
warning, or aligned but not advisable), MANUAL (configs cannot decide: the message says what
to check), UNKNOWN (a side does not say: the message names what would settle it), INFO (an
informational item whose values differ without changing the math: never a failure, not even
with --strict).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config.canonical import CanonicalValue, RawConfig, TrainingConfig

PASS, MISMATCH, RISK, MANUAL, UNKNOWN, INFO = "PASS", "MISMATCH", "RISK", "MANUAL", "UNKNOWN", "INFO"
VERDICTS = (MISMATCH, RISK, UNKNOWN, MANUAL, INFO, PASS)


@dataclass
class Outcome:
    verdict: str
    message: str
    details: dict = field(default_factory=dict)


@dataclass
class RuleContext:
    megatron: TrainingConfig
    mindformers: TrainingConfig
    same_hardware: bool
    raw_megatron: RawConfig | None = None
    raw_mindformers: RawConfig | None = None


Values = list[CanonicalValue]
Rule = Callable[[Any, RuleContext, Values, Values], Outcome]
RULES: dict[str, Rule] = {}


def rule(function: Rule) -> Rule:
    RULES[function.__name__] = function
    return function


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "none"
    return str(value).lower() if isinstance(value, bool) else str(value)


def same(a: Any, b: Any, rtol: float = 1e-9) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)
    return a == b


def fail(item: Any, message: str) -> Outcome:
    return Outcome(MISMATCH if item.severity == "error" else RISK, message)


def unknown_outcome(megatron: Values, mindformers: Values) -> Outcome | None:
    missing = [f"Megatron does not say {v.key}: {v.settle}" for v in megatron if not v.known]
    missing += [f"MindFormers does not say {v.key}: {v.settle}" for v in mindformers if not v.known]
    return Outcome(UNKNOWN, "; ".join(missing)) if missing else None


def _side_text(values: Values) -> str:
    if len(values) == 1:
        return fmt(values[0].value)
    return ", ".join(f"{v.key.rsplit('.', 1)[-1]}={fmt(v.value)}" for v in values)


def pair_text(megatron: Values, mindformers: Values) -> str:
    return f"Megatron {_side_text(megatron)} vs MindFormers {_side_text(mindformers)}"


def _differs(megatron: Values, mindformers: Values, rtol: float) -> bool:
    return any(not same(a.value, b.value, rtol) for a, b in zip(megatron, mindformers, strict=False))


# ------------------------------------------------------------------------- generic rules
@rule
def equal(item, ctx, megatron, mindformers):
    if unknown := unknown_outcome(megatron, mindformers):
        return unknown
    if _differs(megatron, mindformers, item.params.get("rtol", 1e-9)):
        return fail(item, pair_text(megatron, mindformers))
    recommend = item.params.get("recommend")
    if recommend is not None and not same(megatron[0].value, recommend):
        return Outcome(RISK, f"both {fmt(megatron[0].value)}, aligned; the CheckList recommends {fmt(recommend)}")
    return Outcome(PASS, f"both {_side_text(megatron)}")


@rule
def each_equals(item, ctx, megatron, mindformers):
    if unknown := unknown_outcome(megatron, mindformers):
        return unknown
    target = item.params["value"]
    if _differs(megatron, mindformers, 1e-9):
        return fail(item, f"{pair_text(megatron, mindformers)}; both must be {fmt(target)} for alignment")
    if not same(megatron[0].value, target):
        return fail(item, f"both {fmt(megatron[0].value)}; must be {fmt(target)} for alignment")
    return Outcome(PASS, f"both {fmt(target)}")


@rule
def side_equals(item, ctx, megatron, mindformers):
    problems = []
    for side, values in (("megatron", megatron), ("mindformers", mindformers)):
        if side not in item.params:
            continue
        allowed = item.params[side] if isinstance(item.params[side], list) else [item.params[side]]
        value = values[0]
        label = "Megatron" if side == "megatron" else "MindFormers"
        if not value.known:
            return Outcome(UNKNOWN, f"{label} does not say {value.key}: {value.settle}")
        if not any(same(value.value, choice) for choice in allowed):
            problems.append(f"{label} {fmt(value.value)}; use {' or '.join(fmt(a) for a in allowed)}")
    if problems:
        return fail(item, "; ".join(problems) + f" ({pair_text(megatron, mindformers)})")
    return Outcome(PASS, pair_text(megatron, mindformers))


@rule
def info(item, ctx, megatron, mindformers):
    if unknown := unknown_outcome(megatron, mindformers):
        return unknown
    if _differs(megatron, mindformers, 1e-9):
        note = item.params.get("note", "informational: the math is the same, the reduction order differs (expect last-bit differences)")
        return Outcome(item.params.get("verdict_when_differs", INFO), f"{pair_text(megatron, mindformers)}: {note}")
    return Outcome(PASS, f"both {_side_text(megatron)} (informational)")


@rule
def manual(item, ctx, megatron, mindformers):
    return Outcome(MANUAL, item.check)


@rule
def fused_kernel(item, ctx, megatron, mindformers):
    if unknown := unknown_outcome(megatron, mindformers):
        return unknown
    fused_m, fused_f = bool(megatron[0].value), bool(mindformers[0].value)
    if fused_m != fused_f:
        return fail(item, f"fused on {'Megatron' if fused_m else 'MindFormers'} only ({pair_text(megatron, mindformers)}); "
                          "use the same implementation on both sides")
    if not fused_m:
        return Outcome(PASS, "unfused on both sides")
    if ctx.same_hardware:
        return Outcome(PASS, "fused on both sides, same hardware: the same kernel")
    return Outcome(MANUAL, "fused on both sides across hardware (GPU vs Ascend kernels differ): check the fused kernel — "
                           "compare its inputs/outputs on one batch in per-op dumps, or turn it off on both sides")


from . import rules_specific  # noqa: E402,F401  (registers the item-specific rules)
