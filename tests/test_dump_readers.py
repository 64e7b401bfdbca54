"""Every dump reader on the real fixtures (../shared/fixtures/dumps, see its SOURCES.md): the schema's
columns, the right rows and values (checked by hand against the fixture files), execution order,
module paths; and the tensor-file readers on dumps built here with numpy."""
from __future__ import annotations

import csv
import json
import math
import shutil

import numpy as np
import pytest
from workbench_testing import fixtures_dir

from workbench.dumps.formats import load_dump_formats
from workbench.dumps.open_dump import open_dump
from workbench.dumps.schema import COLUMNS
from workbench.dumps.scope import parse_scope


def _msprobe_tree(tmp_path, framework: str, steps=(0,), ranks=("proc4242",)):
    """The full statistics/mix dump.json + construct.json of a fixture, laid out as msprobe writes them."""
    source = fixtures_dir("dumps", f"msprobe_{framework}", "out_statistics_mix")
    for step in steps:
        for rank in ranks:
            folder = tmp_path / framework / f"step{step}" / rank
            folder.mkdir(parents=True)
            shutil.copy(source / "dump.full.json", folder / "dump.json")
            shutil.copy(source / "construct.full.json", folder / "construct.json")
    return tmp_path / framework


def _row(table, name):
    found = table[table["name"] == name]
    assert len(found) == 1, name
    return found.iloc[0]


def _assert_schema(table):
    assert list(table.columns) == list(COLUMNS)
    assert {str(dtype) for dtype in table.dtypes} >= {"string", "int64", "float64", "Int64"}
    for column, dtype in COLUMNS.items():
        assert str(table[column].dtype) == dtype, column


def test_msprobe_pytorch_statistics_mix(tmp_path):
    table = open_dump(_msprobe_tree(tmp_path, "pytorch"), side="torch")
    _assert_schema(table)
    assert list(table["order"]) == list(range(len(table)))
    assert set(table["side"]) == {"torch"} and set(table["rank"]) == {0} and set(table["step"]) == {0}
    # values from dump.full.json, Module.fc1.Linear.forward.0 -> parameters -> weight
    weight = _row(table, "Module.fc1.Linear.forward.0.parameters.weight")
    assert (weight["op"], weight["module_path"], weight["pass"], weight["io"], weight["slot"]) == \
        ("Linear", "fc1", "forward", "parameter", 0)
    assert (weight["dtype"], weight["shape"], weight["numel"]) == ("float32", "64x16", 1024)
    assert weight["max"] == 0.24955463409423828 and weight["l2norm"] == 4.62630558013916
    # an API row inside a module takes its module path from construct.json
    linear = _row(table, "Functional.linear.0.forward.input.1")
    assert (linear["op"], linear["module_path"], linear["slot"]) == ("linear", "fc1", 1)
    assert _row(table, "Tensor.__add__.0.forward.output.0")["op"] == "__add__"      # the operator table's spelling
    # numbers passed as arguments are no rows (scalar_rows: false); positions still count them
    assert "Functional.layer_norm.0.forward.input.4" not in set(table["name"])
    assert _row(table, "Functional.multi_head_attention_forward.0.forward.input.11")["slot"] == 11
    # parameter gradients are backward parameters
    grad = _row(table, "Module.fc2.Linear.parameters_grad.0.weight")
    assert (grad["pass"], grad["io"], grad["shape"]) == ("backward", "parameter", "16x64")
    assert table.iloc[0]["name"] == "Functional.layer_norm.0.forward.input.0"
    # every row is one msprobe compare also names; the ones it adds are the dump's numbers and nulls
    compared = [r[0] for r in csv.reader(open(fixtures_dir("dumps", "msprobe_compare_outputs")
                                              / "pt_vs_pt_statistics_mix.csv"))][1:]
    assert set(table["name"]) <= set(compared)
    assert len(table) == 87 and len(set(compared) - set(table["name"])) == 20


def test_msprobe_scalar_rows_when_asked(tmp_path):
    from workbench.knowledge import knowledge_dir

    text = (knowledge_dir("datasets") / "dump_formats.yaml").read_text()
    custom = tmp_path / "dump_formats.yaml"
    custom.write_text(text.replace("scalar_rows: false", "scalar_rows: true"))
    table = open_dump(_msprobe_tree(tmp_path, "pytorch"), fmt=load_dump_formats(custom))
    eps = _row(table, "Functional.layer_norm.0.forward.input.4")          # {"type": "float", "value": 1e-05}
    assert (eps["dtype"], eps["shape"], eps["numel"], eps["max"], eps["min"]) == ("py_float", "", 1, 1e-05, 1e-05)
    assert _row(table, "Functional.multi_head_attention_forward.0.forward.input.training")["slot"] == 13
    assert len(table) == 99


