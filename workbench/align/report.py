"""``workbench align report DIR``: every stage whose artifacts exist, in the method's order, one verdict.

    outcomes = run_stages(read_plan("align/"))     # [StageOutcome(stage, verdict, check, reason), ...]
    result = align_result(plan, outcomes)           # one Result: the chain, the culprit, every stage's evidence

The chain stops at the first stage that fails (or whose artifacts cannot be read), as the method does:
later stages are NOT RUN, except those the failing stage is ``explained_by`` (datasets/align_stages.yaml),
which run as evidence when their artifacts exist, because they name the component (the top local-norm
outlier, the first diverging operator).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import InputError
from .checks import StageCheck, run_check
from .plan import Plan
from .stages import Stage, StageCatalog, load_stages

PASS, FAIL, NOT_RUN, ERROR = "PASS", "FAIL", "NOT RUN", "ERROR"


@dataclass
class StageOutcome:
    stage: Stage
    verdict: str                                  # PASS | FAIL | ERROR | NOT RUN
    check: StageCheck | None = None
    reason: str = ""                              # why NOT RUN / ERROR; or the evidence role
    evidence_for: str | None = None               # ran to explain this failed stage
    missing: list[str] = field(default_factory=list)
    named_by: list[str] = field(default_factory=list)     # the evidence stages' culprits, latest stage first
    own_culprit: str | None = None                        # the stage's own culprit, before evidence was added

    @property
    def culprit(self) -> str | None:
        return self.check.culprit if self.check else None


def run_stages(plan: Plan, catalog: StageCatalog | None = None,
               progress: Callable[[str], None] | None = None) -> list[StageOutcome]:
    catalog = catalog or load_stages()
    outcomes: list[StageOutcome] = []
    stopped: StageOutcome | None = None
    for stage in catalog.stages:
        missing = [name for name in stage.needs if not plan.present(name)]
        explains = stopped is not None and stage.id in stopped.stage.explained_by
        if stopped is not None and not explains:
            outcomes.append(StageOutcome(stage, NOT_RUN, reason=f"the chain stopped at {stopped.stage.id}"))
            continue
        if missing:
            outcomes.append(StageOutcome(stage, NOT_RUN, reason="missing: " + ", ".join(
                f"{name} ({plan.relative(name)})" if name in plan.artifacts else f"{name} (not in the plan)"
                for name in missing), missing=missing))
            continue
        if progress:
            progress(stage.id)
        outcome = _run(stage, plan)
        if explains:                   # each evidence stage adds what it names (local norms, then the dumps)
            outcome.evidence_for = stopped.stage.id
            if stopped.check and outcome.culprit:
                _name_first(stopped, outcome)
        elif outcome.verdict in (FAIL, ERROR):
            stopped = outcome
        outcomes.append(outcome)
    return outcomes


def _name_first(failed: StageOutcome, evidence: StageOutcome) -> None:
    """The failed stage's component, the evidence's culprit first: a later stage of the method localizes further
    (local norms name a parameter, the dumps the first diverging operator). The failed stage's own culprit keeps
    its stage's name behind them: "dumps: X; step1_localnorm: Y"."""
    if failed.own_culprit is None:
        failed.own_culprit = failed.check.culprit or ""
    failed.named_by.insert(0, f"{evidence.stage.id}: {evidence.culprit}")
    own = [f"{failed.stage.id}: {failed.own_culprit}"] if failed.own_culprit else []
    failed.check.culprit = "; ".join(failed.named_by + own)


def _run(stage: Stage, plan: Plan) -> StageOutcome:
    try:
        check = run_check(stage.id, plan)
    except InputError as error:          # an artifact that cannot be read: the stage cannot decide
        return StageOutcome(stage, ERROR, reason=str(error))
    return StageOutcome(stage, FAIL if check.failed else PASS, check)


def first_failure(outcomes: list[StageOutcome]) -> StageOutcome | None:
    return next((o for o in outcomes if o.verdict in (FAIL, ERROR) and o.evidence_for is None), None)


def next_action(outcomes: list[StageOutcome], plan: Plan) -> str:
    """What to do now: fix the failing stage, or produce the first stage's missing artifacts."""
    failed = first_failure(outcomes)
    if failed is not None:
        return f"{failed.stage.id}: {failed.stage.next}"
    waiting = next((o for o in outcomes if o.verdict == NOT_RUN and o.missing), None)
    if waiting is None:
        return "every stage passed: the migrated run is aligned with the reference"
    runs = [name for name, run in plan.runs.items() if isinstance(run, dict)
            and set(waiting.missing) & set(run.get("produces", []))]
    how = f" (run {', '.join(runs)} from plan.yaml)" if runs else ""
    return f"{waiting.stage.id}: produce {', '.join(waiting.missing)}{how}, then run `workbench align report` again"
