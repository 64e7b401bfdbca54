"""Variables and expansion for :mod:`workbench.config.shell_script` (nothing is executed).

Applies assignments (scalars and bash arrays), expands ``$X``/``${X...}``/``$((...))``
and splits words like bash. What cannot be known statically keeps its raw text and is
marked unresolved. One deliberate departure: a value of plain words separated by spaces
is kept as one argument (see the ``shell_script`` module docstring).

Expansion is bounded, so a hostile script cannot exhaust memory or the stack: a value longer
than :data:`VALUE_LIMIT`, a script whose expansions produce more than :data:`EXPANSION_BUDGET`
characters in all (``A=$A$A`` doubling line after line), ``${X:-${X:-...}}`` nested deeper
than :data:`NESTING_LIMIT` each stop with one error naming the script line. Arithmetic
wraps at 64 bits as bash's does; an expression longer than :data:`ARITH_LIMIT` is not evaluated.
"""
from __future__ import annotations

import ast
import operator
import re
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import InputError, location
from ..input_files import describe_size
from .shell_lexer import ASSIGN, Lexer
from .shell_text import Rich, join

VALUE_LIMIT = 1024 * 1024
"""Longest value one expansion may build (1 Mi characters); launch-script values are < 10 KiB."""

EXPANSION_BUDGET = 4 * 1024 * 1024
"""Most characters all expansions of one script may produce together (4 Mi; an array element
counts :data:`ELEMENT_COST` more); real scripts expand to a few KiB."""

ELEMENT_COST = 64
"""What one value (an array element, a field) costs in the budget besides its characters."""

NESTING_LIMIT = 32
"""Deepest ``${X:-${Y:-...}}`` nesting expanded; scripts nest 2 or 3 levels."""

ARITH_LIMIT = 4096
"""Longest ``$((...))`` expression evaluated (after variables are substituted)."""

_PARAM = re.compile(r"([A-Za-z_]\w*|\d+|[@*#?$!-])(?:\[([^\]]*)\])?(.*)\Z", re.S)
_PARAM_OPS = (":-", ":=", ":+", ":?", "-", "=", "+", "?")
_ARITH_NAME = re.compile(r"\$\{(\w+)\}|\$(\w+)|\b([A-Za-z_]\w*)\b")


def _bash_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


_ARITH_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: _bash_div, ast.FloorDiv: _bash_div, ast.Mod: lambda a, b: a - b * _bash_div(a, b),
              ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
              ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
              ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}


