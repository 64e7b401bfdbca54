"""The one output layer: ``emit(result, format, out, force)`` for every subcommand.

Formats are the same for all commands and chosen the same way: ``--format``, else the suffix of
``--out``, else the terminal table. ``table`` prints with rich (summary, then each table);
``md``/``html`` are documents with every table and, for html, every figure embedded; ``csv`` is
the main table; ``json`` is :meth:`Result.to_dict` under its schema id; ``xlsx`` holds one sheet
per table (split past Excel's row limit). Files are written atomically; an existing file needs
``force``. Figures can also be written on their own with :func:`write_figure`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..errors import InputError
from .result import Result, records

from .formats import FIGURE_SUFFIXES, FORMATS, SUFFIX_FORMATS  # noqa: F401  (emit.FORMATS: the one list)
EXCEL_MAX_ROWS = 1_048_575                     # 1,048,576 rows per sheet, one of them the header
TERMINAL_ROWS = 40                             # rows per table on a terminal; documents get them all


def choose_format(requested: str | None, out: Path | None, allowed: tuple[str, ...] = FORMATS) -> str:
    """``--format`` wins; else ``--out``'s suffix; else the terminal table."""
    if requested:
        chosen = requested
    elif out is not None:
        chosen = SUFFIX_FORMATS.get(out.suffix.lower())
        if chosen is None:
            raise InputError(f"--out {out}", f"cannot tell the format from the suffix {out.suffix!r}",
                             f"use one of {', '.join(sorted(SUFFIX_FORMATS))} or pass --format")
    else:
        chosen = "table"
    if chosen not in allowed:
        raise InputError("--format", f"{chosen!r} is not offered here", f"use one of {', '.join(allowed)}")
    return chosen


def render(result: Result, output_format: str) -> str | bytes:
    """The result in one format (text, or bytes for xlsx)."""
    content = _rendered(result, output_format)
    if isinstance(content, list):
        from .csv_text import as_text
        return "".join(map(as_text, content))
    return content


def _rendered(result: Result, output_format: str) -> str | bytes | list:
    """:func:`render`, where a result's own renderer may give its text as a list of pieces (a comparison's CSV:
    a header and each unit's rows, as str or as UTF-8 bytes), which :func:`emit` writes one after the other
    instead of joining them into one more copy of tens of MB first."""
    if output_format in result.renderers:
        return result.renderers[output_format](result)
    if output_format == "json":
        from .json_text import json_text
        return json_text(result)
    if output_format == "csv":
        from .csv_text import frame_csv
        return frame_csv(result.main_table)
    if output_format == "md":
        from .markdown import to_markdown
        return to_markdown(result)
    if output_format == "html":
        from .html import to_html
        return to_html(result)
    if output_format == "xlsx":
        return to_xlsx(result)
    if output_format == "table":
        from .terminal import to_plain_text
        return to_plain_text(result)
    raise InputError("--format", f"unknown format {output_format!r}", f"use one of {', '.join(FORMATS)}")


def emit(result: Result, output_format: str | None = None, out: Path | str | None = None,
         force: bool = False, console=None) -> int:
    """Render and deliver ``result``; returns its exit code. ``out=None`` writes to stdout."""
    from ..output_checks import check_output

    out = Path(out) if out is not None else None
    output_format = choose_format(output_format, out)
    if out is not None:
        check_output(out, force)
    if output_format == "table" and out is None and "table" not in result.renderers:
        if result.printer is not None:
            result.printer(console)
        else:
            from .terminal import print_result
            print_result(result, console=console)
        return result.exit_code
    content = _rendered(result, output_format)
    if out is None:
        if isinstance(content, bytes):
            raise InputError("--format xlsx", "a workbook cannot go to the terminal", "pass --out FILE.xlsx")
        from .csv_text import as_text
        sys.stdout.writelines([content] if isinstance(content, str) else map(as_text, content))
    else:
        write_output(out, content)
        print(f"wrote {out}", file=sys.stderr)
    return result.exit_code


