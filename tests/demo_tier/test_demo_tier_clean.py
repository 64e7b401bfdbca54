"""The clean `workbench demo`, end to end through the CLI: every stage of the method runs on real torch and
MindSpore reference models (msprobe dumps included where msprobe is installed) and passes; the report renders
in Chromium; the plan's artifacts are all written; the report JSON has its schema. One run shared by the tests
(a minute or more on 2 cores), so it lives in the demo tier beside the planted faults."""
from __future__ import annotations

import json
import os

import pytest

from workbench.align.stages import load_stages
from workbench.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("mindspore")


@pytest.fixture(scope="module")
def clean_demo(tmp_path_factory):
    """Run as the README runs it: a relative --out (the dump workers run in folders of their own, so a
    path left relative named a folder that did not exist there)."""
    parent = tmp_path_factory.mktemp("demo")
    here = os.getcwd()
    os.chdir(parent)
    try:
        code = main(["demo", "--out", "clean", "--long-steps", "12"])
    finally:
        os.chdir(here)
    return parent / "clean", code


def test_the_clean_demo_passes_every_stage(clean_demo, capsys):
    out, code = clean_demo
    assert code == 0
    report = out / "report.html"
    assert report.is_file() and (out / ".workbench-demo").is_file()
    from workbench.align.plan import read_plan
    from workbench.align.report import run_stages

    outcomes = run_stages(read_plan(out / "align"))
    verdicts = {outcome.stage.id: outcome.verdict for outcome in outcomes}
    expected = {stage: "PASS" for stage in load_stages().ids}
    pytest.importorskip("msprobe")
    assert verdicts == expected


def test_the_demo_report_renders_in_chromium(clean_demo):
    from browser import render

    out, _ = clean_demo
    shown = render(out / "report.html", out.parent / "browser")
    assert shown.console == []
    assert shown.images and set(shown.images) == {"ok"}
    for stage in load_stages().ids:
        assert f'id="stage-{stage}"' in shown.dom
    assert shown.screenshot.stat().st_size > 10_000


def test_the_demo_writes_every_artifact_the_plan_names(clean_demo):
    from workbench.align.plan import read_plan

    out, _ = clean_demo
    plan = read_plan(out / "align")
    missing = [name for name in plan.artifacts if not plan.present(name)]
    pytest.importorskip("msprobe")
    assert missing == []


def test_the_report_json_has_its_schema(clean_demo, tmp_path):
    out, _ = clean_demo
    target = tmp_path / "report.json"
    assert main(["align", "report", str(out / "align"), "--out", str(target)]) in (0, 1)
    document = json.loads(target.read_text())
    assert document["schema"] == "workbench.align/1"
    assert [stage["stage"] for stage in document["facts"]["stages"]] == list(load_stages().ids)
