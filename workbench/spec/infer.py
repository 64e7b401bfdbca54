"""Infer a model's size parameters from tensor shapes alone (metadata, no tensor read).

Counts come from name indices (layers, experts, leading dense layers); every other size from
one equation per rule: the physical shape formula (``(num_heads+2*num_kv_heads)*head_dim``) must
equal the tensor's dimension. Equations with one unknown are solved (formulas only use + and *,
so they are monotone and bisection is exact); what stays unknown is refused with the config key
that settles it. Given values (from a config) are checked against every equation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..errors import InputError
from ..tensors.base import TensorMeta
from .arch import ArchSpec, Rule
from .expr import Expr, solve_one
from .model_params import PARAM_NAMES, ModelParams, settle_hint
from .resolve import Resolution, resolve_names


@dataclass(frozen=True)
class Equation:
    """One size equation read off a tensor's shape: ``expr`` on ``axis`` of ``tensor`` is ``value``."""

    expr: Expr
    value: int
    tensor: str
    axis: int
    rule: Rule

    def text(self) -> str:
        return f"'{self.tensor}' dim {self.axis} = {self.value} = {self.expr}"


def infer_params(metas: Mapping[str, TensorMeta], fmt: str, arch: ArchSpec,
                 given: Mapping[str, int] | None = None) -> ModelParams:
    """The sizes of ``arch`` in format ``fmt`` from shapes; ``given`` values win but must agree."""
    resolution = resolve_names(metas, arch, fmt)
    known = _given(given or {}, arch)
    sources = {name: "given" for name in known}
    for name, value in _counts(resolution, arch).items():
        if name not in known:
            known[name], sources[name] = value, "counted from names"
    equations = _equations(metas, resolution, arch)
    _solve(equations, known, sources)
    _check(equations, known, sources)
    unknown = [name for name in arch.params if name not in known]
    if unknown:
        raise InputError(f"{arch.name}/{fmt}", _unknown_problem(unknown, equations),
                         "give them in a config (--config) or as parameters: "
                         + "; ".join(settle_hint(name) for name in unknown))
    return ModelParams(**{name: known[name] for name in arch.params})


def shapes_consistent(metas: Mapping[str, TensorMeta], fmt: str, arch: ArchSpec) -> bool:
    """Whether some sizes make every matched shape of ``fmt`` agree (unknown sizes allowed)."""
    resolution = resolve_names(metas, arch, fmt)
    known = _counts(resolution, arch)
    try:
        equations = _equations(metas, resolution, arch)
        _solve(equations, known, {})
        _check(equations, known, {})
    except InputError:
        return False
    return True


def _given(given: Mapping[str, int], arch: ArchSpec) -> dict[str, int]:
    unknown = sorted(set(given) - PARAM_NAMES)
    if unknown:
        raise InputError("given parameters", f"unknown parameter(s) {', '.join(unknown)}",
                         f"use {', '.join(sorted(PARAM_NAMES))}")
    from ..input_files import expect_count

    return {name: expect_count(value, "given parameters", name, fix=f"give {name} as a whole number")
            for name, value in given.items() if name in arch.params and value is not None}


def _counts(resolution: Resolution, arch: ArchSpec) -> dict[str, int]:
    """num_layers / num_experts / first_dense_layers from the largest index seen (+1)."""
    largest: dict[str, int] = {}
    dense_layers = -1
    for match in resolution.matches.values():
        for var, value in match.env:
            largest[var] = max(largest.get(var, -1), value)
        if match.rule.layers == "dense":
            dense_layers = max(dense_layers, dict(match.env).get("i", -1))
    counts = {}
    if "num_layers" in arch.params and "i" in largest:
        counts["num_layers"] = largest["i"] + 1
    if "num_experts" in arch.params and "e" in largest:
        counts["num_experts"] = largest["e"] + 1
    if "first_dense_layers" in arch.params and any(t.layers == "moe" for t in arch.logical.values()):
        counts["first_dense_layers"] = dense_layers + 1
    return counts


def _equations(metas: Mapping[str, TensorMeta], resolution: Resolution, arch: ArchSpec) -> list[Equation]:
    first: dict[int, str] = {}
    for name, match in resolution.matches.items():
        first.setdefault(id(match.rule), name)
    equations = []
    for rule in arch.format(resolution.format).rules:
        name = first.get(id(rule))
        if name is None:
            continue
        expected, actual = arch.symbolic_shape(rule), tuple(metas[name].shape)
        if len(expected) != len(actual):
            raise InputError(name, f"shape {list(actual)} has {len(actual)} dims, {rule.describe()} expects "
                             f"{len(expected)}: [{', '.join(map(str, expected))}]", "check the arch and format")
        for axis, (dim, value) in enumerate(zip(expected, actual, strict=True)):
            expr = Expr.const(dim) if isinstance(dim, int) else dim
            equations.append(Equation(expr, int(value), name, axis, rule))
    return equations


def _solve(equations: list[Equation], known: dict[str, int], sources: dict[str, str]) -> None:
    progress = True
    while progress:
        progress = False
        for equation in equations:
            unknown = [v for v in equation.expr.variables() if v not in known]
            if len(unknown) != 1:
                continue
            value = solve_one(equation.expr, equation.value, known, unknown[0])
            if value is None:
                raise InputError(equation.tensor, f"{equation.text()} has no whole {unknown[0]} "
                                 f"with {_values(equation.expr, known, sources)} ({equation.rule.describe()})",
                                 "check the given parameters, the arch and the format")
            known[unknown[0]], sources[unknown[0]] = value, f"from '{equation.tensor}'"
            progress = True


def _check(equations: list[Equation], known: dict[str, int], sources: dict[str, str]) -> None:
    for equation in equations:
        if equation.expr.variables() <= set(known) and equation.expr.evaluate(known) != equation.value:
            raise InputError(equation.tensor, f"dim {equation.axis} is {equation.value} but {equation.rule.describe()} "
                             f"expects {equation.expr} = {equation.expr.evaluate(known)} with "
                             f"{_values(equation.expr, known, sources)}",
                             "fix the given parameters or pick the matching arch/format")


def _values(expr: Expr, known: Mapping[str, int], sources: Mapping[str, str]) -> str:
    names = sorted(v for v in expr.variables() if v in known)
    return ", ".join(f"{n}={known[n]} ({sources.get(n, '?')})" for n in names) or "no known parameter"


def _unknown_problem(unknown: list[str], equations: list[Equation]) -> str:
    related = [e for e in equations if e.expr.variables() & set(unknown)]
    text = f"cannot tell {', '.join(unknown)} from the shapes alone"
    if related:
        text += " (" + "; ".join(e.text() for e in related[:3]) + ")"
    return text
