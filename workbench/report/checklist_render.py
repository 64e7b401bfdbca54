"""Render the CheckList report: markdown, HTML (Jinja2, the shared page style), the rich terminal
table. The JSON is :func:`workbench.report.checklist_data.report_to_dict`; the whole report goes
out through :func:`workbench.report.emit.emit` (see :mod:`workbench.report.checklist_result`)."""
from __future__ import annotations

from ..audit.engine import AuditReport
from .checklist_data import sections, side_cell, summary_line
from .checklist_result import fix_text, footer_lines, header_lines

VERDICT_STYLE = {"MISMATCH": "bold red", "RISK": "yellow", "UNKNOWN": "magenta", "MANUAL": "cyan", "INFO": "blue",
                 "PASS": "green"}


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: AuditReport, only: set[str] | None = None) -> str:
    out = ["# workbench checklist", ""] + [f"- {line}" for line in header_lines(report)]
    out += ["", f"**Summary:** {summary_line(report)}", ""]
    for section, items in sections(report, only):
        out += [f"## {section}", "", "| Verdict | Item | Megatron | MindFormers | Finding | Fix |", "|---|---|---|---|---|---|"]
        for item in items:
            (value_m, source_m), (value_f, source_f) = side_cell(item.megatron), side_cell(item.mindformers)
            fix = "; ".join(f"{side}: `{text}`" for side, text in item.fix.items() if text and item.verdict != "PASS")
            cells = [f"**{item.verdict}**", item.title, f"`{value_m}` <br>{source_m}" if value_m else "",
                     f"`{value_f}` <br>{source_f}" if value_f else "", item.message, fix]
            out.append("| " + " | ".join(_md_cell(cell) for cell in cells) + " |")
        out.append("")
    out += [f"- {line}" for line in footer_lines(report)]
    return "\n".join(out) + "\n"


def to_html(report: AuditReport, only: set[str] | None = None, result=None) -> str:
    """One self-contained page (autoescaped template; the LR figure embedded when ``result`` has it)."""
    from .html import figure_views, render_page

    groups = []
    for section, items in sections(report, only):
        rows = []
        for item in items:
            (value_m, source_m), (value_f, source_f) = side_cell(item.megatron), side_cell(item.mindformers)
            fixes = [(side, text) for side, text in item.fix.items() if text and item.verdict != "PASS"]
            rows.append({"verdict": item.verdict, "title": item.title, "why": item.why, "megatron": value_m,
                         "megatron_source": source_m, "mindformers": value_f, "mindformers_source": source_f,
                         "message": item.message, "fixes": fixes})
        groups.append({"name": section, "rows": rows})
    return render_page("checklist.html.j2", header=header_lines(report), footer=footer_lines(report),
                       summary=summary_line(report), sections=groups, verdict=result.verdict if result else "",
                       figures=figure_views(result) if result is not None else [],
                       schema=result.schema if result is not None else "workbench.checklist/1")


def print_terminal(report: AuditReport, only: set[str] | None = None, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    for line in header_lines(report):
        console.print(line, highlight=False)
    for section, items in sections(report, only):
        table = Table(title=section, title_justify="left", show_lines=False, expand=True)
        table.add_column("Verdict", no_wrap=True, min_width=8)
        for column, ratio in (("Item", 2), ("Megatron", 3), ("MindFormers", 3), ("Finding", 5)):
            table.add_column(column, ratio=ratio, overflow="fold")
        for item in items:
            cells = []
            for (value, source), config in ((side_cell(item.megatron), report.megatron),
                                            (side_cell(item.mindformers), report.mindformers)):
                cell = Text(value)
                if source:  # the file is named in the header: keep only its line numbers here
                    cell.append("\n" + source.replace(f"({config.path.name}:", "(line "), style="dim")
                cells.append(cell)
            finding = Text(item.message)
            fix = fix_text(item)
            if fix:
                finding.append("\nfix: " + fix, style="italic")
            table.add_row(Text(item.verdict, style=VERDICT_STYLE[item.verdict]), item.title, *cells, finding)
        console.print(table)
    for line in footer_lines(report):
        console.print(line, highlight=False, style="dim")
    console.print(f"Summary: {summary_line(report)}", highlight=False)
