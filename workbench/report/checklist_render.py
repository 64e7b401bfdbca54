"""Render the CheckList report: markdown, HTML, JSON, and the rich terminal table."""
from __future__ import annotations

import html
import json

from ..audit.engine import AuditReport
from .checklist_data import report_to_dict, sections, side_cell, summary_line

VERDICT_STYLE = {"MISMATCH": "bold red", "RISK": "yellow", "UNKNOWN": "magenta", "MANUAL": "cyan", "PASS": "green"}
VERDICT_COLOR = {"MISMATCH": "#c62828", "RISK": "#b26a00", "UNKNOWN": "#7b1fa2", "MANUAL": "#00838f", "PASS": "#2e7d32"}


def _header_lines(report: AuditReport) -> list[str]:
    lines = [f"Megatron:    {report.megatron.path} ({report.megatron.form})",
             f"MindFormers: {report.mindformers.path} ({report.mindformers.form})",
             f"Hardware:    {report.hardware} ({report.hardware_source})"]
    lines += [f"Assumed:     {text}" for text in report.assumptions]
    return lines


def _footer_lines(report: AuditReport) -> list[str]:
    lines = [f"Note (Megatron): {note}" for note in report.megatron.notes]
    lines += [f"Note (MindFormers): {note}" for note in report.mindformers.notes]
    if report.megatron.not_interpreted:
        lines.append("Not interpreted (Megatron): " + " ".join(
            "--" + name.replace("_", "-") for name in report.megatron.not_interpreted))
    return lines


def to_json(report: AuditReport, strict: bool = False) -> str:
    return json.dumps(report_to_dict(report, strict), indent=2, default=str) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: AuditReport, only: set[str] | None = None) -> str:
    out = ["# workbench checklist", ""] + [f"- {line}" for line in _header_lines(report)]
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
    out += [f"- {line}" for line in _footer_lines(report)]
    return "\n".join(out) + "\n"


def to_html(report: AuditReport, only: set[str] | None = None) -> str:
    esc = html.escape
    rows = []
    for section, items in sections(report, only):
        rows.append(f"<h2>{esc(section)}</h2><table><tr><th>Verdict</th><th>Item</th><th>Megatron</th>"
                    "<th>MindFormers</th><th>Finding</th><th>Fix</th></tr>")
        for item in items:
            (value_m, source_m), (value_f, source_f) = side_cell(item.megatron), side_cell(item.mindformers)
            fix = "<br>".join(f"{esc(side)}: <code>{esc(text)}</code>" for side, text in item.fix.items()
                              if text and item.verdict != "PASS")
            rows.append(f"<tr><td style='color:{VERDICT_COLOR[item.verdict]};font-weight:bold'>{item.verdict}</td>"
                        f"<td title='{esc(item.why)}'>{esc(item.title)}</td>"
                        f"<td><code>{esc(value_m)}</code><div class=src>{esc(source_m)}</div></td>"
                        f"<td><code>{esc(value_f)}</code><div class=src>{esc(source_f)}</div></td>"
                        f"<td>{esc(item.message)}</td><td>{fix}</td></tr>")
        rows.append("</table>")
    header = "".join(f"<li>{esc(line)}</li>" for line in _header_lines(report))
    footer = "".join(f"<li>{esc(line)}</li>" for line in _footer_lines(report))
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;width:100%}"
             "td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;font-size:13px}"
             ".src{color:#666;font-size:11px}th{background:#f3f3f3}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>workbench checklist</title>"
            f"<style>{style}</style></head><body><h1>workbench checklist</h1><ul>{header}</ul>"
            f"<p><b>Summary:</b> {esc(summary_line(report))}</p>{''.join(rows)}<ul>{footer}</ul></body></html>\n")


def print_terminal(report: AuditReport, only: set[str] | None = None, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    for line in _header_lines(report):
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
            fix = "; ".join(f"{side}: {text}" for side, text in item.fix.items() if text and item.verdict != "PASS")
            if fix:
                finding.append("\nfix: " + fix, style="italic")
            table.add_row(Text(item.verdict, style=VERDICT_STYLE[item.verdict]), item.title, *cells, finding)
        console.print(table)
    for line in _footer_lines(report):
        console.print(line, highlight=False, style="dim")
    console.print(f"Summary: {summary_line(report)}", highlight=False)
