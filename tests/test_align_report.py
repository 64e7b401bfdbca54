"""`workbench align report`: the stage chain on real artifacts (the shipped example configs, logs written
by the reference writers), the plan and stage catalog under hostile input, and the HTML in Chromium."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workbench.align.plan import plan_text, read_plan
from workbench.align.report import run_stages
from workbench.align.result import align_result
from workbench.align.stages import load_stages
from workbench.errors import InputError
from workbench.reference.megatron_log import IterationRecord, format_iteration_line
from workbench.reference.mindformers_log import MindFormersLogWriter

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "checklists" / "examples"
LOSSES = [10.5, 10.1, 9.8, 9.6, 9.3, 9.1]


def megatron_log(path: Path, losses: list[float], lr: float = 1e-4) -> Path:
    lines = [format_iteration_line(IterationRecord(step, len(losses), step * 8, 100.0, lr, 8, loss, grad_norm=1.5))
             for step, loss in enumerate(losses, 1)]
    path.write_text("\n".join(lines) + "\n")
    return path


def mindformers_log(path: Path, losses: list[float], lr: float = 1e-4) -> Path:
    with MindFormersLogWriter(path) as log:
        for step, loss in enumerate(losses, 1):
            log.step(epoch=1, epochs=1, step=step, steps=len(losses), loss=loss, per_step_ms=100.0, lr=lr,
                     global_norm=1.5, global_batch_size=8)
    return path


def write_plan(folder: Path, artifacts: dict[str, str], differences=None) -> Path:
    (folder / "plan.yaml").write_text(plan_text(artifacts, {"megatron": "a.sh", "mindformers": "b.yaml"},
                                                differences))
    return folder


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES / "llama_tiny_megatron.sh", tmp_path / "megatron.sh")
    shutil.copy(EXAMPLES / "llama_tiny_mindformers.yaml", tmp_path / "mindformers.yaml")
    megatron_log(tmp_path / "megatron.log", LOSSES)
    return tmp_path


BASE = {"megatron_config": "megatron.sh", "mindformers_config": "mindformers.yaml",
        "megatron_step_log": "megatron.log", "mindformers_step_log": "mindformers.log",
        "megatron_checkpoint": "ckpt", "mindformers_checkpoint": "ms.ckpt"}


def verdicts(outcomes) -> dict[str, str]:
    return {outcome.stage.id: outcome.verdict for outcome in outcomes}


def test_stages_that_pass_and_missing_artifacts_give_incomplete_with_the_next_stage(workdir):
    plan = read_plan(write_plan(workdir, {**BASE, "mindformers_step_log": "absent.log"}))
    outcomes = run_stages(plan)
    got = verdicts(outcomes)
    assert got["checklist"] == "PASS" and got["step1_loss"] == "NOT RUN"
    assert got["weights"] == "NOT RUN" and "megatron_checkpoint (ckpt)" in outcomes[1].reason
    result = align_result(plan, outcomes)
    assert result.verdict == "INCOMPLETE" and result.exit_code == 1
    assert result.summary[1].startswith("next: weights: produce megatron_checkpoint, mindformers_checkpoint")


def test_the_chain_stops_at_the_first_failure_and_names_it(workdir):
    mindformers_log(workdir / "mindformers.log", [LOSSES[0] * 1.05] + LOSSES[1:])
    plan = read_plan(write_plan(workdir, BASE))
    outcomes = run_stages(plan)
    got = verdicts(outcomes)
    assert got["step1_loss"] == "FAIL"
    later = [stage for stage in load_stages().ids if load_stages().ids.index(stage) > 3]
    explained = set(load_stages().stage("step1_loss").explained_by)
    for stage in later:
        if stage not in explained:
            assert got[stage] == "NOT RUN", stage
            assert "stopped at step1_loss" in next(o for o in outcomes if o.stage.id == stage).reason
    result = align_result(plan, outcomes)
    assert result.verdict == "FAIL" and result.facts["first_failure"] == "step1_loss"
    assert result.summary[0].startswith("first failure: stage step1_loss")
    assert result.summary[1].startswith("next: step1_loss: compare step-1 local norms")


def test_a_mismatch_fails_the_checklist_stage_unless_the_plan_lists_it(workdir):
    text = (workdir / "mindformers.yaml").read_text()
    assert "rms_norm_eps: 1.0e-5" in text or "rms_norm_eps: 1e-5" in text
    (workdir / "mindformers.yaml").write_text(text.replace("rms_norm_eps: 1.0e-5", "rms_norm_eps: 1.0e-6")
                                              .replace("rms_norm_eps: 1e-5", "rms_norm_eps: 1.0e-6"))
    mindformers_log(workdir / "mindformers.log", LOSSES)
    outcomes = run_stages(read_plan(write_plan(workdir, BASE)))
    assert verdicts(outcomes)["checklist"] == "FAIL"
    item = outcomes[0].culprit
    assert item and "eps" in item
    planned = run_stages(read_plan(write_plan(workdir, BASE, [{"item": item, "why": "testing"}])))
    assert verdicts(planned)["checklist"] == "PASS"
    assert any("left different on purpose" in line for line in planned[0].check.evidence)


def test_an_artifact_that_cannot_decide_its_stage_is_an_error_that_stops_the_chain(workdir):
    mindformers_log(workdir / "mindformers.log", LOSSES)        # step 1 agrees; neither log has local norms
    outcomes = run_stages(read_plan(write_plan(workdir, BASE)))
    got = verdicts(outcomes)
    assert got["step1_loss"] == "PASS" and got["step1_localnorm"] == "ERROR"
    assert "no per-parameter local norms" in outcomes[4].reason and "megatron.log" in outcomes[4].reason
    assert got["step2_optimizer"] == "NOT RUN" and "stopped at step1_localnorm" in outcomes[5].reason


def test_the_report_renders_in_chromium_with_every_stage(workdir):
    from browser import render

    from workbench.report.emit import emit

    mindformers_log(workdir / "mindformers.log", [LOSSES[0] * 1.05] + LOSSES[1:])
    plan = read_plan(write_plan(workdir, BASE))
    page = workdir / "report.html"
    emit(align_result(plan, run_stages(plan)), "html", page)
    shown = render(page, workdir / "browser")
    assert shown.console == []
    for stage in load_stages().ids:
        assert f'id="stage-{stage}"' in shown.dom
    assert shown.images and set(shown.images) == {"ok"}          # the step-1 loss figure, embedded
    assert "http://" not in page.read_text().replace("http://www.w3.org", "")


# ------------------------------------------------------------ hostile plans and catalogs --------------------

@pytest.mark.parametrize("text, expected", [
    ("schema: workbench.plan/2\nartifacts: {}\n", "schema: workbench.plan/1"),
    ("schema: workbench.plan/1\nartifacts: [a, b]\n", "mapping of artifact name"),
    ("schema: workbench.plan/1\nartifacts: {bogus: x}\n", "unknown artifact 'bogus'"),
    ("schema: workbench.plan/1\nartifacts: {grads: 5}\n", "expected a path"),
    ("schema: workbench.plan/1\nartifacts: {}\ndifferences: {a: b}\n", "list of {item: ID"),
    ("schema: workbench.plan/1\nartifacts: {}\nextra: 1\n", "unknown keys extra"),
    ("schema: workbench.plan/1\nartifacts: {grads: [\n", "plan.yaml"),
    ("[" * 5000, "plan.yaml"),
])
def test_hostile_plans_are_one_line_errors(tmp_path, text, expected):
    (tmp_path / "plan.yaml").write_text(text)
    with pytest.raises(InputError) as caught:
        read_plan(tmp_path)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_non_utf8_plan_is_named(tmp_path):
    (tmp_path / "plan.yaml").write_bytes(b"schema: \xff\xfe\n")
    with pytest.raises(InputError, match="plan.yaml"):
        read_plan(tmp_path)


@pytest.mark.parametrize("change, expected", [
    (("needs: [megatron_config, mindformers_config]", "needs: [megatron_config, nothing]"), "unknown artifacts nothing"),
    (("explained_by: [dumps]\n", "explained_by: [checklist]\n"), "checklist is not a later stage"),
    (("  - id: weights\n", "  - id: checklist\n"), "stage 'checklist' twice"),
    (("check: workbench weights diff {megatron_checkpoint}", "check: workbench weights diff {grads}"),
     "placeholders grads are not artifacts"),
    (("    title: Same data every step\n", "    title: Same data every step\n    colour: red\n"), "unknown keys colour"),
])
def test_hostile_stage_catalogs_name_file_and_line(tmp_path, change, expected):
    source = (ROOT / "datasets" / "align_stages.yaml").read_text()
    assert change[0] in source
    path = tmp_path / "align_stages.yaml"
    path.write_text(source.replace(change[0], change[1], 1))
    with pytest.raises(InputError) as caught:
        load_stages(path)
    assert expected in str(caught.value) and "align_stages.yaml:" in str(caught.value)


def test_the_evidence_stages_name_the_component_first_latest_stage_first():
    """A failed stage's component leads with what the later stages localize (the dumps' first diverging operator
    before the local-norm outlier); its own culprit follows under its stage's name."""
    from workbench.align.checks import StageCheck
    from workbench.align.report import StageOutcome, _name_first

    stages = load_stages()
    failed = StageOutcome(stages.stage("step1_loss"), "FAIL", StageCheck([], True, "loss of step 1"))
    norms = StageOutcome(stages.stage("step1_localnorm"), "FAIL", StageCheck([], True, "layers.0.attn.[q,k,v]"))
    dumps = StageOutcome(stages.stage("dumps"), "FAIL", StageCheck([], True, "embedding.word_embeddings: gather"))
    _name_first(failed, norms)
    assert failed.culprit == "step1_localnorm: layers.0.attn.[q,k,v]; step1_loss: loss of step 1"
    _name_first(failed, dumps)
    assert failed.culprit == ("dumps: embedding.word_embeddings: gather; step1_localnorm: layers.0.attn.[q,k,v]; "
                              "step1_loss: loss of step 1")
    bare = StageOutcome(stages.stage("step1_localnorm"), "FAIL", StageCheck([], True, None))
    _name_first(bare, dumps)
    assert bare.culprit == "dumps: embedding.word_embeddings: gather"


def test_a_rerun_command_shows_an_optional_part_only_when_its_artifact_exists():
    stage = load_stages().stage("step2_optimizer")
    paths = {name: f"<{name}>" for name in stage.needs + stage.optional}
    without = stage.command(paths, present=set(stage.needs))
    assert without == "workbench optim-check --capture <grads> --mindformers <mindformers_config>"
    both = stage.command(paths, present=set(stage.needs + stage.optional))
    assert both == ("workbench optim-check --capture <grads> --mindformers <mindformers_config> --megatron "
                    "<megatron_config> && workbench optim-check --capture <grads> --mindformers <mindformers_config> "
                    "--observed <mindformers_injected>")
    assert "[" not in stage.command(paths) and "--observed <mindformers_injected>" in stage.command(paths)
