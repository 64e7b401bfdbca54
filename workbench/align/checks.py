"""One check per stage of the method: the library function behind the stage's command, on the plan's
artifacts, giving the stage's results and, when it fails, the component it names.

    check = run_check("weights", plan)      # StageCheck(results=[Result], failed=..., culprit="output_layer.weight")

Each check calls exactly what its command calls (``workbench weights diff`` -> ``diff_checkpoints``), with the
command's defaults, so a stage's verdict is the command's verdict and ``check`` in datasets/align_stages.yaml
reruns it by hand.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..report.result import Result
from .plan import Plan


@dataclass
class StageCheck:
    results: list[Result]
    failed: bool
    culprit: str | None = None                  # the component the failure names (None: none named)
    evidence: list[str] = field(default_factory=list)   # the lines a reader needs first


def _outcome(results: list[Result], culprit: Callable[[], str | None] = lambda: None) -> StageCheck:
    failed = any(result.exit_code != 0 for result in results)
    evidence = [f"{result.title}: {result.verdict}" + (f" — {result.summary[0]}" if result.summary else "")
                for result in results]
    return StageCheck(results, failed, culprit() if failed else None, evidence)


def check_checklist(plan: Plan) -> StageCheck:
    """MISMATCH items fail the stage unless the plan lists them as differences left on purpose."""
    from ..audit.engine import run_checklist
    from ..report.checklist_result import checklist_result

    report = run_checklist(plan.artifacts["megatron_config"], plan.artifacts["mindformers_config"])
    planned = {difference["item"] for difference in plan.differences}
    result = checklist_result(report, None, False, with_table=True)
    wrong = [item for item in report.items if item.verdict == "MISMATCH" and item.id not in planned]
    check = StageCheck([result], bool(wrong), ", ".join(item.id for item in wrong[:5]) or None)
    check.evidence = [f"{item.id}: {item.message}" for item in wrong[:5]] or [
        f"{result.verdict}: " + ", ".join(f"{count} {verdict}" for verdict, count in report.counts().items() if count)]
    if planned:
        check.evidence.append(f"left different on purpose (plan.yaml): {', '.join(sorted(planned))}")
    return check


def check_weights(plan: Plan) -> StageCheck:
    from ..convert.diff import Tolerance, diff_checkpoints
    from ..convert.diff_result import weights_diff_result

    a, b = plan.artifacts["megatron_checkpoint"], plan.artifacts["mindformers_checkpoint"]
    config = plan.artifacts["megatron_config"] if plan.present("megatron_config") else None
    frame = diff_checkpoints(a, b, config=config, tolerance=Tolerance())
    result = weights_diff_result(frame, a, b, Tolerance())
    return _outcome([result], lambda: _first_value(result.main_table, "status", "match", "name"))


def check_data(plan: Plan) -> StageCheck:
    from ..replay.data_results import diff_result, verify_result
    from ..replay.diff_data import diff_stores
    from ..replay.verify import verify_store

    a, b = plan.artifacts["megatron_batches"], plan.artifacts["mindformers_batches"]
    results = [verify_result(verify_store(a), False), verify_result(verify_store(b), False)]
    diff = diff_stores(a, b)
    results.append(diff_result(diff, a, b, 20))
    return _outcome(results, lambda: _data_culprit(results[-1]))


def check_step1_loss(plan: Plan) -> StageCheck:
    return _outcome([_loss(plan, "megatron_step_log", "mindformers_step_log", steps=1)])


def check_step1_localnorm(plan: Plan) -> StageCheck:
    from ..logs import read_log
    from ..logs.localnorm_compare import compare_local_norms

    from ..logs.localnorm_compare import NormThresholds

    result = compare_local_norms(read_log(plan.artifacts["megatron_step_log"]),
                                 read_log(plan.artifacts["mindformers_step_log"]), steps=[1],
                                 thresholds=NormThresholds(**plan.thresholds.get("localnorm", {})))
    return _outcome([result], lambda: _first_value(result.main_table, "status", "pass", "label", "outlier"))


def check_step2_optimizer(plan: Plan) -> StageCheck:
    """The step-2 loss; the configuration applied to the reference's gradients (optim-check); and, when the plan has
    the MindSpore run's own update from those gradients (``mindformers_injected``), that update explained."""
    from dataclasses import replace

    from ..grads.optim_check import CheckOptions
    from ..grads.optim_result import optim_check

    loss = _loss(plan, "megatron_step_log", "mindformers_step_log", only_step=2)
    options = CheckOptions(megatron=plan.artifacts.get("megatron_config") if plan.present("megatron_config") else None,
                           **plan.thresholds.get("optim_check", {}))
    configured = optim_check(plan.artifacts["grads"], plan.artifacts["mindformers_config"], options)
    results = [loss, configured]
    if plan.present("mindformers_injected"):
        results.append(optim_check(plan.artifacts["grads"], plan.artifacts["mindformers_config"],
                                   replace(options, observed=plan.artifacts["mindformers_injected"])))
    check = _outcome(results, lambda: _optimizer_culprit(results[1:]))
    moved = _step2_norms_moved(plan)
    if moved and not check.failed:       # the configuration reproduces the update, the MindSpore run does not
        check.failed = True
        check.culprit = "optimizer: the MindSpore update departs from its configured optimizer (" + moved + ")"
        check.evidence.insert(0, "step-2 local norms: " + moved)
    return check


def check_lr0_long(plan: Plan) -> StageCheck:
    results = [_loss(plan, "megatron_lr0_log", "mindformers_lr0_log"),
               _loss(plan, "megatron_lr0_log", "mindformers_lr0_log", metric="grad_norm")]
    return _outcome(results)


