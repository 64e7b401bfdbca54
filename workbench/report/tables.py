"""Render a tidy DataFrame: terminal (rich), csv, json, markdown. Column order is the frame's."""
from __future__ import annotations

import json
import math


def cell_text(value) -> str:
    """One table cell as text: empty for None/nan, 6 significant digits for floats."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def frame_to_text(frame, output_format: str, summary: dict | None = None) -> str:
    if output_format == "csv":
        return frame.to_csv(index=False)
    if output_format == "json":
        records = [{key: (None if isinstance(v, float) and math.isnan(v) else v) for key, v in row.items()}
                   for row in frame.to_dict(orient="records")]
        return json.dumps({"summary": summary or {}, "rows": records}, indent=2, default=str) + "\n"
    header = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n"
    body = "".join("| " + " | ".join(cell_text(v) for v in row) + " |\n" for row in frame.itertuples(index=False))
    return header + body


def print_frame(frame, title: str = "", console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=title or None, title_justify="left")
    for column in frame.columns:
        table.add_column(column, overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*(cell_text(value) for value in row))
    console.print(table)
