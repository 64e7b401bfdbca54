"""`workbench compare` on REAL msprobe dumps of the torch and the MindSpore reference models (tests/dump_pairs.py:
identical converted weights, the same tokens, mindstudio-probe 26.2.0): the clean pair names no divergence,
and each planted MindSpore fault is named at its operator and layer; a MindSpore graph-mode tensor dump
against the torch dump."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("msprobe", reason="real msprobe dumps need mindstudio-probe (the msprobe extra)")
pytest.importorskip("mindspore", reason="the MindSpore reference model is dumped")

import dump_pairs  # noqa: E402

from workbench.cli.main import main  # noqa: E402


@pytest.fixture(scope="session")
def pairs(tmp_path_factory):
    return dump_pairs.msprobe_pairs(dump_pairs.session_folder(tmp_path_factory))


def compare(pair, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "compare.json"
    code = main(["compare", str(pair.torch), str(pair.mindspore), "--out", str(out), "--force", *extra])
    return code, json.loads(out.read_text())


def forward(rows: list[dict], side: str) -> list[dict]:
    return [row for row in rows if row.get("pass") == "forward" and row.get("side", side) == side]


def test_clean_pair_names_nothing_and_makes_no_dtype_error(pairs, tmp_path):
    code, report = compare(pairs["clean"], tmp_path)
    assert (code, report["verdict"]) == (0, "PASS"), report["summary"]
    assert report["facts"]["first_divergence"] is None
    pairs_table = report["tables"]["pairs"]
    assert not [r for r in pairs_table if r["status"] == "error" and "dtype" in (r.get("note") or "")]
    assert all(r["a_dtype"] == r["b_dtype"] for r in pairs_table          # Float32 == torch.float32, normalised
               if not r["a_dtype"].startswith("int"))
    ids = [r for r in pairs_table if r["a_dtype"] != r["b_dtype"]]         # token ids: torch int64, MindSpore int32
    assert all(r["logical_module"] == "embed" and r["io"] == "input" and r["status"] == "pass" for r in ids), ids
    assert report["facts"]["module_formats"]["A"][1] == "megatron"
    assert report["facts"]["module_formats"]["B"][1] == "mindformers"


def comparable_unmatched(report: dict) -> list[dict]:
    """Forward rows of the torch side left unmatched although a counterpart could exist: not an argument the
    other side does not take ("has no input"), not covered at module level (inside a fused module), and not
    an operator whose class (converters/operators.yaml) the other side never runs in that layer (torch's
    masked_fill against an additive mask, pow against square, the rotary table MindSpore builds at init)."""
    from workbench.dumps.match_ops import load_operators

    ops = load_operators()
    rows_b = [r for r in report["tables"]["pairs"]] + report["tables"]["unmatched"]
    classes_b = {(r.get("layer"), ops.op_class(str(r.get("op") or ""))) for r in report["tables"]["unmatched"]
                 if r["side"] == "B"}
    classes_b |= {(r.get("layer"), ops.op_class(str(r.get("b_op") or ""))) for r in rows_b if r.get("b_op")}
    found = []
    for row in forward(report["tables"]["unmatched"], "A"):
        reason = row["reason"]
        if "has no input" in reason or "inside a fused module" in reason:
            continue
        if "no equivalent" in reason and (row.get("layer"), ops.op_class(str(row["op"]))) not in classes_b:
            continue
        found.append(row)
    return found


def test_comparable_forward_rows_match_automatically(pairs, tmp_path):
    """At least 95 % of the comparable forward rows pair with no mapping file (the fused linear_qkv against
    wq/wk/wv on combined statistics); every other row is listed with its reason."""
    _, report = compare(pairs["clean"], tmp_path)
    matched = [r for r in report["tables"]["pairs"] if r["pass"] == "forward"]
    missed = comparable_unmatched(report)
    assert len(matched) / (len(matched) + len(missed)) >= 0.95, [(r["name"], r["reason"]) for r in missed][:8]
    assert any(r["relation"] == "fused" for r in report["tables"]["pairs"])
    assert all(r["reason"] for r in report["tables"]["unmatched"])


@pytest.mark.parametrize("fault, layer, words", [
    ("norm_epsilon", 0, ("__add__", "input_layernorm")),
    ("softmax_fp16", 1, ("softmax", "precision: A float32, B float16")),
])
def test_each_planted_fault_is_the_first_divergence(pairs, tmp_path, fault, layer, words):
    code, report = compare(pairs[fault], tmp_path)
    first = report["facts"]["first_divergence"]
    assert code == 1 and report["verdict"] == "DIVERGED" and first is not None
    assert first["layer"] == layer, first
    text = " ".join(str(first.get(k, "")) for k in ("call_a", "call_b", "module_a", "module_b", "note"))
    assert all(word in text for word in words), first


def test_graph_mode_tensor_dump_against_the_torch_dump(tmp_path_factory, tmp_path):
    """A MindSpore graph-mode tensor dump (.npy per op, statistics computed here) is read and compared with the
    torch msprobe tensor dump of the same model and input: operators pair up and nothing is called passed
    that did not pair."""
    pair = dump_pairs.graph_dump_pair(dump_pairs.session_folder(tmp_path_factory))
    code, report = compare(pair, tmp_path)
    assert code in (0, 1) and report["facts"]["matched"] > 0
    assert all(row["reason"] for row in report["tables"]["unmatched"])
