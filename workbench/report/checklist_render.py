"""Render the CheckList report: markdown and HTML (Jinja2, the shared page style); the terminal view is
:mod:`workbench.report.checklist_terminal`. The JSON is :func:`workbench.report.checklist_data.report_to_dict`;
the whole report goes out through :func:`workbench.report.emit.emit` (see :mod:`workbench.report.checklist_result`).

Both documents list the items by verdict, worst first (the summary and what failed at the top); the
PASS items come last (folded in a <details> block in HTML), so the documents stay complete.
"""
from __future__ import annotations

from ..audit.engine import AuditReport, ItemResult
from ..audit.fixes import LABEL
from ..audit.rules import VERDICTS
from .checklist_data import side_cell, summary_line
from .checklist_result import footer_lines, header_lines


def verdict_groups(report: AuditReport, only: set[str] | None = None) -> list[tuple[str, list[ItemResult]]]:
    """(verdict, items) in verdict order (MISMATCH first), CheckList order within; empty groups left out."""
    groups = [(verdict, [i for i in report.items if i.verdict == verdict]) for verdict in VERDICTS
              if only is None or verdict in only]
    return [(verdict, items) for verdict, items in groups if items]


def _fixes(item: ItemResult) -> list[tuple[str, str]]:
    return [(LABEL[side], text) for side, text in item.fix.items() if text and item.verdict != "PASS"]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: AuditReport, only: set[str] | None = None) -> str:
    out = ["# workbench checklist", ""] + [f"- {line}" for line in header_lines(report)]
    out += ["", f"**Summary:** {summary_line(report)}", ""]
    for verdict, items in verdict_groups(report, only):
        out += [f"## {verdict} ({len(items)})", "", "| Verdict | Item | Section | Megatron | MindFormers | Finding | Fix |",
                "|---|---|---|---|---|---|---|"]
        for item in items:
            (value_m, source_m), (value_f, source_f) = side_cell(item.megatron), side_cell(item.mindformers)
            fix = "; ".join(f"{side}: `{text}`" for side, text in _fixes(item))
            cells = [f"**{item.verdict}**", item.title, item.section, f"`{value_m}` <br>{source_m}" if value_m else "",
                     f"`{value_f}` <br>{source_f}" if value_f else "", item.message, fix]
            out.append("| " + " | ".join(_md_cell(cell) for cell in cells) + " |")
        out.append("")
    out += [f"- {line}" for line in footer_lines(report)]
    return "\n".join(out) + "\n"


def to_html(report: AuditReport, only: set[str] | None = None, result=None) -> str:
    """One self-contained page (autoescaped template; the LR figure embedded when ``result`` has it)."""
    from .html import figure_views, render_page

    groups = []
    for verdict, items in verdict_groups(report, only):
        rows = []
        for item in items:
            (value_m, source_m), (value_f, source_f) = side_cell(item.megatron), side_cell(item.mindformers)
            rows.append({"verdict": item.verdict, "title": item.title, "section": item.section, "why": item.why,
                         "megatron": value_m, "megatron_source": source_m, "mindformers": value_f,
                         "mindformers_source": source_f, "message": item.message, "fixes": _fixes(item)})
        groups.append({"name": f"{verdict} ({len(items)})", "folded": verdict == "PASS", "rows": rows})
    return render_page("checklist.html.j2", header=header_lines(report), footer=footer_lines(report),
                       summary=summary_line(report), sections=groups, verdict=result.verdict if result else "",
                       figures=figure_views(result) if result is not None else [],
                       schema=result.schema if result is not None else "workbench.checklist/1")
