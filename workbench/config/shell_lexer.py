"""The bash lexer behind :mod:`workbench.config.shell_script`: script text into words.

Every character keeps the script line it was written on, through quoting, comments,
``\\``-newline continuations, heredocs and bash arrays (``ARGS=( ... )``). Expansions
(``$X``, ``${X...}``, ``$((...))``, ``$(cmd)``) are kept as parts for the evaluator.
"""
from __future__ import annotations

import re
from pathlib import Path

from workbench.errors import InputError, location

from .shell_ansi_c import closing_quote, expand_ansi_c
from .shell_text import Rich

_META = set(" \t\n;&|<>()")
_OPS = (";;", "&&", "||", "|&", "&>", ">>", ">&", ">|", "<<<", "<<-", "<<", "<&", "<>",
        ";", "|", "&", ">", "<", "(", ")")
_PLAIN_RUN = re.compile(r"[^ \t\n;&|<>()\\'\"$`]+")    # characters a word takes as they are
_BRACED_RUN = re.compile(r"[^\n\\'\"$`]+")               # the same inside ${X:-...}
_DOUBLE_RUN = re.compile(r"[^\n\\\"$`]+")                 # the same inside "..."
_SIMPLE_VAR = re.compile(r"[A-Za-z_]\w*|\d|[@*#?$!-]")
ASSIGN = re.compile(r"([A-Za-z_]\w*)(\[[^\]]*\])?(\+?)=")


def plain_word(word: tuple) -> str | None:
    """The text of a word made of one unquoted literal (keywords, command names), else None."""
    if word[0] == "word" and len(word[1]) == 1 and word[1][0][0] == "lit" and not word[1][0][1]:
        return word[1][0][2].text
    return None


def is_assignment(word: tuple) -> bool:
    if word[0] == "array":
        return True
    first = word[1][0] if word[1] else None
    return bool(first and first[0] == "lit" and not first[1] and ASSIGN.match(first[2].text))


class Lexer:
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

    def _skip_comment(self) -> None:
        while self._peek() not in ("", "\n"):
            self._take()

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
                self._skip_comment()
            elif ch == "\n":
                out.append(("nl", None, line))
                self._take()
                self._skip_heredocs()
            elif ch in _META:
                op = next(o for o in _OPS if self.s.startswith(o, self.i))
                self.i += len(op)
                out.append(("op", op, line))
            else:
                self._add_word(out, self._word())
        return out

    def _add_word(self, out: list[tuple], word: tuple) -> None:
        if word[0] == "word" and self._peek() in ("<", ">") and (plain_word(word) or "").isdigit():
            return                                   # "2" of "2>&1": an fd number, not an argument
        if out and out[-1][0] == "op" and out[-1][1] in ("<<", "<<-") and word[0] == "word":
            delim = "".join(p[2].text for p in word[1] if p[0] == "lit")
            self.heredocs.append((delim, out[-1][1] == "<<-"))
        out.append(word)

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
        lit, line = Rich(), self.line

        def flush() -> None:
            nonlocal lit
            if lit.chars:
                parts.append(("lit", False, lit))
                lit = Rich()
        while self.i < len(self.s):
            ch = self._peek()
            if ch in _META and not self.braces:
                m = ASSIGN.fullmatch(lit.text) if not parts else None
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
                self._run(lit, _BRACED_RUN if self.braces else _PLAIN_RUN)
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
                self._skip_comment()
            elif ch == ")":
                self._take()
                return ("array", (name, append, words), line)
            else:
                word = self._word(in_array=True)
                if word[1]:
                    words.append(word)
                elif self._peek():
                    self._take()                     # stray ; | & < > ( inside the array: skip it

    def _run(self, lit: Rich, pattern: re.Pattern) -> None:
        """Take the run of ordinary characters at ``self.i`` (at least one) into ``lit`` at once."""
        match = pattern.match(self.s, self.i)
        if match is None:                            # a newline or a character the caller treats as plain
            lit.add(self._peek(), self.line)
            self._take()
            return
        lit.extend(Rich(match.group(), self.line))
        self.i = match.end()

    def _single(self) -> Rich:
        line, out = self.line, Rich()
        end = self.s.find("'", self.i + 1)
        if end < 0:
            raise self._fail(line, "single quote")
        for number, piece in enumerate(self.s[self.i + 1:end].split("\n")):
            if number:
                out.add("\n", line + number - 1)
            out.extend(Rich(piece, line + number))
        self.line += self.s.count("\n", self.i, end)
        self.i = end + 1
        return out

    def _ansi_c(self, line: int) -> Rich:
        self._take()
        start, end = self.i, closing_quote(self.s, self.i)
        if end is None:
            raise self._fail(line, "$'...' quote")
        while self.i < end:
            self._take()                             # keeps self.line counting newlines
        self._take()
        return Rich(expand_ansi_c(self.s[start:end]), line)

    def _double(self) -> list[tuple]:
        line, parts, lit = self.line, [], Rich()
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
                lit = Rich()
            else:
                self._run(lit, _DOUBLE_RUN)
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
            return ("lit", True, self._ansi_c(line))
        m = _SIMPLE_VAR.match(self.s, self.i)
        if not m:
            return ("lit", quoted, Rich("$", line))
        self.i = m.end()
        return ("var", quoted, (m.group(0), line, self.s[start:self.i]))
