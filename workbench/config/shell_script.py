"""Read a bash launch script (MindSpeed-LLM or upstream Megatron style) into argv tokens.

Nothing in the script is executed. A small bash lexer keeps every character's script line
through quoting, ``\\``-newline continuations, ``${VAR}``/``${VAR:-default}``/``$((...))``
expansion, bash arrays (``ARGS=( ... )``, ``ARGS+=( ... )``, ``${ARGS[@]}``) and word
splitting, so a flag that reaches the training script through ``GPT_ARGS="..."`` still
points at the line inside that definition. What cannot be known statically (``$1``,
environment variables the script does not set, ``$(cmd)``) stays visible as a token whose
``unresolved`` names it. Assignments inside ``if``/``for``/``while``/``case``/functions/
subshells are not applied and are reported in ``notes``.

One deliberate departure from bash: a variable whose value is plain words separated by
spaces (``TOKENIZER_MODEL="your tokenizer path"``, the placeholders of example scripts) is
kept as one argument where bash would split it; a note says so.
"""
from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from workbench.errors import InputError, location


@dataclass(frozen=True)
class Token:
    text: str
    line: int                      # 1-based script line where this token's first character was written
    unresolved: str | None = None  # variable (e.g. "TOKENIZER_MODEL", "1" for $1) that could not be resolved


@dataclass
class LaunchCommand:
    path: Path
    line: int                      # line where the launch command starts
    launcher: str                  # "torchrun" | "python" | "deepspeed" | "python -m torch.distributed.launch" | ...
    launcher_args: list[Token]     # before the training script, e.g. --nproc_per_node 8
    script: str                    # e.g. "pretrain_gpt.py"
    script_args: list[Token]       # what reaches the training script: only these are Megatron args
    notes: list[str] = field(default_factory=list)


_META = set(" \t\n;&|<>()")
_OPS = (";;", "&&", "||", "|&", "&>", ">>", ">&", ">|", "<<<", "<<-", "<<", "<&", "<>",
        ";", "|", "&", ">", "<", "(", ")")
_SEPARATORS = {"nl", ";", ";;", "&", "&&", "||", "|", "|&", "(", ")"}
_ASSIGN = re.compile(r"([A-Za-z_]\w*)(\[[^\]]*\])?(\+?)=")
_PARAM = re.compile(r"([A-Za-z_]\w*|\d+|[@*#?$!-])(?:\[([^\]]*)\])?(.*)\Z", re.S)
_PARAM_OPS = (":-", ":=", ":+", ":?", "-", "=", "+", "?")
_WRAPPERS = {"nohup", "exec", "time", "env", "srun", "numactl", "taskset", "stdbuf", "nice", "command"}
_KEYWORDS = {"if", "then", "elif", "else", "fi", "for", "select", "while", "until", "do", "done",
             "case", "esac", "function", "{", "}", "!", None}
_DECLARE = {"export", "declare", "typeset", "local", "readonly"}
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?\Z")


class _Rich:
    """A string whose characters remember (line, unresolved variable, glued-space flag)."""

    __slots__ = ("chars", "meta")

    def __init__(self, text: str = "", line: int = 0, unres: str | None = None):
        self.chars, self.meta = list(text), [(line, unres, False)] * len(text)

    def add(self, ch: str, line: int, unres: str | None = None) -> None:
        self.chars.append(ch)
        self.meta.append((line, unres, False))

    def extend(self, other: _Rich) -> _Rich:
        self.chars += other.chars
        self.meta += other.meta
        return self

    @property
    def text(self) -> str:
        return "".join(self.chars)

    def token(self, default_line: int) -> Token:
        unres = next((m[1] for m in self.meta if m[1] is not None), None)
        return Token(self.text, self.meta[0][0] if self.meta else default_line, unres)

    def split(self) -> tuple[list[_Rich], bool, bool]:
        """Bash word splitting on unresolved-free, unglued blanks: (pieces, leading, trailing)."""
        cuts = [ch in " \t\n" and m[1] is None and not m[2] for ch, m in zip(self.chars, self.meta)]
        pieces, cur = [], None
        for ch, m, cut in zip(self.chars, self.meta, cuts):
            if cut:
                cur = None
                continue
            if cur is None:
                cur = _Rich()
                pieces.append(cur)
            cur.chars.append(ch)
            cur.meta.append(m)
        return pieces, bool(cuts and cuts[0]), bool(cuts and cuts[-1])


