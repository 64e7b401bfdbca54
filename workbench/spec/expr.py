"""Shape expressions of the converter specs: ``num_heads*head_dim``, ``(num_heads+2*num_kv_heads)*head_dim``.

Only integers, parameter names, ``+``, ``*`` and parentheses are allowed. Every expression is then
non-decreasing in each parameter (parameters are positive), which is what lets
:func:`solve_one` recover one unknown parameter from one tensor dimension by bisection.

An :class:`Expr` also works symbolically: transforms compute fused shapes with ``+`` and ``*`` on
plain ints and ``Expr`` alike, so the same shape code gives numbers (plans) and formulas
(parameter inference).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Mapping, Union

Dim = Union[int, "Expr"]


class ExprError(ValueError):
    """A shape expression that is not ``int | name | a+b | a*b | (a)``."""


@dataclass(frozen=True)
class Expr:
    """A size expression of a spec (``hidden * 3``): constants, size variables, sums and products."""

    op: str                      # "const" | "var" | "add" | "mul"
    args: tuple

    # ------------------------------------------------------------------ construction
    @staticmethod
    def const(value: int) -> "Expr":
        return Expr("const", (int(value),))

    @staticmethod
    def var(name: str) -> "Expr":
        return Expr("var", (name,))

    def __add__(self, other: Dim) -> Dim:
        return _combine("add", self, other)

    __radd__ = __add__

    def __mul__(self, other: Dim) -> Dim:
        return _combine("mul", self, other)

    __rmul__ = __mul__

    # ------------------------------------------------------------------ inspection
    def variables(self) -> frozenset[str]:
        if self.op == "var":
            return frozenset(self.args)
        if self.op == "const":
            return frozenset()
        return frozenset().union(*(arg.variables() for arg in self.args))

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value with every parameter taken from ``env`` (KeyError names a missing one)."""
        if self.op == "const":
            return self.args[0]
        if self.op == "var":
            return int(env[self.args[0]])
        left, right = (arg.evaluate(env) for arg in self.args)
        return left + right if self.op == "add" else left * right

    def __str__(self) -> str:
        if self.op in ("const", "var"):
            return str(self.args[0])
        left, right = (_text(arg, self.op) for arg in self.args)
        return f"{left}+{right}" if self.op == "add" else f"{left}*{right}"


def _text(arg: "Expr", parent: str) -> str:
    return f"({arg})" if parent == "mul" and arg.op == "add" else str(arg)


def _combine(op: str, left: Dim, right: Dim) -> Dim:
    if isinstance(left, int) and isinstance(right, int):
        return left + right if op == "add" else left * right
    neutral = 0 if op == "add" else 1
    if isinstance(left, int) and left == neutral:
        return right
    if isinstance(right, int) and right == neutral:
        return left
    left, right = (Expr.const(x) if isinstance(x, int) else x for x in (left, right))
    if left.op == "const" and right.op == "const":
        return Expr.const(left.args[0] + right.args[0] if op == "add" else left.args[0] * right.args[0])
    return Expr(op, (left, right))


# ---------------------------------------------------------------------- parsing

def parse(text: object, known: frozenset[str] | set[str]) -> Expr:
    """``"num_heads*head_dim"`` (or an int) -> Expr; unknown names and other syntax raise ExprError."""
    if isinstance(text, bool):
        raise ExprError(f"{text!r} is not a size")
    if isinstance(text, int):
        return Expr.const(text)
    if not isinstance(text, str):
        raise ExprError(f"{text!r} is not a size expression (an int, a parameter name, + and *)")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ExprError(f"'{text}' is not a valid expression") from None
    return _build(tree.body, text, known)


def _build(node: ast.AST, text: str, known) -> Expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Expr.const(node.value)
    if isinstance(node, ast.Name):
        if node.id not in known:
            raise ExprError(f"unknown parameter '{node.id}' in '{text}' (known: {', '.join(sorted(known))})")
        return Expr.var(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        op = "add" if isinstance(node.op, ast.Add) else "mul"
        return Expr(op, (_build(node.left, text, known), _build(node.right, text, known)))
    raise ExprError(f"'{text}' uses something other than integers, parameter names, + and *")


def evaluate_shape(shape: tuple[Dim, ...], env: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else d.evaluate(env) for d in shape)


def shape_text(shape: tuple[Dim, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


# ---------------------------------------------------------------------- solving

def solve_one(expr: Expr, value: int, env: Mapping[str, int], unknown: str) -> int | None:
    """The positive integer ``x`` with ``expr(env + {unknown: x}) == value``, or None.

    Valid because expressions are non-decreasing in every parameter (only + and * of
    non-negative terms): bisection over ``1..value`` finds the smallest x reaching ``value``.
    """
    def at(x: int) -> int:
        return expr.evaluate({**env, unknown: x})

    low, high = 1, max(1, value)
    if at(low) > value or at(high) < value:
        return None
    while low < high:
        middle = (low + high) // 2
        if at(middle) < value:
            low = middle + 1
        else:
            high = middle
    return low if at(low) == value else None