def write_output(path: Path, content: str | bytes | list[str]) -> None:
    from ..fileio import write_bytes, write_text

    if isinstance(content, bytes):
        write_bytes(path, content)
    else:
        write_text(path, content)


def write_figure(result: Result, name: str, path: Path | str, force: bool = False) -> Path:
    """One of the result's figures as PNG, SVG or PDF (by suffix), atomically."""
    from ..output_checks import check_output
    from .figures import figure_bytes

    path = Path(path)
    kind = FIGURE_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(str(path), f"cannot tell the picture format from {path.suffix!r}",
                         f"use one of {', '.join(FIGURE_SUFFIXES)}")
    figure = next((f for f in result.figures if f.name == name), None)
    if figure is None:
        raise InputError(str(path), f"this result has no figure {name!r}",
                         f"figures: {', '.join(f.name for f in result.figures) or 'none'}")
    check_output(path, force)
    write_output(path, figure_bytes(figure.draw(), kind))
    return path


STATUS_COLUMNS = ("status", "verdict", "result")
STATUS_FILLS = {"pass": "C6EFCE", "match": "C6EFCE", "ok": "C6EFCE", "aligned": "C6EFCE",
                "warning": "FFEB9C", "risk": "FFEB9C", "unknown": "FFEB9C", "manual": "FFEB9C",
                "error": "FFC7CE", "fail": "FFC7CE", "mismatch": "FFC7CE", "diverged": "FFC7CE",
                "unmatched": "D9D9D9", "only in a": "D9D9D9", "only in b": "D9D9D9"}
"""Cell colours of a status column: green / yellow / red as users know them from msprobe's workbooks."""


def to_xlsx(result: Result) -> bytes:
    """One sheet per table (``name``, ``name (2)``, ... past Excel's row limit), summary first;
    a ``status``/``verdict``/``result`` column is colour-coded (:data:`STATUS_FILLS`)."""
    import io

    try:
        from openpyxl import Workbook
        from openpyxl.cell import WriteOnlyCell
        from openpyxl.styles import Font, PatternFill
    except ImportError:
        raise InputError("--format xlsx", "openpyxl is not installed",
                         "pip install 'workbench[report]' (or choose csv)") from None
    book = Workbook(write_only=True)
    summary = book.create_sheet("summary")
    for line in [result.title, f"verdict: {result.verdict}", *result.summary,
                 *(f"{side}: {path}" for side, path in result.sources.items())]:
        summary.append([line])
    bold = Font(bold=True)
    fills = {key: PatternFill("solid", start_color=colour) for key, colour in STATUS_FILLS.items()}
    for name, frame in result.tables.items():
        rows = records(frame)
        columns = list(frame.columns)
        status = next((c for c in columns if str(c).lower() in STATUS_COLUMNS), None)
        for part, start in enumerate(range(0, max(len(rows), 1), EXCEL_MAX_ROWS)):
            sheet = book.create_sheet(_sheet_name(name, part))
            header = [WriteOnlyCell(sheet, value=str(column)) for column in columns]
            for cell in header:
                cell.font = bold
            sheet.append(header)
            for row in rows[start:start + EXCEL_MAX_ROWS]:
                cells = [WriteOnlyCell(sheet, value=_excel_value(row[c])) for c in columns]
                if status is not None:
                    fill = fills.get(str(row[status]).lower())
                    if fill is not None:
                        cells[columns.index(status)].fill = fill
                sheet.append(cells)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _sheet_name(name: str, part: int) -> str:
    clean = "".join(ch for ch in name if ch not in "[]:*?/\\")[:25] or "table"
    return clean if part == 0 else f"{clean} ({part + 1})"


def _excel_value(value):
    return value if value is None or isinstance(value, (int, float, bool)) else str(value)
