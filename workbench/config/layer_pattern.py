"""MoE layer patterns: which layers hold experts (1) and which stay dense (0).

Megatron's ``--moe-layer-freq`` is an integer N (one MoE layer every N layers) or a Python list
expression such as ``"([0]*3+[1]*61)"`` that Megatron evaluates with ``eval`` (core_v0.12.1
megatron/training/arguments.py:249 moe_freq_type). Nothing from a config is executed here: this
module parses that small grammar itself::

    expr   := term ('+' term)*
    term   := factor ('*' factor)*          one side of '*' an integer, the other a list
    factor := INT | '[' [INT (',' INT)* [',']] ']' | '(' expr ')'

A pattern is shown in one canonical run-length form (``[0]*3+[1]*61``), so two configs that
spell the same layers differently compare equal.
"""
from __future__ import annotations

import re

MAX_TEXT = 2000          # characters of a pattern expression
MAX_LAYERS = 100_000     # elements a pattern may expand to
MAX_DEPTH = 32           # nested parentheses
_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")


class PatternError(ValueError):
    """The text is not a layer pattern of the grammar above (the message says where)."""


def _tokens(text: str) -> list[str]:
    if len(text) > MAX_TEXT:
        raise PatternError(f"longer than {MAX_TEXT} characters")
    tokens = []
    for number, symbol in _TOKEN.findall(text.strip()):
        if symbol and symbol not in "[](),+*":
            raise PatternError(f"unexpected {symbol!r} (only integers, [ ] ( ) , + * are allowed)")
        tokens.append(number or symbol)
    return tokens


class _Parser:
    def __init__(self, tokens: list[str]):
        self.tokens, self.position, self.depth = tokens, 0, 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise PatternError(f"expected {expected or 'more'} at token {self.position + 1}, found {token or 'the end'}")
        self.position += 1
        return token

    def expr(self) -> int | list[int]:
        value = self.term()
        while self.peek() == "+":
            self.take("+")
            right = self.term()
            if isinstance(value, int) or isinstance(right, int):
                raise PatternError("'+' joins two lists")
            value = _checked(value + right)
        return value

    def term(self) -> int | list[int]:
        value = self.factor()
        while self.peek() == "*":
            self.take("*")
            right = self.factor()
            if isinstance(value, list) == isinstance(right, list):
                raise PatternError("'*' repeats a list an integer number of times")
            times, items = (right, value) if isinstance(value, list) else (value, right)
            if times * len(items) > MAX_LAYERS:
                raise PatternError(f"expands to more than {MAX_LAYERS} layers")
            value = items * times
        return value

    def factor(self) -> int | list[int]:
        token = self.take()
        if token.isdigit():
            return int(token)
        if token == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise PatternError(f"nested deeper than {MAX_DEPTH} parentheses")
            value = self.expr()
            self.take(")")
            self.depth -= 1
            return value
        if token == "[":
            items: list[int] = []
            while self.peek() != "]":
                number = self.take()
                if not number.isdigit():
                    raise PatternError(f"a list holds integers, found {number!r}")
                items.append(int(number))
                if self.peek() != "]":
                    self.take(",")
            self.take("]")
            return _checked(items)
        raise PatternError(f"unexpected {token!r} at token {self.position}")


def _checked(items: list[int]) -> list[int]:
    if len(items) > MAX_LAYERS:
        raise PatternError(f"expands to more than {MAX_LAYERS} layers")
    return items


def parse_pattern(spec: int | str, num_layers: int) -> list[int]:
    """The 0/1 pattern of ``num_layers`` layers that an integer frequency or a list expression gives."""
    if isinstance(spec, bool):
        raise PatternError("expected an integer or a list expression, found a boolean")
    if isinstance(spec, list):
        value: int | list[int] = spec
    elif isinstance(spec, int):
        value = spec
    else:
        parser = _Parser(_tokens(str(spec)))
        value = parser.expr()
        if parser.peek() is not None:
            raise PatternError(f"unexpected {parser.peek()!r} after the expression")
    if isinstance(value, int):
        if value < 1:
            raise PatternError(f"a frequency must be at least 1, found {value}")
        return [1 if layer % value == 0 else 0 for layer in range(num_layers)]
    if any(not isinstance(x, int) or isinstance(x, bool) or x not in (0, 1) for x in value):
        raise PatternError("a pattern holds only 0 (dense) and 1 (MoE)")
    if len(value) != num_layers:
        raise PatternError(f"has {len(value)} layers, the model {num_layers}")
    return list(value)


def first_dense(num_dense: int, num_layers: int) -> list[int]:
    """``num_dense`` dense layers, then MoE layers."""
    dense = min(max(num_dense, 0), num_layers)
    return [0] * dense + [1] * (num_layers - dense)


def run_length(pattern: list[int]) -> str:
    """The canonical text of a pattern: ``[0]*3+[1]*61`` (``[1]`` runs of one)."""
    runs: list[tuple[int, int]] = []
    for layer in pattern:
        if runs and runs[-1][0] == layer:
            runs[-1] = (layer, runs[-1][1] + 1)
        else:
            runs.append((layer, 1))
    return "+".join(f"[{layer}]" + (f"*{count}" if count > 1 else "") for layer, count in runs) or "[]"
