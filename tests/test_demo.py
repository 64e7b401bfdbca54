"""`workbench demo` without running it: its refusals, the fault catalog's stages and the shipped pair. The clean
demo itself, end to end through the CLI (every stage passes on real torch and MindSpore reference models, the
report renders in Chromium), runs in the demo tier with the planted faults (tests/demo_tier,
./scripts/test-demo.sh), as ./scripts/demo.sh does: two minutes of the default suite were that one run."""
from __future__ import annotations

from pathlib import Path

from workbench.align.stages import load_stages
from workbench.cli.main import main
from workbench.demo.catalog import load_faults


def test_a_folder_the_demo_did_not_write_is_never_replaced(tmp_path, capsys):
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("precious")
    assert main(["demo", "--out", str(keep), "--force"]) == 2
    assert "not a folder an earlier `workbench demo` wrote" in capsys.readouterr().err
    assert (keep / "notes.txt").read_text() == "precious"
    assert main(["demo", "--out", str(keep)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_list_faults_and_an_unknown_fault(capsys):
    assert main(["demo", "--list-faults"]) == 0
    listed = capsys.readouterr().out
    for name in load_faults():
        assert name in listed
    assert main(["demo", "--fault", "no_such_fault"]) == 2
    assert "unknown fault 'no_such_fault'" in capsys.readouterr().err


def test_every_fault_names_a_stage_of_the_method():
    stages = set(load_stages().ids)
    assert {fault.stage for fault in load_faults().values()} <= stages


def test_the_demo_pair_is_the_demo_model_on_both_sides():
    """The shipped pair and datasets/demo_model.yaml (the model the faults were measured on) cannot drift apart."""
    from workbench.demo.run import PAIR
    from workbench.reference.from_canonical import configs_from_file
    from workbench.reference.run_config import load_run_config

    root = Path(__file__).resolve().parents[1]
    model, _ = load_run_config(root / "datasets" / "demo_model.yaml")
    for name, side in zip(PAIR, ("megatron", "mindformers"), strict=True):
        assert configs_from_file(root / "checklists" / "examples" / name, side)[0] == model
