"""A result on the terminal: title and verdict, the summary, then each table (rich)."""
from __future__ import annotations

from .result import Result
from .tables import cell_text

TERMINAL_ROWS = 40                     # rows shown per table; the documents hold them all


def print_result(result: Result, console=None, max_rows: int = TERMINAL_ROWS) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    console.print(f"[bold]{result.title}[/bold]: {result.verdict}", highlight=False, soft_wrap=True)
    for side, path in result.sources.items():   # soft_wrap: paths and numbers stay whole for copy-paste
        console.print(f"  {side}: {path}", highlight=False, style="dim", soft_wrap=True, markup=False)
    for line in result.summary:
        console.print(f"- {line}", highlight=False, soft_wrap=True, markup=False)
    for name, frame in result.tables.items():
        if name in result.terminal_columns:   # a narrower view for the screen; the documents hold every column
            if not result.terminal_columns[name]:
                continue
            frame = frame[[c for c in result.terminal_columns[name] if c in frame.columns]]
        if frame.empty:
            console.print(f"{name}: none", highlight=False)
            continue
        table = Table(title=name, title_justify="left")
        for column in frame.columns:
            table.add_column(str(column), overflow="fold")
        for row in frame.head(max_rows).itertuples(index=False):
            table.add_row(*(cell_text(value) for value in row))
        console.print(table)
        if len(frame) > max_rows:
            console.print(f"  ... {len(frame) - max_rows} more rows (use --format csv/html/xlsx for all)",
                          style="dim", highlight=False)
    for note in result.notes:
        console.print(f"note: {note}", style="dim", highlight=False, soft_wrap=True, markup=False)


def to_plain_text(result: Result) -> str:
    """The terminal rendering without colours, for ``--out FILE.txt``."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=120, color_system=None, force_terminal=False)
    if result.printer is not None:
        result.printer(console)
    else:
        print_result(result, console=console)
    return buffer.getvalue()
