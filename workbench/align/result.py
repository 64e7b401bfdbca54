"""The align report as one :class:`~workbench.report.result.Result` (schema ``workbench.align/1``).

Tables: ``stages`` (one row per stage: verdict, the component it names, its first evidence line, the
command that reruns it), then each stage's evidence as the top rows of its results' main tables. Figures:
every stage's figures, titled with the stage. HTML: one section per stage, in the method's order
(``align.html.j2``), figures embedded; markdown and JSON through the shared renderers.
"""
from __future__ import annotations

from pathlib import Path

from ..report.result import Figure, Result
from .plan import Plan
from .report import ERROR, FAIL, NOT_RUN, PASS, StageOutcome, first_failure, next_action

EVIDENCE_ROWS = 10
STAGE_COLUMNS = ("stage", "title", "verdict", "component", "evidence", "command")


def align_result(plan: Plan, outcomes: list[StageOutcome]) -> Result:
    import pandas as pd

    failed = first_failure(outcomes)
    verdict = _verdict(outcomes, failed)
    summary = [_headline(verdict, failed), "next: " + next_action(outcomes, plan)]
    stages = pd.DataFrame([_stage_row(o, plan) for o in outcomes], columns=list(STAGE_COLUMNS))
    tables = {"stages": stages}
    figures = []
    for outcome in outcomes:
        for result in outcome.check.results if outcome.check else []:
            name, frame = next(iter(result.tables.items()), (None, None))
            if frame is not None and len(frame):
                tables[f"{outcome.stage.id}: {result.kind} {name}"] = frame.head(EVIDENCE_ROWS)
            figures += [_stage_figure(outcome.stage.id, figure) for figure in result.figures]
    result = Result(kind="align", title=f"Alignment report: {plan.path.parent.name or plan.path.name}",
                    verdict=verdict, exit_code=0 if verdict == PASS else 1, summary=summary, tables=tables,
                    figures=figures, sources={**plan.inputs, "plan": str(plan.path)},
                    facts={"first_failure": failed.stage.id if failed else None,
                           "component": failed.culprit if failed else None,
                           "stages": [_stage_facts(o) for o in outcomes]},
                    notes=[f"left different on purpose: {d['item']} ({d['why']})" for d in plan.differences],
                    terminal_columns={"stages": ("stage", "verdict", "component", "evidence"),
                                      **{name: () for name in tables if name != "stages"}})
    result.renderers["html"] = lambda r: _html(r, outcomes, plan)
    return result


def _verdict(outcomes: list[StageOutcome], failed: StageOutcome | None) -> str:
    if failed is not None:
        return FAIL
    return PASS if all(o.verdict == PASS for o in outcomes) else "INCOMPLETE"


def _headline(verdict: str, failed: StageOutcome | None) -> str:
    if failed is None:
        return ("every stage passed" if verdict == PASS else
                "no stage failed, but some did not run (their artifacts are missing)")
    where = f"first failure: stage {failed.stage.id} ({failed.stage.title})"
    return where + (f"; component: {failed.culprit}" if failed.culprit else "") + \
        (f"; {failed.reason}" if failed.verdict == ERROR else "")


def _stage_row(outcome: StageOutcome, plan: Plan) -> dict:
    evidence = outcome.check.evidence[0] if outcome.check and outcome.check.evidence else outcome.reason
    if outcome.evidence_for:
        evidence = f"(evidence for {outcome.evidence_for}) {evidence}"
    return {"stage": outcome.stage.id, "title": outcome.stage.title, "verdict": outcome.verdict,
            "component": outcome.culprit or "", "evidence": evidence, "command": _command(outcome, plan)}


def _command(outcome: StageOutcome, plan: Plan) -> str:
    """The stage's rerun command on this plan (optional parts only for the artifacts that exist)."""
    paths = {name: plan.relative(name) for name in plan.artifacts}
    return outcome.stage.command(paths, present={name for name in plan.artifacts if plan.present(name)})


def _stage_facts(outcome: StageOutcome) -> dict:
    return {"stage": outcome.stage.id, "verdict": outcome.verdict, "component": outcome.culprit,
            "reason": outcome.reason or None, "evidence_for": outcome.evidence_for,
            "evidence": outcome.check.evidence if outcome.check else [],
            "results": [{"kind": r.kind, "verdict": r.verdict, "summary": r.summary}
                        for r in (outcome.check.results if outcome.check else [])]}


def _stage_figure(stage_id: str, figure: Figure) -> Figure:
    return Figure(f"{stage_id}-{figure.name}", f"{stage_id}: {figure.title}", figure.draw)


def _html(result: Result, outcomes: list[StageOutcome], plan: Plan) -> str:
    from ..report.html import figure_views, render_page, table_view

    figures = figure_views(result)
    sections = []
    for outcome in outcomes:
        prefix = f"{outcome.stage.id}: "
        sections.append({
            "outcome": outcome, "command": _command(outcome, plan),
            "evidence": outcome.check.evidence if outcome.check else [],
            "figures": [f for f in figures if f["title"].startswith(prefix)],
            "tables": [table_view(name[len(prefix):], frame) for name, frame in result.tables.items()
                       if name.startswith(prefix)]})
    return render_page("align.html.j2", result=result, sections=sections, stages=result.tables["stages"],
                       plan_name=Path(plan.path).name, not_run=NOT_RUN, fail=FAIL)
