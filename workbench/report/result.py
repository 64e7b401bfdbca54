"""What every library function hands the output layer: a :class:`Result`.

A result holds data, never text for one medium: tables as DataFrames (tidy, fixed column
order), figures as lazy drawing functions, a verdict with its exit code, the one-screen summary,
the files it compared (named, so every figure and table can say which side is which), and a
versioned schema id ``workbench.<kind>/<version>`` for its JSON. :func:`workbench.report.emit.emit`
renders it in any format; a command may add a renderer of its own for one format (the checklist's
terminal table) through ``renderers``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pandas is imported by whoever builds tables; the checklist's start-up stays free of it
    import pandas as pd


@dataclass
class Figure:
    """A figure drawn on demand (matplotlib is imported only when a format needs pictures)."""

    name: str                                   # file-safe: "loss", "relative_difference"
    title: str
    draw: Callable[[], Any]                     # -> matplotlib.figure.Figure


@dataclass
class Result:
    kind: str                                   # "checklist", "loss", "localnorm", "weights_diff", ...
    title: str
    verdict: str                                # "PASS", "FAIL", "MISMATCH", ...
    exit_code: int = 0
    summary: list[str] = field(default_factory=list)          # most important first
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)   # the first is the main table
    figures: list[Figure] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)    # side label -> file
    facts: dict[str, Any] = field(default_factory=dict)      # thresholds, alignment, ... (JSON-able)
    notes: list[str] = field(default_factory=list)
    version: int = 1
    renderers: dict[str, Callable[["Result"], str]] = field(default_factory=dict, repr=False)
    payload: Callable[[], dict] | None = field(default=None, repr=False)   # a command's own JSON body
    printer: Callable[[Any], None] | None = field(default=None, repr=False)  # its own terminal view (console)
    terminal_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)  # table -> columns on a terminal
                                                                              # (an empty tuple: not shown there)

    @property
    def schema(self) -> str:
        return f"workbench.{self.kind}/{self.version}"

    @property
    def main_table(self) -> pd.DataFrame:
        if not self.tables:
            import pandas as pd
            return pd.DataFrame()
        return next(iter(self.tables.values()))

    def to_dict(self) -> dict:
        """The JSON document: schema first, then verdict, summary, facts, notes and every table."""
        if self.payload is not None:
            return {"schema": self.schema, **self.payload()}
        return {"schema": self.schema, "title": self.title, "verdict": self.verdict,
                "exit_code": self.exit_code, "sources": self.sources, "summary": self.summary,
                "facts": json_safe(self.facts), "notes": self.notes,
                "tables": {name: records(frame) for name, frame in self.tables.items()}}


def records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-able dicts: nan -> None, numpy scalars -> Python numbers."""
    return [json_safe(row) for row in frame.to_dict(orient="records")]


def json_safe(value: Any) -> Any:
    """``value`` with nan/inf as None and numpy/pandas scalars as plain Python values."""
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (ValueError, TypeError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