def _join(values: list[_Rich]) -> _Rich:
    out = _Rich()
    for k, v in enumerate(values):
        if k:
            out.add(" ", v.meta[0][0] if v.meta else 0)
        out.extend(v)
    return out


class _Lexer:
    """Turns script text into ("word", parts, line), ("array", (name, append, words), line),
    ("op", text, line) and ("nl", None, line). A part is (kind, quoted, data)."""

    def __init__(self, text: str, path: Path, line: int = 1, braces: bool = False):
        self.s, self.i, self.line, self.path = text, 0, line, path
        self.braces = braces                         # inside ${X:-...}: blanks and ;|&<>() are literal
        self.heredocs: list[tuple[str, bool]] = []

    def _peek(self, k: int = 0) -> str:
        return self.s[self.i + k] if self.i + k < len(self.s) else ""

    def _take(self) -> str:
        ch = self.s[self.i]
        self.i += 1
        self.line += ch == "\n"
        return ch

    def _fail(self, line: int, what: str) -> InputError:
        return InputError(location(self.path, line), f"unterminated {what} starting here",
                          "close it; the script would not run under bash either")

    def tokens(self) -> list[tuple]:
        out: list[tuple] = []
        while self.i < len(self.s):
            ch, line = self._peek(), self.line
            if ch in " \t" or (ch == "\\" and self._peek(1) == "\n"):
                self._take() if ch != "\\" else (self._take(), self._take())
            elif ch == "#":
                while self._peek() not in ("", "\n"):
                    self._take()
            elif ch == "\n":
                out.append(("nl", None, line))
                self._take()
                self._skip_heredocs()
            elif ch in _META:
                op = next(o for o in _OPS if self.s.startswith(o, self.i))
                self.i += len(op)
                out.append(("op", op, line))
            else:
                word = self._word()
                if word[0] == "word" and len(word[1]) == 1 and self._peek() in ("<", ">") \
                        and word[1][0][0] == "lit" and not word[1][0][1] and word[1][0][2].text.isdigit():
                    continue                         # "2" of "2>&1": an fd number, not an argument
                if out and out[-1][0] == "op" and out[-1][1] in ("<<", "<<-") and word[0] == "word":
                    delim = "".join(p[2].text for p in word[1] if p[0] == "lit")
                    self.heredocs.append((delim, out[-1][1] == "<<-"))
                out.append(word)
        return out

    def _skip_heredocs(self) -> None:
        for delim, strip in self.heredocs:
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                body = self.s[self.i:end]
                self.i, self.line = min(end + 1, len(self.s)), self.line + 1
                if (body.lstrip("\t") if strip else body) == delim:
                    break
        self.heredocs = []

    def _word(self, in_array: bool = False) -> tuple:
        parts: list[tuple] = []
        lit, line = _Rich(), self.line

        def flush() -> None:
            nonlocal lit
            if lit.chars:
                parts.append(("lit", False, lit))
                lit = _Rich()
        while self.i < len(self.s):
            ch = self._peek()
            if ch in _META and not self.braces:
                m = _ASSIGN.fullmatch(lit.text) if not parts else None
                if ch == "(" and m and not in_array and not m.group(2):
                    return self._array(m.group(1), bool(m.group(3)), line)
                break
            if ch == "\\":
                self._take()
                if self._peek() == "\n":
                    self._take()
                elif self._peek():
                    lit.add(self._peek(), self.line)
                    self._take()
            elif ch == "'":
                flush()
                parts.append(("lit", True, self._single()))
            elif ch == '"':
                flush()
                parts.extend(self._double())
            elif ch in "$`":
                flush()
                parts.append(self._dollar(False))
            else:
                lit.add(ch, self.line)
                self._take()
        flush()
        return ("word", parts, line)

    def _array(self, name: str, append: bool, line: int) -> tuple:
        self._take()
        words = []
        while True:
            ch = self._peek()
            if not ch:
                raise self._fail(line, f"array {name}=(")
            if ch in " \t\n" or (ch == "\\" and self._peek(1) and self._peek(1) in "\n \t"):
                self._take()
            elif ch == "#":
                while self._peek() not in ("", "\n"):
                    self._take()
            elif ch == ")":
                self._take()
                return ("array", (name, append, words), line)
            else:
                word = self._word(in_array=True)
                if word[1]:
                    words.append(word)
                elif self._peek():
                    self._take()                     # stray ; | & < > ( inside the array: skip it

    def _single(self) -> _Rich:
        line, out = self.line, _Rich()
        self._take()
        while self._peek() != "'":
            if not self._peek():
                raise self._fail(line, "single quote")
            out.add(self._peek(), self.line)
            self._take()
        self._take()
        return out

    def _double(self) -> list[tuple]:
        line, parts, lit = self.line, [], _Rich()
        self._take()
        while self._peek() != '"':
            ch = self._peek()
            if not ch:
                raise self._fail(line, "double quote")
            if ch == "\\" and self._peek(1) and self._peek(1) in '$`"\\\n':
                self._take()
                if self._take() != "\n":
                    lit.add(self.s[self.i - 1], self.line)
            elif ch in "$`":
                parts += [("lit", True, lit), self._dollar(True)]
                lit = _Rich()
            else:
                lit.add(ch, self.line)
                self._take()
        self._take()
        return parts + [("lit", True, lit)]

    def _scan(self, opener: str, closer: str, depth: int, what: str) -> str:
        line, buf, quote = self.line, [], None
        while self.i < len(self.s):
            ch = self._take()
            if ch == "\\" and self.i < len(self.s) and quote != "'":
                buf.append(ch + self._take())
                continue
            if quote:
                quote = None if ch == quote else quote
            elif ch in "'\"" and closer != "`":
                quote = ch
            elif ch == opener:
                depth += 1
            elif ch == closer:
                depth -= 1
                if depth == 0:
                    return "".join(buf)
            buf.append(ch)
        raise self._fail(line, what)

    def _dollar(self, quoted: bool) -> tuple:
        line, start = self.line, self.i
        if self._take() == "`":
            body = self._scan("\0", "`", 1, "backquote")
            return ("cmd", quoted, ("`" + body + "`", line))
        nxt = self._peek()
        if nxt == "(" and self._peek(1) == "(":
            self.i += 2
            return ("arith", quoted, (self._scan("(", ")", 2, "$((")[:-1], line, self.s[start:self.i]))
        if nxt == "(":
            self._take()
            self._scan("(", ")", 1, "$(")
            return ("cmd", quoted, (self.s[start:self.i], line))
        if nxt == "{":
            self._take()
            inner = self._scan("{", "}", 1, "${")
            return ("var", quoted, (inner, line, self.s[start:self.i]))
        if nxt == "'" and not quoted:            # $'...' (ANSI-C quoting)
            text = self._single().text.encode("latin-1", "backslashreplace").decode("unicode_escape")
            return ("lit", True, _Rich(text, line))
        m = re.compile(r"[A-Za-z_]\w*|\d|[@*#?$!-]").match(self.s, self.i)
        if not m:
            return ("lit", quoted, _Rich("$", line))
        self.i = m.end()
        return ("var", quoted, (m.group(0), line, self.s[start:self.i]))


