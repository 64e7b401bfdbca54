"""The CheckList on the terminal, as a user reads it: what failed first, readable at 80 columns.

Layout: the two inputs with their one-letter aliases (M, F) declared once, the summary, the critical
notes, then one block per item that did not pass, worst verdict first (MISMATCH, RISK, UNKNOWN, MANUAL,
INFO); the PASS items are folded into one count line unless ``--all``. Each block::

    MISMATCH Sequence length · Network structure
      M 32768  --seq-length (M:52)
      F 4096  model.model_config.seq_length (F:152)
      Megatron 32768 vs MindFormers 4096
      fix: MindFormers: set model.model_config.seq_length: 32768

Lines are wrapped at the console width at spaces; an item's title is never split (titles are short,
a verdict and a title fit any width of 60 and more). Provenance names the files by their alias.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

from ..audit.engine import AuditReport, ItemResult
from ..audit.fixes import fix_line
from ..audit.rules import PASS, VERDICTS
from .checklist_data import side_cell, summary_line

VERDICT_STYLE = {"MISMATCH": "bold red", "RISK": "yellow", "UNKNOWN": "magenta", "MANUAL": "cyan", "INFO": "blue",
                 "PASS": "green"}
ALIASES = (("M", "Megatron"), ("F", "MindFormers"))
INDENT = "  "


def ordered_items(report: AuditReport, only: set[str] | None, show_all: bool) -> tuple[list[ItemResult], int]:
    """The items to show, worst verdict first (CheckList order within a verdict), and the folded PASS count."""
    shown = [item for item in report.items if only is None or item.verdict in only]
    folded = 0
    if only is None and not show_all:
        folded = sum(item.verdict == PASS for item in shown)
        shown = [item for item in shown if item.verdict != PASS]
    rank = {verdict: index for index, verdict in enumerate(VERDICTS)}
    return sorted(shown, key=lambda item: rank[item.verdict]), folded


def alias_sources(text: str, report: AuditReport) -> str:
    """File names in provenance replaced by their alias: ``--lr (pretrain.sh:47)`` -> ``--lr (M:47)``."""
    names = [report.megatron.path.name, report.mindformers.path.name]
    if names[0] == names[1]:
        return text
    for (alias, _), name in zip(ALIASES, names, strict=True):
        text = text.replace(f"{name}:", f"{alias}:").replace(f"({name})", f"({alias})")
    return text


def _shown_path(path) -> str:
    relative = os.path.relpath(path) if os.path.isabs(path) else str(path)
    return relative if len(relative) < len(str(path)) else str(path)


def _wrap(text: str, width: int, first: str = INDENT, rest: str | None = None) -> list[str]:
    rest = rest if rest is not None else first + INDENT
    return textwrap.wrap(text, width=max(width, 40), initial_indent=first, subsequent_indent=rest,
                         break_long_words=True, break_on_hyphens=False) or [first.rstrip()]


def header_block(report: AuditReport, width: int) -> list[tuple[str, str]]:
    lines = []
    for (alias, label), config in zip(ALIASES, (report.megatron, report.mindformers), strict=True):
        shown = Path(_shown_path(config.path))
        lines += [(line, "") for line in _wrap(f"{alias} = {label} ({config.form}): {shown.name}", width, "", "    ")]
        if str(shown.parent) not in ("", "."):
            lines += [(line, "dim") for line in _wrap(f"in {shown.parent}", width, "    ", "      ")]
    lines += [(line, "") for line in _wrap(f"Hardware: {report.hardware} ({report.hardware_source})", width, "", "    ")]
    lines += [(line, "bold") for line in _wrap(f"Summary: {summary_line(report)}", width, "", "    ")]
    critical = report.critical()
    if critical:
        lines.append(("Critical (check these first):", "bold red"))
        for note in critical:
            lines += [(line, "red") for line in _wrap(alias_sources(note, report), width, "  - ", "    ")]
    return lines


def item_block(item: ItemResult, report: AuditReport, width: int) -> list[tuple[str, str]]:
    head = f"{item.verdict:<8} {item.title}"
    if len(head) + 3 + len(item.section) <= width:
        head += f" · {item.section}"
    lines = [(head, VERDICT_STYLE[item.verdict])]
    for (alias, _), values in zip(ALIASES, (item.megatron, item.mindformers), strict=True):
        if all(not v.known and v.settle.startswith("not available in") for v in values):
            continue                               # a key only the other framework has
        value, source = side_cell(values)
        if value or source:
            text = f"{alias} {value}" + (f"  {alias_sources(source, report)}" if source else "")
            lines += [(line, "dim" if not value else "") for line in _wrap(text, width, INDENT, INDENT + "    ")]
    lines += [(line, "") for line in _wrap(alias_sources(item.message, report), width)]
    fix = fix_line(item.fix)
    if fix:
        lines += [(line, "italic") for line in _wrap("fix: " + fix, width, INDENT, INDENT + "     ")]
    return lines


def footer_block(report: AuditReport, width: int) -> list[tuple[str, str]]:
    from .checklist_result import footer_lines

    return [(line, "dim") for text in footer_lines(report) for line in _wrap(alias_sources(text, report), width, "", "  ")]


def print_terminal(report: AuditReport, only: set[str] | None = None, console=None, show_all: bool = False) -> None:
    from rich.console import Console
    from rich.text import Text

    console = console or Console()
    width = console.width
    lines = header_block(report, width)
    items, folded = ordered_items(report, only, show_all)
    for item in items:
        lines += [("", "")] + item_block(item, report, width)
    if folded:
        lines += [("", ""), (f"{folded} PASS (--all shows them)", VERDICT_STYLE[PASS])]
    footer = footer_block(report, width)
    lines += [("", "")] + footer if footer else []
    for text, style in lines:
        console.print(Text(text, style=style), soft_wrap=True, highlight=False)