def check_noise(plan: Plan) -> StageCheck:
    return _outcome([_loss(plan, "megatron_long_log", "megatron_rerun_log")], lambda: "the reference's determinism")


def check_long(plan: Plan) -> StageCheck:
    loss = _loss(plan, "megatron_long_log", "mindformers_long_log", baselines=("megatron_rerun_log",))
    lr = _loss(plan, "megatron_long_log", "mindformers_long_log", metric="lr")
    check = _outcome([loss])
    check.results.append(lr)
    check.evidence.append(f"{lr.title}: {lr.verdict}")
    if check.failed:
        check.culprit = "learning-rate schedule" if lr.exit_code else None
    return check


def check_dumps(plan: Plan) -> StageCheck:
    from ..dumps.compare_run import compare_dumps

    result = compare_dumps(plan.artifacts["megatron_dump"], plan.artifacts["mindformers_dump"])
    return _outcome([result], lambda: _dump_culprit(result))


CHECKS: dict[str, Callable[[Plan], StageCheck]] = {
    "checklist": check_checklist, "weights": check_weights, "data": check_data, "step1_loss": check_step1_loss,
    "step1_localnorm": check_step1_localnorm, "step2_optimizer": check_step2_optimizer,
    "lr0_long": check_lr0_long, "noise": check_noise, "long": check_long, "dumps": check_dumps}


def run_check(stage_id: str, plan: Plan) -> StageCheck:
    return CHECKS[stage_id](plan)


# ------------------------------------------------------------------ helpers --------------------------------

def _loss(plan: Plan, reference: str, candidate: str, steps: int | None = None, metric: str = "loss",
          baselines: tuple[str, ...] = (), only_step: int | None = None) -> Result:
    """``workbench loss`` on two logs of the plan; ``steps``: the first N steps; ``only_step``: that step alone,
    judged by the step-1 bar (after an update from identical gradients, step 2 must agree as step 1 does)."""
    from ..logs import read_log
    from ..logs.loss_compare import compare_loss, keep_first_steps

    from dataclasses import replace

    from ..logs.loss_compare import LossThresholds

    series = [read_log(plan.artifacts[name]) for name in (reference, candidate, *baselines)]
    if steps is not None:
        series = [keep_first_steps(one, steps) for one in series]
    if only_step is not None:
        series = [replace(one, series=one.series[one.series["step"] == only_step]) for one in series]
    chosen = plan.thresholds.get("loss", {}) if metric == "loss" else {}   # other metrics: printed to fewer digits
    return compare_loss(series[0], series[1], series[2:], metric, LossThresholds(**chosen))


def _first_value(table, status_column: str, passing: str, name_column: str, wanted: str | None = None) -> str | None:
    if table is None or not len(table) or status_column not in table:
        return None
    rows = table[table[status_column] == wanted] if wanted else table[table[status_column] != passing]
    return str(rows[name_column].iloc[0]) if len(rows) else None


def _data_culprit(result: Result) -> str | None:
    first = result.summary[0] if result.summary else ""
    return "the replayed batches, " + first if first.startswith("first difference") else "the captured batches"


def _optimizer_culprit(checks: list[Result]) -> str | None:
    """The first cause an optimizer check diagnoses: the configuration's against the reference's update, then the
    MindSpore run's own update against its configuration; else the optimizer's code (step 1 agreed, so the
    gradients were the same, and the configuration reproduces the reference's update)."""
    for result in checks:
        causes = result.tables.get("diagnosis")
        if causes is not None and len(causes):
            diagnosed = causes[causes["status"] == "diagnosis"]
            if len(diagnosed):
                return "optimizer: " + "; ".join(diagnosed["claim"].astype(str))
    if any(result.exit_code for result in checks):
        return ("optimizer: the MindSpore run's update departs from its configuration (no single cause fits)"
                if checks[-1].exit_code and checks[-1].facts.get("observed") else "optimizer")
    return ("optimizer: the MindSpore update departs from its configured optimizer (the step-2 loss differs while "
            "the configuration, applied to the reference's gradients, reproduces the reference's update)")


def _step2_norms_moved(plan: Plan) -> str | None:
    """After one update from identical gradients the step-2 local norms agree as step 1's do: a median relative
    difference above the local-norm floor means every parameter was updated differently. The reason, or None."""
    from ..errors import InputError
    from ..logs import read_log
    from ..logs.localnorm_compare import NormThresholds, compare_local_norms

    floor = NormThresholds(**plan.thresholds.get("localnorm", {})).floor
    try:
        norms = compare_local_norms(read_log(plan.artifacts["megatron_step_log"]),
                                    read_log(plan.artifacts["mindformers_step_log"]), steps=[2],
                                    thresholds=NormThresholds(**plan.thresholds.get("localnorm", {})))
    except InputError:                    # no step-2 local norms in the logs: the loss and optim-check decide
        return None
    table = norms.main_table
    median = float(table["relative_difference"].median()) if len(table) else 0.0
    if not median > floor:
        return None
    return (f"median relative difference {median:.3g} above the floor {floor:g}; largest in "
            f"{table['label'].iloc[0]}")


def _dump_culprit(result: Result) -> str | None:
    first = (result.facts or {}).get("first_divergence")
    if not first:
        return result.summary[1] if len(result.summary) > 1 else None
    if isinstance(first, dict):
        module = first.get("logical_module") or first.get("module_a") or ""
        call = first.get("call_a") or ""
        other = first.get("call_b") or ""
        return f"{module}: {call} / {other}" if module else f"{call} / {other}"
    return str(first)
