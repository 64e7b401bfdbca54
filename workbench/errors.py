"""The one error type users see: a single line naming where, what was expected, and the fix.

Every reader raises :class:`InputError` for bad input. The CLI prints ``str(error)`` and
exits with code 2; ``--debug`` shows the traceback instead.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path


@dataclass
class InputError(Exception):
    """Bad user input.

    ``where`` is a file, optionally with ``:line`` or ``:line:col`` and/or a key path;
    ``problem`` says what was found and what was expected; ``fix`` the next step.
    """

    where: str
    problem: str
    fix: str = ""

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{clip(self.where)}: {clip(self.problem)}"
        if self.fix:
            text += f" ({clip(self.fix)})"
        return " ".join(text.splitlines())          # one line, whatever the input held

    def __reduce__(self):
        """Pickled by its fields (a worker process's error reaches the parent whole), not by ``args``,
        which holds only the message."""
        return type(self), tuple(getattr(self, field.name) for field in fields(self))


MAX_PIECE = 300
"""The most characters of any one piece of an error line: a 100 KB value is never echoed."""


def clip(text: str, limit: int = MAX_PIECE) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def location(path: Path | str, line: int | None = None, key: str | None = None,
             column: int | None = None) -> str:
    """Format ``file[:line[:col]][ key]`` the same way everywhere."""
    text = str(path)
    if line is not None:
        text += f":{line}"
        if column is not None:
            text += f":{column}"
    if key:
        text += f" [{key}]"
    return text
