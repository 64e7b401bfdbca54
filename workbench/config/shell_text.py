"""Script text that remembers where it was written: :class:`Rich` strings, whose every character keeps
its script line, the variable that could not be resolved in it and whether a blank is glued (kept in one
argument), and the :class:`Token` a finished word becomes. Made by :mod:`.shell_lexer`, expanded by
:mod:`.shell_expand`."""
from __future__ import annotations

import re
from dataclasses import dataclass
from operator import itemgetter

_UNRES, _GLUED = itemgetter(1), itemgetter(2)
_BLANK = re.compile(r"[ \t\n]")


@dataclass(frozen=True)
class Token:
    text: str
    line: int                      # 1-based script line where this token's first character was written
    unresolved: str | None = None  # variable (e.g. "TOKENIZER_MODEL", "1" for $1) that could not be resolved


class Rich:
    """A string whose characters remember (line, unresolved variable, glued-space flag)."""

    __slots__ = ("chars", "meta")

    def __init__(self, text: str = "", line: int = 0, unres: str | None = None):
        self.chars, self.meta = list(text), [(line, unres, False)] * len(text)

    @classmethod
    def of(cls, chars: list[str], meta: list[tuple]) -> Rich:
        out = cls()
        out.chars, out.meta = list(chars), list(meta)
        return out

    def add(self, ch: str, line: int, unres: str | None = None) -> None:
        meta = (line, unres, False)
        if self.meta and self.meta[-1] == meta:
            meta = self.meta[-1]                     # one shared tuple per run: 8 bytes a character, not 72
        self.chars.append(ch)
        self.meta.append(meta)

    def extend(self, other: Rich) -> Rich:
        self.chars += other.chars
        self.meta += other.meta
        return self

    @property
    def text(self) -> str:
        return "".join(self.chars)

    def unresolved(self) -> str | None:
        """The first unresolved variable among the characters (scanned at C speed), else None."""
        return next(filter(None, map(_UNRES, self.meta)), None)

    def glued(self) -> bool:
        """Whether some blank is glued (kept as one argument, see ``shell_expand._glue``)."""
        return any(map(_GLUED, self.meta))

    def token(self, default_line: int) -> Token:
        return Token(self.text, self.meta[0][0] if self.meta else default_line, self.unresolved())

    def split(self) -> tuple[list[Rich], bool, bool]:
        """Bash word splitting on unresolved-free, unglued blanks: (pieces, leading, trailing)."""
        text, meta = self.text, self.meta
        cuts = [m.start() for m in _BLANK.finditer(text) if meta[m.start()][1] is None and not meta[m.start()][2]]
        pieces, start = [], 0
        for cut in cuts + [len(text)]:
            if cut > start:
                piece = Rich()
                piece.chars, piece.meta = self.chars[start:cut], meta[start:cut]
                pieces.append(piece)
            start = cut + 1
        return pieces, bool(cuts) and cuts[0] == 0, bool(cuts) and cuts[-1] == len(text) - 1


def join(values: list[Rich]) -> Rich:
    """Values joined by single spaces, like ``"${ARR[*]}"``."""
    out = Rich()
    for k, v in enumerate(values):
        if k:
            out.add(" ", v.meta[0][0] if v.meta else 0)
        out.extend(v)
    return out
