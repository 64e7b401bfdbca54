"""The CheckList audit as a :class:`Result`, so ``workbench checklist`` goes through ``emit``
like every other command: the JSON keeps its own stable schema (docs/checklist-json.md), the
terminal keeps its per-section rich table, markdown and HTML come from the same rows, and the
LR schedules figure (when both schedules could be simulated) is embedded in the HTML."""
from __future__ import annotations

from ..audit.engine import AuditReport
from ..audit.fixes import fix_line
from ..config.canonical import is_critical
from .checklist_data import report_to_dict, sections, side_cell, summary_line
from .result import Figure, Result

ITEM_COLUMNS = ("section", "verdict", "item", "megatron", "megatron_source", "mindformers",
                "mindformers_source", "finding", "fix", "why")


def header_lines(report: AuditReport) -> list[str]:
    lines = [f"Megatron:    {report.megatron.path} ({report.megatron.form})",
             f"MindFormers: {report.mindformers.path} ({report.mindformers.form})",
             f"Hardware:    {report.hardware} ({report.hardware_source})"]
    return lines + [f"Critical:    {text}" for text in report.critical()]


def footer_lines(report: AuditReport) -> list[str]:
    """The notes that cannot change a verdict (the critical ones are in the header), and the arguments
    the CheckList did not read."""
    lines = [f"Note (Megatron): {note}" for note in report.megatron.notes if not is_critical(note)]
    lines += [f"Note (MindFormers): {note}" for note in report.mindformers.notes if not is_critical(note)]
    if report.megatron.not_interpreted:
        lines.append("Not interpreted (Megatron): " + " ".join(
            "--" + name.replace("_", "-") for name in report.megatron.not_interpreted))
    return lines


def fix_text(item, separator: str = "; ") -> str:
    """The fix per side (``Megatron: ...; MindFormers: ...``), only where the item did not pass."""
    return fix_line(item.fix, separator) if item.verdict != "PASS" else ""


def item_rows(report: AuditReport, only: set[str] | None = None):
    """One row per shown item, in CheckList order (a DataFrame)."""
    import pandas as pd

    rows = []
    for section, items in sections(report, only):
        for item in items:
            (value_m, source_m), (value_f, source_f) = side_cell(item.megatron), side_cell(item.mindformers)
            rows.append((section, item.verdict, item.title, value_m, source_m, value_f, source_f,
                         item.message, fix_text(item), item.why))
    return pd.DataFrame(rows, columns=list(ITEM_COLUMNS))


def lr_figure(report: AuditReport) -> Figure | None:
    """Both LR schedules and their difference, when the audit could simulate them."""
    item = next((i for i in report.items if i.id == "lr_schedule"), None)
    comparison = item.details.get("comparison") if item is not None else None
    if comparison is None:
        return None
    from ..audit.lr_figure import schedules_figure

    names = (report.megatron.path.name, report.mindformers.path.name)
    return Figure("lr_schedule", "Learning-rate schedules",
                  lambda: schedules_figure(comparison, *names, marks=schedule_marks(report)))


def schedule_marks(report: AuditReport):
    """Each side's warmup end and decay end (update numbers), and the assumed MindFormers run length."""
    from ..audit.lr_figure import ScheduleMarks

    marks = ScheduleMarks()
    for label, config in (("Megatron", report.megatron), ("MindFormers", report.mindformers)):
        warmup = config.value("lr.warmup_steps")
        decay = config.value("lr.decay_steps") or config.value("train.steps")
        if warmup:
            marks.warmup[label] = float(warmup)
        if decay and config.value("lr.decay_style") != "constant":
            marks.decay[label] = float(decay)
    steps = report.mindformers.values.get("train.steps")
    if steps is not None and steps.kind == "assumed":
        marks.assumed = f"MindFormers run length assumed {steps.value:,} updates (lr_schedule.total_steps -1)"
    return marks


def checklist_result(report: AuditReport, only: set[str] | None = None, strict: bool = False,
                     with_table: bool = True, show_all: bool = False) -> Result:
    """The audit as a Result. ``with_table=False`` leaves out the items DataFrame: the terminal,
    markdown, HTML and JSON views render from the report itself, and the checklist's start-up
    stays free of pandas (benchmarks/checklist_startup.py). ``show_all``: the terminal lists the PASS
    items too (folded into a count line otherwise)."""
    figure = lr_figure(report)
    exit_code = report.exit_code(strict)
    result = Result(kind="checklist", title="workbench checklist", verdict=_verdict(report),
                    exit_code=exit_code, summary=[*header_lines(report), f"Summary: {summary_line(report)}"],
                    tables={"items": item_rows(report, only)} if with_table else {}, figures=[figure] if figure else [],
                    sources={"Megatron": str(report.megatron.path), "MindFormers": str(report.mindformers.path)},
                    notes=footer_lines(report), payload=lambda: report_to_dict(report, strict))
    from . import checklist_render as render

    from .checklist_terminal import print_terminal

    result.renderers["md"] = lambda _: render.to_markdown(report, only)
    result.renderers["html"] = lambda res: render.to_html(report, only, res)
    result.printer = lambda console: print_terminal(report, only, console, show_all)
    return result


def _verdict(report: AuditReport) -> str:
    """The worst verdict that decides the exit code (RISK counts as failure under --strict)."""
    counts = report.counts()
    return "MISMATCH" if counts.get("MISMATCH") else "RISK" if counts.get("RISK") else "PASS"
