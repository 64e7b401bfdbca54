"""Each fault of the catalog (datasets/demo_faults.yaml), planted by `workbench demo --fault NAME`, fails
exactly the stage the catalog names, every stage before it passes, and the report names the component
(the fault's `report:` pattern over the report's component)."""
from __future__ import annotations

import json
import re

import pytest

from workbench.align.stages import load_stages
from workbench.cli.main import main
from workbench.demo.catalog import load_faults

FAULTS = list(load_faults().values())


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.name for fault in FAULTS])
def test_the_report_names_the_stage_and_the_component(fault, tmp_path):
    out = tmp_path / fault.name
    stage = next(stage for stage in load_stages().stages if stage.id == fault.stage)
    dumps = [] if fault.stage == "dumps" or "dumps" in stage.explained_by else ["--no-dumps"]   # not read otherwise
    assert main(["demo", "--out", str(out), "--fault", fault.name, "--long-steps", "24", *dumps]) == 1
    report = json.loads((out / "report.json").read_text())
    facts = report["facts"]
    assert facts["first_failure"] == fault.stage, [(s["stage"], s["verdict"], s["evidence"][:1])
                                                    for s in facts["stages"]]
    ids = list(load_stages().ids)
    before = {stage["stage"]: stage["verdict"] for stage in facts["stages"][:ids.index(fault.stage)]}
    assert set(before.values()) <= {"PASS"}, before
    assert facts["component"] and re.search(fault.report, facts["component"]), facts["component"]