def test_msprobe_mindspore_statistics_mix(tmp_path):
    table = open_dump(_msprobe_tree(tmp_path, "mindspore"), side="ms")
    _assert_schema(table)
    assert set(table["dtype"]) >= {"float32"} and "Float32" not in set(table["dtype"])
    matmul = _row(table, "Primitive.matmul.MatMul.0.forward.output.0")
    assert (matmul["op"], matmul["module_path"], matmul["shape"]) == ("MatMul", "fc1", "16x64")
    assert matmul["l2norm"] == pytest.approx(18.955290)
    gamma = _row(table, "Cell.ln.LayerNorm.parameters_grad.0.gamma")
    assert (gamma["pass"], gamma["io"], gamma["module_path"]) == ("backward", "parameter", "ln")


def test_msprobe_steps_and_ranks(tmp_path):
    root = _msprobe_tree(tmp_path, "pytorch", steps=(0, 1), ranks=("rank0", "rank1"))
    table = open_dump(root)
    assert sorted(set(zip(table["step"], table["rank"], strict=True))) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for _, group in table.groupby(["step", "rank"]):
        assert list(group["order"]) == list(range(len(group)))
    assert len(open_dump(root / "step1" / "rank1" / "dump.json")) == len(table) // 4


def test_msprobe_md5_and_stack(tmp_path):
    folder = tmp_path / "step3" / "rank2"
    folder.mkdir(parents=True)
    tensor = {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [2, 3], "Max": 1.5, "Min": -1.0,
              "Mean": 0.25, "Norm": 2.0, "requires_grad": True, "md5": "f700a42a"}
    data = {"task": "md5", "level": "L1", "framework": "pytorch",
            "data": {"Functional.softmax.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]}}}
    (folder / "dump.json").write_text(json.dumps(data))
    (folder / "stack.json").write_text(json.dumps({"7": [["Functional.softmax.0.forward"], ["File x.py, line 1"]]}))
    table = open_dump(tmp_path)
    assert list(table["md5"]) == ["f700a42a", "f700a42a"]
    assert list(table["stack_id"]) == ["7", "7"]
    assert (table["step"].iloc[0], table["rank"].iloc[0], table["dtype"].iloc[0]) == (3, 2, "bfloat16")


def test_legacy_api_stack_dump_fixture():
    table = open_dump(fixtures_dir("dumps", "ptdbg_legacy") / "api_stack_dump_example.txt", side="legacy")
    _assert_schema(table)
    assert len(table) == 8
    first = table.iloc[0]        # ["Functional_linear_0_forward_input.0", 1, [], "torch.float32", [3, 2], [...]]
    assert (first["name"], first["op"], first["pass"], first["io"], first["slot"]) == \
        ("Functional_linear_0_forward_input.0", "linear", "forward", "input", 0)
    assert (first["step"], first["dtype"], first["shape"], first["numel"]) == (1, "float32", "3x2", 6)
    assert (first["max"], first["min"], first["mean"]) == (1.948258399963379, -1.0052297115325928, -0.2003595232963562)
    assert math.isnan(first["l2norm"])                         # 3-value summary: no norm
    output = _row(table, "Torch_relu_0_forward_output")
    assert (output["io"], output["slot"], output["min"]) == ("output", 0, 0.0)
    assert list(table["stack_id"])[:4] == ["Functional_linear_0_forward"] * 4 and table["stack_id"].iloc[4] == ""


def test_legacy_four_value_summary(tmp_path):
    path = tmp_path / "api_stack_dump.pkl"
    path.write_text('["Tensor_add_3_backward_output.1", 0, ["ab12"], "torch.float16", [], [2.0, 1.0, 1.5, 2.5]]\n')
    row = open_dump(path).iloc[0]
    assert (row["l2norm"], row["md5"], row["shape"], row["numel"], row["dtype"], row["pass"], row["slot"]) == \
        (2.5, "ab12", "", 1, "float16", "backward", 1)


def _statistic_tree(tmp_path, ranks=(0,), iterations=(0,)):
    source = fixtures_dir("dumps", "mindspore_graph_dump")
    for rank in ranks:
        order = tmp_path / "dump" / f"rank_{rank}" / "execution_order"
        order.mkdir(parents=True)
        shutil.copy(source / "ms_execution_order_graph_0.csv", order / "ms_execution_order_graph_0.csv")
        for iteration in iterations:
            folder = tmp_path / "dump" / f"rank_{rank}" / "Block" / "0" / str(iteration)
            folder.mkdir(parents=True)
            shutil.copy(source / "statistic_SYNTHESIZED_from_cpu_tensor_dump.csv", folder / "statistic.csv")
    return tmp_path / "dump"


def test_mindspore_statistic_tree_in_execution_order(tmp_path):
    table = open_dump(_statistic_tree(tmp_path, ranks=(0, 1), iterations=(0, 1)), side="ms")
    _assert_schema(table)
    assert len(table) == 4 * 215
    one = table[(table["rank"] == 1) & (table["step"] == 1)]
    assert list(one["order"]) == list(range(215))
    order = [line.strip() for line in (fixtures_dir("dumps", "mindspore_graph_dump")
                                       / "ms_execution_order_graph_0.csv").read_text().splitlines()[1:]]
    position = {name.replace("/", "_"): index for index, name in enumerate(order)}
    positions = [position.get(name.rsplit(".", 2)[0]) for name in one["name"]]
    listed = [p for p in positions if p is not None]
    assert listed == sorted(listed) and len(set(listed)) == 50             # 50 of the 51 listed ops were dumped
    assert None not in positions[:len(listed)]                               # unlisted ones (Parameters) after
    ln = one.iloc[0]       # LayerNorm-op0 input 0 comes first in the execution order (csv line 14)
    assert (ln["op"], ln["module_path"], ln["pass"], ln["io"], ln["slot"], ln["shape"]) == \
        ("LayerNorm", "net.ln", "forward", "input", 0, "2x8x16")
    assert (ln["max"], ln["min"], ln["l2norm"]) == (2.3831449, -2.5529897, 15.686285)
    grad = one[one["name"].str.startswith("Gradients_Default_network-WithLoss_net-Block_fc2-Dense_Grad_MatMul")]
    assert set(grad["pass"]) == {"backward"} and set(grad["module_path"]) == {"net.fc2"}
    scalar = one[one["name"] == "Default_network-WithLoss_net-Block_ln-LayerNorm_LayerNorm-op0.input.3"].iloc[0]
    assert (scalar["shape"], scalar["numel"], scalar["dtype"]) == ("", 1, "int64")


OLD_HEADER = ("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,"
              "Avg Value,Count,Negative Zero Count,Positive Zero Count,{nan},Negative Inf Count,Positive Inf Count,"
              "Zero Count")


@pytest.mark.parametrize("nan", ["NaN Count", "Nan Count"])
def test_statistic_old_fixed_header_and_spellings(tmp_path, nan):
    path = tmp_path / "statistic.csv"
    path.write_text(OLD_HEADER.format(nan=nan) + "\n"         # the header has no trailing comma, the rows do
                    'Add,Default_net-Net_Add-op3,0,0,17,output,0,16,float16,"(2,2)",inf,-1,nan,4,0,1,1,0,1,0,\n')
    row = open_dump(path).iloc[0]
    assert (row["numel"], row["nan_count"], row["inf_count"], row["max"]) == (4, 1, 1, math.inf)
    assert math.isnan(row["mean"]) and math.isnan(row["l2norm"]) and row["module_path"] == "net" and row["op"] == "Add"


def test_statistic_any_category_order(tmp_path):
    path = tmp_path / "statistic.csv"
    path.write_text("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,L2Norm Value,"
                    "MD5,Min Value,Max Value,\n"
                    'MatMul,Default_model-M_layers-CellList_3-Layer_wq-Linear_MatMul-op1,0,0,1,input,1,4,bfloat16,'
                    '"(1)",5,abcd,-2,3,\n')
    row = open_dump(path).iloc[0]
    assert (row["l2norm"], row["md5"], row["min"], row["max"], row["dtype"]) == (5.0, "abcd", -2.0, 3.0, "bfloat16")
    assert (row["module_path"], row["layer"], row["slot"]) == ("model.layers.3.wq", 3, 1)
    assert math.isnan(row["mean"])


def test_scope_path_to_module_path():
    fmt = load_dump_formats()
    name = ("Default/network-WithLossCell/model-LlamaModel/layers-CellList/0-LLamaDecodeLayer/attention-Attention/"
            "wq-Linear/MatMul-op12")
    for spelling in (name, name.replace("/", "_")):
        scope = parse_scope(spelling, fmt)
        assert (scope.module_path, scope.op, scope.backward) == ("model.layers.0.attention.wq", "MatMul", False)
    grad = parse_scope("Gradients_Default_network-W_model-M_layers-CellList_1-L_self_attn-A_Grad_MatMul_MatMul-op3", fmt)
    assert (grad.module_path, grad.backward) == ("model.layers.1.self_attn", True)
    assert fmt.layer("model.layers.17.attention.wq") == 17 and fmt.layer("model.norm") is None


def _tensor_tree(tmp_path):
    """A MindSpore graph-mode tensor dump built with numpy, names as in the fixture's TREE file."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "rank_0" / "Net" / "0" / "2"
    folder.mkdir(parents=True)
    order = tmp_path / "rank_0" / "execution_order"
    order.mkdir()
    (order / "ms_execution_order_graph_0.csv").write_text(
        "NodeExecutionOrder-FullNameWithScope\nDefault/network-W/net-Block/fc2-Dense/MatMul-op0\n"
        "Default/network-W/net-Block/fc1-Dense/MatMul-op0\n")
    arrays = {}
    for ts, (scope, io) in enumerate([("fc1", "input"), ("fc1", "output"), ("fc2", "input"), ("fc2", "output")]):
        array = rng.normal(size=(3, 5)).astype(np.float32)
        if scope == "fc2" and io == "output":
            array[0, 0], array[1, 1] = np.nan, np.inf
        name = f"MatMul.Default_network-W_net-Block_{scope}-Dense_MatMul-op0.0.0.{100 + ts}.{io}.0.DefaultFormat.Float32.npy"
        np.save(folder / name, array)
        arrays[(scope, io)] = array
    np.save(folder / "Parameter.net_fc1_weight.0.0.99.output.0.DefaultFormat.Float32.npy", np.ones(4, np.float32))
    return arrays


def test_mindspore_tensor_tree(tmp_path):
    arrays = _tensor_tree(tmp_path)
    table = open_dump(tmp_path, side="ms")
    _assert_schema(table)
    assert list(table["module_path"]) == ["net.fc2", "net.fc2", "net.fc1", "net.fc1", ""]    # execution order
    assert set(table["step"]) == {2} and list(table["io"])[-1] == "parameter"
    fc1 = table.iloc[3]
    expected = arrays[("fc1", "output")].astype(np.float64)
    assert (fc1["io"], fc1["shape"], fc1["numel"], fc1["dtype"]) == ("output", "3x5", 15, "float32")
    assert fc1["max"] == expected.max() and fc1["min"] == expected.min()
    assert fc1["mean"] == pytest.approx(expected.mean()) and fc1["l2norm"] == pytest.approx(np.linalg.norm(expected))
    bad = table.iloc[1]
    assert (bad["nan_count"], bad["inf_count"]) == (1, 1) and math.isnan(bad["max"])


def test_legacy_npy_folder(tmp_path):
    folder = tmp_path / "rank3" / "dump"
    folder.mkdir(parents=True)
    np.save(folder / "Functional_linear_0_forward_input.0.npy", np.arange(6, dtype=np.float64).reshape(2, 3))
    row = open_dump(folder).iloc[0]
    assert (row["rank"], row["op"], row["dtype"], row["shape"], row["max"], row["mean"]) == \
        (3, "linear", "float64", "2x3", 5.0, 2.5)
    assert row["l2norm"] == pytest.approx(math.sqrt(55))


def test_stats_stream_in_chunks(tmp_path, monkeypatch):
    from workbench.dumps import tensor_stats

    monkeypatch.setattr(tensor_stats, "CHUNK", 7)          # many slices over a small file: same numbers
    values = np.random.default_rng(1).normal(size=100).astype(np.float32)
    np.save(tmp_path / "x.npy", values)
    stats = tensor_stats.npy_stats(tmp_path / "x.npy")
    assert stats["mean"] == pytest.approx(values.astype(np.float64).mean())
    assert stats["max"] == values.max() and stats["l2norm"] == pytest.approx(np.linalg.norm(values.astype(np.float64)))


def test_msprobe_wrapper_modules_dropped_and_layers(tmp_path):
    """Megatron's model is wrapped (DDP, Float16Module) as `module.module.`; checkpoint names carry neither."""
    folder = tmp_path / "rank0"
    folder.mkdir()
    qkv = "Module.module.module.decoder.layers.1.self_attention.linear_qkv.ColumnParallelLinear.forward.0"
    wq = "Cell.network.model.layers.0.attention.wq.Linear.forward.0"
    tensor = {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [4, 2], "Max": 1.0, "Min": -1.0,
              "Mean": 0.0, "Norm": 2.0}
    data = {"Functional.linear.3.forward": {"input_args": [tensor], "output": [tensor]},
            qkv: {"input_args": [tensor], "output": [tensor]}, wq: {"output": [tensor]}}
    (folder / "dump.json").write_text(json.dumps({"task": "statistics", "data": data}))
    (folder / "construct.json").write_text(json.dumps({"Functional.linear.3.forward": qkv, qkv: None}))
    table = open_dump(tmp_path)
    assert list(table["module_path"]) == ["decoder.layers.1.self_attention.linear_qkv"] * 4 + ["model.layers.0.attention.wq"]
    assert list(table["layer"]) == [1, 1, 1, 1, 0]
    assert list(table["op"]) == ["linear", "linear", "ColumnParallelLinear", "ColumnParallelLinear", "Linear"]