def _int64(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as bash's intmax_t arithmetic wraps."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _safe_int(expr: str) -> int:
    """Integer arithmetic like bash $((...)), evaluated on the AST (nothing is executed)."""
    if len(expr) > ARITH_LIMIT:
        raise ValueError("expression too long")

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return _int64(node.value)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _ARITH_OPS:
            return _int64(_ARITH_OPS[type(node.op)](ev(node.operand)))
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= b <= 64:
                raise ValueError("exponent out of range")
            return _int64(_ARITH_OPS[type(node.op)](a, b))
        raise ValueError(f"unsupported arithmetic: {type(node).__name__}")
    return ev(ast.parse(expr.strip(), mode="eval").body)


def _appended(old: Rich | None, value: Rich) -> Rich:
    """A fresh copy of ``old`` (or empty) with ``value`` appended, for ``X+=...``."""
    return (Rich().extend(old) if old is not None else Rich()).extend(value)


def _glue(values: list[Rich]) -> list[Rich]:
    """Keep a placeholder like "your tokenizer path" as one argument (see module docstring)."""
    pieces = values[0].text.split() if len(values) == 1 else []
    if len(pieces) < 2 or not all(p.isalpha() for p in pieces) or values[0].unresolved():
        return values
    meta = [(m[0], m[1], ch in " \t\n") for ch, m in zip(values[0].chars, values[0].meta, strict=True)]
    return [Rich.of(values[0].chars, meta)]


class Expander:
    """Variable state of a script walk; ``stack`` holds the enclosing blocks (if, for, ...)."""

    def __init__(self, path: Path, positional: Sequence[str], environ: Mapping[str, str] | None):
        self.path, self.positional, self.environ = path, list(positional), dict(environ or {})
        self.vars: dict[str, Rich | list[Rich]] = {}
        self.stack: list[str] = []
        self.notes: dict[tuple[int, str], None] = {}
        self.nesting = 0                             # ${X:-...} defaults being expanded now
        self.spent = 0                               # characters produced by expansions so far

    def note(self, line: int, text: str) -> None:
        self.notes.setdefault((line, text))

    def _block(self) -> str | None:
        return next((k for k in reversed(self.stack) if k != "group"), None)

    def assign(self, word: tuple) -> None:
        kind, val, line = word
        if kind == "array":
            name, append, elems = val
        else:
            lit = val[0][2]
            m = ASSIGN.match(lit.text)
            name, index, append = m.group(1), m.group(2), bool(m.group(3))
            parts = [("lit", False, Rich.of(lit.chars[m.end():], lit.meta[m.end():]))] + val[1:]
        shown = f"{name}{'+=' if append else '='}{'(...)' if kind == 'array' else '...'}"
        block = self._block()
        if block:
            self.note(line, f"{shown} inside `{block}` not applied")
        elif kind == "array":
            old = self.vars.get(name) if append else None
            old = list(old) if isinstance(old, list) else ([old] if old is not None else [])
            self.vars[name] = old + [f for e in elems for f in self.fields(e)]
        elif index:
            self.note(line, f"{name}{index}=... (array element assignment) not applied")
        else:
            value = self._cat(parts, line)
            old = self.vars.get(name) if append else None
            first = (old[0] if old else None) if isinstance(old, list) else old
            self._bound((len(first.chars) if first is not None else 0) + len(value.chars), line)
            if isinstance(old, list):
                self.vars[name] = [_appended(first, value)] + old[1:]
            else:
                self.vars[name] = _appended(old, value)

    def _lookup(self, name: str, index: str | None, line: int) -> list[Rich] | None:
        """The value(s) of a variable, or None when the script cannot know it."""
        if name.isdigit() or name in ("@", "*"):
            pos = [Rich(p, line) for p in self.positional]
            if name in ("@", "*"):
                return pos or None
            return pos[int(name) - 1:int(name)] or None if int(name) > 0 else None
        if name in self.vars:
            value = self.vars[name]
            if not isinstance(value, list):
                return [value] if index in (None, "@", "*", "0") else []
            if index in ("@", "*"):
                return value
            return value[int(index or 0):int(index or 0) + 1] if (index or "0").isdigit() else None
        return [Rich(self.environ[name], line)] if name in self.environ else None

    def _expand_text(self, text: str, line: int) -> Rich:
        """Expand the word inside ``${X:-word}`` (blanks and ;|&<>() are literal there)."""
        if self.nesting >= NESTING_LIMIT:
            raise InputError(location(self.path, line), f"${{...:-...}} expansions nest more than {NESTING_LIMIT} "
                             "levels deep here", "simplify the expansion: launch scripts nest 2 or 3 levels")
        self.nesting += 1
        try:
            return self._cat(Lexer(text, self.path, line, braces=True)._word()[1], line)
        finally:
            self.nesting -= 1

    def _bound(self, length: int, line: int) -> None:
        """Refuse a value longer than VALUE_LIMIT built on script ``line``."""
        if length > VALUE_LIMIT:
            raise InputError(location(self.path, line), f"a value expanded on this line grows past "
                             f"{describe_size(VALUE_LIMIT)} (a variable that doubles itself?)",
                             "launch-script values are short: check how this variable is built")

    def _spend(self, values: list[Rich], line: int) -> list[Rich]:
        """Count what an expansion produced against EXPANSION_BUDGET."""
        self.spent += sum(len(value.chars) for value in values) + ELEMENT_COST * len(values)
        if self.spent > EXPANSION_BUDGET:
            raise InputError(location(self.path, line), f"the script's expansions exceed "
                             f"{describe_size(EXPANSION_BUDGET)} in all by this line (variables that "
                             "double themselves?)", "launch scripts expand to a few KiB: check the variables used here")
        return values

    def _var(self, data: tuple, quoted: bool) -> list[Rich]:
        text, line, raw = data
        m = _PARAM.match(text) if raw.startswith("${") else None
        if raw.startswith("${") and (not m or text[:1] in "#!"):
            return [Rich(raw, line, text.lstrip("#!").split("[")[0] or raw)]
        name, index, rest = m.groups() if m else (text, None, "")
        op = next((o for o in _PARAM_OPS if rest.startswith(o)), None)
        values = self._lookup(name, index, line)
        unknown = values is None or any(v.unresolved() for v in values)
        if (rest and op is None) or (op and op[-1] in "+?" and unknown) or (values is None and not op):
            return [Rich(raw, line, name)]           # ${X%.py}, ${X:+alt} of an unknown X, unset X
        empty = values is None or (op is not None and op[0] == ":" and not "".join(v.text for v in values))
        if op and op[-1] in "-=" and empty:
            argline = line + text[:len(text) - len(rest) + len(op)].count("\n")
            values = [self._expand_text(rest[len(op):], argline)]
            if op[-1] == "=" and not self._block():
                self.vars[name] = values[0]
        elif op and op[-1] == "+":
            values = [] if empty else [self._expand_text(rest[len(op):], line)]
        values = _glue(values)
        return [join(values)] if quoted and index == "*" else values

    def _arith(self, body: str, line: int, raw: str) -> Rich:
        missing: list[str] = []

        def value(m: re.Match) -> str:
            name = m.group(1) or m.group(2) or m.group(3)
            vals = self._lookup(name, None, line)
            text = join(vals).text.strip() if vals is not None else ""
            unres = next(filter(None, (v.unresolved() for v in vals or [])), None)
            if vals is None or unres or not re.fullmatch(r"-?\d*", text):
                missing.append(unres or name)
            return f"({text or 0})"
        expr = _ARITH_NAME.sub(value, body)
        if missing:
            return Rich(raw, line, missing[0])
        try:
            return Rich(str(_safe_int(expr)), line)
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, RecursionError, MemoryError):
            self.note(line, f"{raw} not evaluated (only integer + - * / % ** << >> & | ^)")
            return Rich(raw, line, raw)

    def _cat(self, parts: list[tuple], line: int) -> Rich:
        """Expand parts without word splitting (assignments, ${X:-default})."""
        out = Rich()
        for part in parts:
            values = self._part(part)
            self._bound(len(out.chars) + sum(len(value.chars) + 1 for value in values), line)
            out.extend(join(values))
        return out

    def _part(self, part: tuple) -> list[Rich]:
        kind, quoted, data = part
        if kind == "lit":
            return [data]
        if kind == "var":
            return self._spend(self._var(data, quoted), data[1])
        if kind == "arith":
            return self._spend([self._arith(*data)], data[1])
        return [Rich(data[0], data[1], data[0])]     # $(cmd) / `cmd`: never run

    def _split(self, part: tuple) -> tuple[list[Rich], bool, bool]:
        """A part's pieces and whether blanks cut before/after it (only unquoted expansions)."""
        values = self._part(part)
        if part[0] == "lit" or part[1]:
            return values, False, False
        pieces, lead, trail = join(values).split()
        for piece in pieces:
            if piece.glued():
                self.note(piece.meta[0][0], f"{piece.text!r} has spaces; kept as one argument "
                                            f"(bash would split it into {len(piece.text.split())} words)")
        return pieces, lead, trail

    def fields(self, word: tuple) -> list[Rich]:
        """Expand one word into argv fields, splitting unquoted expansions like bash."""
        fields, cur, exists = [], Rich(), False
        for part in word[1]:
            pieces, lead, trail = self._split(part)
            if lead and exists:
                fields.append(cur)
                cur, exists = Rich(), False
            for k, piece in enumerate(pieces):
                if k:
                    fields.append(cur)
                    cur = Rich()
                self._bound(len(cur.chars) + len(piece.chars), word[2])
                cur.extend(piece)
                exists = True
            if trail and exists:
                fields.append(cur)
                cur, exists = Rich(), False
        return fields + [cur] if exists else fields