def _plain(word: tuple) -> str | None:
    """The text of a word made of one unquoted literal (keywords, command names), else None."""
    if word[0] == "word" and len(word[1]) == 1 and word[1][0][0] == "lit" and not word[1][0][1]:
        return word[1][0][2].text
    return None


def _bash_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


_ARITH_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: _bash_div, ast.FloorDiv: _bash_div, ast.Mod: lambda a, b: a - b * _bash_div(a, b),
              ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
              ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
              ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}


def _safe_int(expr: str) -> int:
    """Integer arithmetic like bash $((...)), evaluated on the AST (nothing is executed)."""
    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _ARITH_OPS:
            return _ARITH_OPS[type(node.op)](ev(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= b <= 64:
                raise ValueError("exponent out of range")
            return _ARITH_OPS[type(node.op)](a, b)
        raise ValueError(f"unsupported arithmetic: {type(node).__name__}")
    return ev(ast.parse(expr.strip(), mode="eval").body)


class _Shell:
    """Walks the token stream: applies top-level assignments, collects launch commands."""

    def __init__(self, path: Path, positional: Sequence[str], environ: Mapping[str, str] | None):
        self.path, self.positional, self.environ = path, list(positional), dict(environ or {})
        self.vars: dict[str, _Rich | list[_Rich]] = {}
        self.stack: list[str] = []
        self.pending_func = False
        self.notes: dict[tuple[int, str], None] = {}
        self.launches: list[LaunchCommand] = []

    def note(self, line: int, text: str) -> None:
        self.notes.setdefault((line, text))

    def run(self, tokens: list[tuple]) -> None:
        cmd: list[tuple] = []
        redirected = False
        for kind, val, line in tokens + [("nl", None, 0)]:
            if kind in ("word", "array"):
                cmd += [] if redirected else [(kind, val, line)]
            elif kind == "op" and val not in _SEPARATORS:
                redirected = True                    # > file, 2>&1, < in: the command's words end here
            elif val == "(" and [_plain(w) for w in cmd][:-1] in ([], ["function"]) and cmd \
                    and _plain(cmd[-1]) not in _KEYWORDS:
                self.pending_func, cmd = True, []    # name() { ... }
            else:
                self._command(cmd)
                if val == "(" and not cmd:
                    self.stack.append("subshell")
                elif val == ")" and self.stack and self.stack[-1] == "subshell":
                    self.stack.pop()
                cmd, redirected = [], False

    def _block(self) -> str | None:
        return next((k for k in reversed(self.stack) if k != "group"), None)

    def _command(self, words: list[tuple]) -> None:
        while words:
            kw = _plain(words[0])
            if kw in ("if", "while", "until"):
                self.stack.append(kw)
            elif kw in ("for", "select", "case"):
                self.stack.append(kw)
                return
            elif kw in ("fi", "done", "esac", "}"):
                self.stack = self.stack[:-1]
            elif kw == "{":
                self.stack.append("function" if self.pending_func else "group")
                self.pending_func = False
            elif kw == "function":
                self.pending_func, words = True, words[1:]
            elif kw not in ("then", "do", "else", "elif", "!"):
                break
            words = words[1:]
        n = next((k for k, w in enumerate(words) if not _is_assignment(w)), len(words))
        if words and n == len(words):
            for w in words:
                self._assign(w)
            return
        words = words[n:]                            # VAR=x cmd: the assignment is for cmd only
        kw = _plain(words[0]) if words else None
        if kw in _DECLARE:
            for w in words[1:]:
                if _is_assignment(w):
                    self._assign(w)
        elif kw == "unset" and not self._block():
            for w in words[1:]:
                self.vars.pop(_plain(w) or "", None)
        elif kw in ("source", "."):
            self.note(words[0][2], f"`{kw} ...` not followed: variables it sets stay unresolved")
        elif words:
            self._launch(words)

    def _assign(self, word: tuple) -> None:
        kind, val, line = word
        if kind == "array":
            name, append, elems = val
        else:
            lit = val[0][2]
            m = _ASSIGN.match(lit.text)
            name, index, append = m.group(1), m.group(2), bool(m.group(3))
            rest = _Rich()
            rest.chars, rest.meta = lit.chars[m.end():], lit.meta[m.end():]
            parts = [("lit", False, rest)] + val[1:]
        shown = f"{name}{'+=' if append else '='}{'(...)' if kind == 'array' else '...'}"
        block = self._block()
        if block:
            self.note(line, f"{shown} inside `{block}` not applied")
        elif kind == "array":
            old = self.vars.get(name) if append else None
            old = list(old) if isinstance(old, list) else ([old] if old is not None else [])
            self.vars[name] = old + [f for e in elems for f in self._fields(e)]
        elif index:
            self.note(line, f"{name}{index}=... (array element assignment) not applied")
        else:
            value = self._cat(parts)
            old = self.vars.get(name) if append else None
            if isinstance(old, list):
                self.vars[name] = [(_Rich().extend(old[0]) if old else _Rich()).extend(value)] + old[1:]
            else:
                self.vars[name] = (_Rich().extend(old) if old else _Rich()).extend(value)

    def _lookup(self, name: str, index: str | None, line: int) -> list[_Rich] | None:
        """The value(s) of a variable, or None when the script cannot know it."""
        if name.isdigit() or name in ("@", "*"):
            pos = [_Rich(p, line) for p in self.positional]
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
        return [_Rich(self.environ[name], line)] if name in self.environ else None

    @staticmethod
    def _glue(values: list[_Rich]) -> list[_Rich]:
        """Keep a placeholder like "your tokenizer path" as one argument (see module docstring)."""
        pieces = values[0].text.split() if len(values) == 1 else []
        if len(pieces) < 2 or not all(p.isalpha() for p in pieces) or any(m[1] for m in values[0].meta):
            return values
        glued = _Rich()
        glued.chars = list(values[0].chars)
        glued.meta = [(m[0], m[1], ch in " \t\n") for ch, m in zip(glued.chars, values[0].meta)]
        return [glued]

    def _var(self, data: tuple, quoted: bool) -> list[_Rich]:
        text, line, raw = data
        m = _PARAM.match(text) if raw.startswith("${") else None
        if raw.startswith("${") and (not m or text[:1] in "#!"):
            return [_Rich(raw, line, text.lstrip("#!").split("[")[0] or raw)]
        name, index, rest = m.groups() if m else (text, None, "")
        op = next((o for o in _PARAM_OPS if rest.startswith(o)), None)
        values = self._lookup(name, index, line)
        unknown = values is None or any(mt[1] for v in values for mt in v.meta)
        if (rest and op is None) or (op and op[-1] in "+?" and unknown) or (values is None and not op):
            return [_Rich(raw, line, name)]          # ${X%.py}, ${X:+alt} of an unknown X, unset X
        empty = values is None or (op is not None and op[0] == ":" and not "".join(v.text for v in values))
        if op and op[-1] in "-=" and empty:
            argline = line + text[:len(text) - len(rest) + len(op)].count("\n")
            sub = _Lexer(rest[len(op):], self.path, argline, braces=True)
            values = [self._cat(sub._word()[1])]
            if op[-1] == "=" and not self._block():
                self.vars[name] = values[0]
        elif op and op[-1] == "+":
            sub = _Lexer(rest[len(op):], self.path, line, braces=True)
            values = [] if empty else [self._cat(sub._word()[1])]
        values = self._glue(values)
        return [_join(values)] if quoted and index == "*" else values

    def _arith(self, body: str, line: int, raw: str) -> _Rich:
        missing: list[str] = []

        def value(m: re.Match) -> str:
            name = m.group(1) or m.group(2) or m.group(3)
            vals = self._lookup(name, None, line)
            text = _join(vals).text.strip() if vals is not None else ""
            unres = next((mt[1] for v in vals or [] for mt in v.meta if mt[1]), None)
            if vals is None or unres or not re.fullmatch(r"-?\d*", text):
                missing.append(unres or name)
            return f"({text or 0})"
        expr = re.sub(r"\$\{(\w+)\}|\$(\w+)|\b([A-Za-z_]\w*)\b", value, body)
        if missing:
            return _Rich(raw, line, missing[0])
        try:
            return _Rich(str(_safe_int(expr)), line)
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError):
            self.note(line, f"{raw} not evaluated (only integer + - * / % ** << >> & | ^)")
            return _Rich(raw, line, raw)

    def _cat(self, parts: list[tuple]) -> _Rich:
        """Expand parts without word splitting (assignments, ${X:-default})."""
        out = _Rich()
        for part in parts:
            out.extend(_join(self._part(part)))
        return out

    def _part(self, part: tuple) -> list[_Rich]:
        kind, quoted, data = part
        if kind == "lit":
            return [data]
        if kind == "var":
            return self._var(data, quoted)
        if kind == "arith":
            return [self._arith(*data)]
        return [_Rich(data[0], data[1], data[0])]    # $(cmd) / `cmd`: never run

    def _fields(self, word: tuple) -> list[_Rich]:
        """Expand one word into argv fields, splitting unquoted expansions like bash."""
        fields, cur, exists = [], _Rich(), False
        for part in word[1]:
            values = self._part(part)
            if part[0] == "lit" or part[1]:
                for k, v in enumerate(values):
                    if k:
                        fields.append(cur)
                        cur = _Rich()
                    cur.extend(v)
                    exists = True
                continue
            pieces, lead, trail = _join(values).split()
            if lead and exists:
                fields.append(cur)
                cur, exists = _Rich(), False
            for k, piece in enumerate(pieces):
                if any(m[2] for m in piece.meta):
                    self.note(piece.meta[0][0], f"{piece.text!r} has spaces; kept as one argument "
                                                f"(bash would split it into {len(piece.text.split())} words)")
                if k:
                    fields.append(cur)
                    cur = _Rich()
                cur.extend(piece)
                exists = True
            if trail and exists:
                fields.append(cur)
                cur, exists = _Rich(), False
        return fields + [cur] if exists else fields

    def _launch(self, words: list[tuple]) -> None:
        words = [w for w in words if w[0] == "word"]
        first = self._fields(words[0]) if words else []
        base = first[0].text.rsplit("/", 1)[-1] if first else ""
        if base not in _WRAPPERS and not _is_launcher(base):
            return
        toks = [f.token(w[2]) for w in words for f in self._fields(w)]
        j = next((k for k, t in enumerate(toks) if _is_launcher(t.text.rsplit("/", 1)[-1])), None)
        if j is None:
            return
        launcher, rest = toks[j].text.rsplit("/", 1)[-1], toks[j + 1:]
        s = next((k for k, t in enumerate(rest) if t.text.endswith(".py")), None)
        if s is None:
            return
        if _PYTHON.fullmatch(launcher):
            launcher = "python"
            m = next((k for k, t in enumerate(rest[:s]) if t.text == "-m"), None)
            if m is not None:                        # python [-u] -m torch.distributed.launch ...
                if m + 1 >= len(rest) or not rest[m + 1].text.startswith("torch.distributed."):
                    return
                launcher, rest, s = f"python -m {rest[m + 1].text}", rest[:m] + rest[m + 2:], s - 2
        self.launches.append(LaunchCommand(self.path, words[0][2], launcher, rest[:s],
                                           rest[s].text, rest[s + 1:], []))


def _is_assignment(word: tuple) -> bool:
    if word[0] == "array":
        return True
    first = word[1][0] if word[1] else None
    return bool(first and first[0] == "lit" and not first[1] and _ASSIGN.match(first[2].text))


def _is_launcher(name: str) -> bool:
    return name in ("torchrun", "deepspeed") or bool(_PYTHON.fullmatch(name))


def _rank(cmd: LaunchCommand) -> int:
    """Prefer a distributed launcher and a training script over helper python calls."""
    script = cmd.script.rsplit("/", 1)[-1].lower()
    return (cmd.launcher != "python") + any(k in script for k in ("train", "tune"))


def parse_launch_script(path: Path | str, *, positional: Sequence[str] = (),
                        environ: Mapping[str, str] | None = None) -> LaunchCommand:
    """Find the training launch command in a bash script and return its argv with lines.

    ``positional`` gives values for ``$1``, ``$2``...; ``environ`` for variables the script
    reads from its environment. Both default to unknown (tokens marked ``unresolved``).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
    except OSError as exc:
        raise InputError(location(path), f"cannot read the launch script ({exc.strerror})",
                         "check the path") from None
    shell = _Shell(path, positional, environ)
    shell.run(_Lexer(text, path).tokens())
    if not shell.launches:
        raise InputError(location(path), "no launch command found: expected a line that runs a *.py "
                         "training script via torchrun, python, python -m torch.distributed.launch "
                         "or deepspeed", "pass the script that starts training (e.g. pretrain_gpt.py), "
                         "or give the training log or a checkpoint instead")
    best = max(shell.launches, key=lambda c: (_rank(c), -shell.launches.index(c)))
    for other in shell.launches:
        if other is not best:
            shell.note(other.line, f"another launch command ({other.launcher} {other.script}) ignored; "
                                   f"using line {best.line}")
    best.notes = [f"line {line}: {text}" for line, text in sorted(shell.notes)]
    return best
