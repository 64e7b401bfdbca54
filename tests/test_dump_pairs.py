"""Smoke test of tests/dump_pairs.py: the dumps are real (the trees and json that msprobe and MindSpore
write, the same structure as the fixtures' real dumps), the two sides computed the same model on the
same input, and each planted fault changes the dumped statistics from its own layer on, nothing before."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the torch reference model is dumped")
pytest.importorskip("mindspore", reason="the MindSpore reference model is dumped")
pytest.importorskip("msprobe", reason="mindstudio-probe (the msprobe extra) writes the dumps")

import dump_pairs  # noqa: E402
from workbench_testing import fixtures_dir  # noqa: E402

STATS = ("Max", "Min", "Mean", "Norm")


@pytest.fixture(scope="session")
def msprobe_pairs(tmp_path_factory):
    return dump_pairs.msprobe_pairs(dump_pairs.session_folder(tmp_path_factory))


@pytest.fixture(scope="session")
def graph_pair(tmp_path_factory):
    return dump_pairs.graph_dump_pair(dump_pairs.session_folder(tmp_path_factory))


@pytest.fixture(scope="session")
def logits_pair(tmp_path_factory):
    return dump_pairs.logits_pair(dump_pairs.session_folder(tmp_path_factory))


def tree(root: Path) -> set[str]:
    """Relative paths under root, process ids and timestamps generalised, tensor files left out."""
    paths = set()
    for path in root.rglob("*"):
        if path.name == ".complete" or path.suffix in (".npy", ".pt"):
            continue
        paths.add(re.sub(r"proc\d+", "proc*", path.relative_to(root).as_posix()))
    return paths


def fixture_tree(listing: Path) -> set[str]:
    lines = [line.strip().removeprefix("./") for line in listing.read_text().splitlines()]
    return {re.sub(r"proc\d+", "proc*", line) for line in lines if line not in (".", "") and
            not line.endswith((".npy", ".pt"))}


def dump_data(root: Path) -> tuple[dict, dict]:
    """(dump.json, construct.json) of one msprobe dump."""
    path = dump_pairs.dump_json(root)
    return json.loads(path.read_text()), json.loads(path.with_name("construct.json").read_text())


def tensors(entry: dict) -> list[dict]:
    found = []
    for value in (*entry.get("input_args", []), *entry.get("input_kwargs", {}).values(), *entry.get("output", [])):
        items = value if isinstance(value, list) else [value]
        found += [item for item in items if isinstance(item, dict) and "dtype" in item and "shape" in item]
    return found


def statistics(entry: dict) -> list[tuple]:
    return [tuple(tensor.get(key) for key in STATS) for tensor in tensors(entry)]


def layer_of(name: str, construct: dict) -> int | None:
    """The decoder layer a dump row was called in (its own name or its nearest Cell parent's)."""
    while name:
        match = re.match(r"Cell\.model\.layers\.(\d+)\.", name)
        if match:
            return int(match.group(1))
        name = construct.get(name)
    return None


@pytest.mark.parametrize("side", ["torch", "mindspore"])
def test_msprobe_dumps_have_the_trees_and_json_msprobe_writes(msprobe_pairs, side):
    pair = msprobe_pairs["clean"]
    root, framework = (pair.torch, "pytorch") if side == "torch" else (pair.mindspore, "mindspore")
    dump, construct = dump_data(root)
    assert {k: dump[k] for k in ("task", "level", "framework")} == {"task": "statistics", "level": "mix",
                                                                      "framework": framework}
    assert tree(root) == {"step0", "step0/proc*", "step0/proc*/dump.json", "step0/proc*/stack.json",
                          "step0/proc*/construct.json"}
    module = ("Module.decoder.layers.0.self_attention.linear_qkv.Linear.forward.0" if side == "torch" else
              "Cell.model.layers.0.attention.wq.Linear.forward.0")
    assert module in dump["data"] and module in construct
    assert all(set(tensor) >= {"type", "dtype", "shape", *STATS} for entry in dump["data"].values()
               for tensor in tensors(entry))
    fixture = "msprobe_pytorch" if side == "torch" else "msprobe_mindspore"
    expected = fixture_tree(fixtures_dir("dumps", fixture, "out_statistics_mix") / "TREE.txt")
    assert tree(root) == expected
    real = json.loads((fixtures_dir("dumps", fixture, "out_statistics_mix") / "dump.full.json").read_text())
    assert set(real) == set(dump)
    real_keys = {frozenset(tensor) for entry in real["data"].values() for tensor in tensors(entry)}
    assert {frozenset(tensor) for entry in dump["data"].values() for tensor in tensors(entry)} <= real_keys


def test_both_sides_computed_the_same_model_on_the_same_input(msprobe_pairs):
    torch_dump, _ = dump_data(msprobe_pairs["clean"].torch)
    ms_dump, _ = dump_data(msprobe_pairs["clean"].mindspore)
    torch_logits = tensors(torch_dump["data"]["Module.output_layer.Linear.forward.0"])[-1]
    ms_logits = tensors(ms_dump["data"]["Cell.lm_head.Linear.forward.0"])[-1]
    assert torch_logits["shape"] == ms_logits["shape"] == [1, 8, 64]
    for key in STATS:
        assert ms_logits[key] == pytest.approx(torch_logits[key], rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("fault", list(dump_pairs.FAULTS))
def test_a_planted_fault_changes_the_statistics_from_its_layer_on(msprobe_pairs, fault):
    clean, construct = dump_data(msprobe_pairs["clean"].mindspore)
    faulty, _ = dump_data(msprobe_pairs[fault].mindspore)
    assert list(clean["data"]) == list(faulty["data"]), "a planted fault must not change the calls"
    changed = [name for name in clean["data"] if statistics(clean["data"][name]) != statistics(faulty["data"][name])]
    layer = dump_pairs.FAULT_LAYER[fault]
    assert changed, "the planted fault changed no statistic"
    assert layer_of(changed[0], construct) == layer
    names = list(clean["data"])
    first_in_layer = next(i for i, name in enumerate(names) if layer_of(name, construct) == layer)
    assert names.index(changed[0]) >= first_in_layer  # nothing computed before that layer changed
    # the first changed call: the cast to fp16 before the softmax; the add of epsilon in the norm
    op, cell = {"softmax_fp16": ("Functional.cast.", f"Cell.model.layers.{layer}.attention.wo.Linear.forward.0"),
                "norm_epsilon": ("Tensor.__add__.", f"Cell.model.layers.{layer}.attention_norm.RMSNorm.forward.0")}[fault]
    assert changed[0].startswith(op)
    assert [name for name in changed if name.startswith("Cell.")][0] == cell  # the first module it reaches


def test_graph_mode_tensor_dump_has_mindspores_tree(graph_pair):
    root = graph_pair.mindspore
    npys = sorted((root / "rank_0" / "LlamaForCausalLM" / "0" / "0").glob("*.npy"))
    assert len(npys) > 100
    pattern = re.compile(r"^[A-Za-z]+\.[^.]+\.\d+\.\d+\.\d+\.(input|output)\.\d+\.DefaultFormat\.[A-Za-z0-9]+\.npy$")
    assert all(pattern.match(path.name) for path in npys), [p.name for p in npys if not pattern.match(p.name)][:3]
    assert any("attention-Attention" in path.name and path.name.startswith("Softmax.") for path in npys)
    order = (root / "rank_0" / "execution_order" / "ms_execution_order_graph_0.csv").read_text().splitlines()
    assert order[0] == "NodeExecutionOrder-FullNameWithScope" and len(order) > 50
    ours = {re.sub(r"^rank_0/LlamaForCausalLM", "rank_0/NET", p) for p in tree(root)}
    listing = fixtures_dir("dumps", "mindspore_graph_dump") / "TREE_cpu_graph_tensor_dump.txt"
    real = {re.sub(r"^rank_0/Block", "rank_0/NET", p) for p in fixture_tree(listing)}
    assert ours == real - {"rank_0/NET/0/1"}  # the fixture ran two iterations, these dumps one
    torch_tensors = dump_pairs.dump_json(graph_pair.torch).with_name("dump_tensor_data")
    assert any(path.name.startswith("Torch.softmax.0.forward.output.0") for path in torch_tensors.iterdir())
    torch_listing = fixtures_dir("dumps", "msprobe_pytorch", "out_tensor_mix") / "TREE.txt"
    assert tree(graph_pair.torch) == fixture_tree(torch_listing)


def test_graph_mode_dump_of_the_fp16_softmax_fault_holds_an_fp16_softmax_in_that_layer(tmp_path_factory):
    """The layer is found by execution order: after MindSpore's graph passes, ops of layer 1 can carry layer
    0's scope (here both Softmax ops are ``layers-CellList/0-DecoderLayer/...``; op0 and op1 tell them apart)."""
    pair = dump_pairs.graph_dump_pair(dump_pairs.session_folder(tmp_path_factory), "softmax_fp16")
    rank = pair.mindspore / "rank_0"
    order = (rank / "execution_order" / "ms_execution_order_graph_0.csv").read_text().splitlines()
    softmax_ops = [line.replace("/", "_") for line in order if "/Softmax-op" in line]
    assert len(softmax_ops) == dump_pairs.CONFIG_FIELDS["num_layers"]
    fp16 = [path.name for path in (rank / "LlamaForCausalLM" / "0" / "0").glob("Softmax.*.output.0.*.Float16.npy")]
    layer = dump_pairs.FAULT_LAYER["softmax_fp16"]
    assert len(fp16) == 1 and fp16[0].startswith(f"Softmax.{softmax_ops[layer]}.")


def test_logits_agree_before_the_planted_token_and_differ_from_it(logits_pair):
    torch_logits, ms_logits = np.load(logits_pair.torch), np.load(logits_pair.mindspore)
    assert torch_logits.shape == ms_logits.shape == (8, 64) and torch_logits.dtype == np.float32
    token = dump_pairs.LOGITS_FAULT_TOKEN
    np.testing.assert_allclose(ms_logits[:token], torch_logits[:token], rtol=1e-4, atol=1e-5)
    assert np.abs(ms_logits[token] - torch_logits[token]).max() > 1e-2


def test_workbench_compare_reads_the_real_dumps_and_names_the_wrong_epsilon(msprobe_pairs, tmp_path):
    """msprobe writes a bool tensor's Max/Min as true/false (the attention mask): read as 1/0, never refused.
    The wrong-epsilon fault's first divergence is the add of epsilon in layer 0's norm."""
    from workbench.cli.main import main

    pair, out = msprobe_pairs["norm_epsilon"], tmp_path / "compare.json"
    assert main(["compare", str(pair.torch), str(pair.mindspore), "--out", str(out)]) == 1
    first = next(line for line in json.loads(out.read_text())["summary"] if line.startswith("first divergence"))
    assert first.startswith("first divergence: Tensor.__add__.0.forward ↔ Tensor.__add__.0.forward (layer 0 "
                            "decoder.layers.0.input_layernorm;"), first
