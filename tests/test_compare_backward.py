"""`workbench compare` on REAL msprobe dumps WITH backward rows (forward, loss, backward of one step; the
torch and MindSpore reference models, tests/dump_pairs.py): backward rows are read and paired, the clean pair
still passes, and a planted forward fault is still named at its forward operator (the first divergence in
execution order), not at a backward row."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("msprobe", reason="real msprobe dumps need mindstudio-probe (the msprobe extra)")
pytest.importorskip("mindspore", reason="the MindSpore reference model is dumped")

import dump_pairs  # noqa: E402

from workbench.cli.main import main  # noqa: E402


@pytest.fixture(scope="session")
def backward_pairs(tmp_path_factory):
    return dump_pairs.msprobe_pairs(dump_pairs.session_folder(tmp_path_factory), backward=True,
                                    faults=("norm_epsilon",))


def compare(pair, tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "compare.json"
    code = main(["compare", str(pair.torch), str(pair.mindspore), "--out", str(out), "--force"])
    return code, json.loads(out.read_text())


def test_backward_rows_are_read_and_paired_and_the_clean_pair_passes(backward_pairs, tmp_path):
    code, report = compare(backward_pairs["clean"], tmp_path)
    assert (code, report["verdict"]) == (0, "PASS"), report["summary"]
    pairs = report["tables"]["pairs"]
    backward = [row for row in pairs if row["pass"] == "backward"]
    assert backward, "no backward pair"
    assert all(row["status"] != "error" for row in backward)
    unmatched_backward = [row for row in report["tables"]["unmatched"] if row.get("pass") == "backward"]
    assert all(row["reason"] for row in unmatched_backward)


def test_a_forward_fault_is_named_at_its_forward_operator_with_backward_rows_present(backward_pairs, tmp_path):
    code, report = compare(backward_pairs["norm_epsilon"], tmp_path)
    assert code == 1
    first = report["facts"]["first_divergence"]
    assert first is not None and first.get("pass", "forward") == "forward", first
    assert first.get("layer") == dump_pairs.FAULT_LAYER["norm_epsilon"], first
