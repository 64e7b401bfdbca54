"""Hostile dumps, built from scratch: each class of damage is one line naming the file (and line or key),
raised as InputError (the CLI's exit 2), never a traceback, never an allocation the file cannot back."""
from __future__ import annotations

import json
import shutil
import tracemalloc

import numpy as np
import pytest
from workbench_testing import fixtures_dir

from workbench.dumps.formats import load_dump_formats
from workbench.dumps.logits import compare_logits
from workbench.dumps.open_dump import open_dump
from workbench.errors import InputError

HEADER = "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,L2Norm Value,"
ROW = 'MatMul,Default_net-N_MatMul-op0,0,0,1,input,0,4,float32,"(1)",1,1,1,'
TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
          "Norm": 1.0}


def _error(path, *expected) -> str:
    with pytest.raises(InputError) as caught:
        open_dump(path)
    text = str(caught.value)
    assert "\n" not in text and "Traceback" not in text
    for piece in expected:
        assert piece in text, (piece, text)
    return text


def _msprobe(tmp_path, data, name="dump.json"):
    folder = tmp_path / "step0" / "rank0"
    folder.mkdir(parents=True)
    (folder / name).write_text(data if isinstance(data, str) else json.dumps(data))
    return folder / name


def test_truncated_json_names_file_and_line(tmp_path):
    text = fixtures_dir("dumps", "msprobe_pytorch", "out_statistics_L1") / "dump.first60.json.txt"  # real, cut short
    path = _msprobe(tmp_path, text.read_text())
    _error(tmp_path, f"{path}:", "invalid msprobe dump.json")


def test_missing_columns(tmp_path):
    path = tmp_path / "statistic.csv"
    path.write_text("Op Type,Op Name,IO,Slot,Data Type,Max Value,\n")
    _error(path, f"{path}:1", "missing column(s) Shape")


def test_unknown_header_column_is_named(tmp_path):
    path = tmp_path / "statistic.csv"
    path.write_text(HEADER + "Mystery Value,\n" + ROW + "3,\n")
    _error(path, f"{path}:1 [Mystery Value]", "datasets/dump_formats.yaml")


def test_truncated_csv_row(tmp_path):
    path = tmp_path / "statistic.csv"
    path.write_text(HEADER + "\n" + ROW + "\n" + ROW[:30] + "\n")
    _error(path, f"{path}:3", "fields, the header has")


def test_msprobe_rank_folder_missing(tmp_path):
    for step, ranks in ((0, (0, 1)), (1, (0,))):
        for rank in ranks:
            folder = tmp_path / f"step{step}" / f"rank{rank}"
            folder.mkdir(parents=True)
            (folder / "dump.json").write_text(json.dumps({"data": {}}))
    _error(tmp_path, str(tmp_path), "step 1 has no dump.json for rank(s) 1")


def test_msprobe_rank_folder_without_dump(tmp_path):
    _msprobe(tmp_path, {"data": {}})
    (tmp_path / "step0" / "rank1").mkdir()
    _error(tmp_path, str(tmp_path / "step0" / "rank1" / "dump.json"), "file not found")


def test_mindspore_rank_folder_empty(tmp_path):
    folder = tmp_path / "rank_0" / "Net" / "0" / "0"
    folder.mkdir(parents=True)
    (folder / "statistic.csv").write_text(HEADER + "\n" + ROW + "\n")
    (tmp_path / "rank_1").mkdir()
    _error(tmp_path, str(tmp_path / "rank_1"), "holds no {net}/{graph}/{iteration}/ folder")


def test_mindspore_iteration_missing_on_one_rank(tmp_path):
    for rank, iterations in ((0, (0, 1)), (1, (0,))):
        for iteration in iterations:
            folder = tmp_path / f"rank_{rank}" / "Net" / "0" / str(iteration)
            folder.mkdir(parents=True)
            (folder / "statistic.csv").write_text(HEADER + "\n" + ROW + "\n")
    _error(tmp_path, "step 1 has no dump folder for rank(s) 1")


@pytest.mark.parametrize("field, value, expected", [
    ("Max", [1, 2], "Max is [1, 2], expected a number"),
    ("dtype", 7, "dtype is int, expected a string"),
    ("shape", "2x2", "expected dims"),
    ("shape", [-1], "expected a list of non-negative integers"),
])
def test_msprobe_wrong_types(tmp_path, field, value, expected):
    path = _msprobe(tmp_path, {"data": {"Functional.relu.0.forward": {"input_args": [{**TENSOR, field: value}]}}})
    _error(tmp_path, f"{path} [Functional.relu.0.forward.input.0]", expected)


def test_msprobe_entry_not_a_mapping(tmp_path):
    path = _msprobe(tmp_path, {"data": {"Functional.relu.0.forward": [1, 2]}})
    _error(path, f"{path} [Functional.relu.0.forward]", "expected a mapping")
    _msprobe(tmp_path / "b", [1, 2])
    _error(tmp_path / "b", "expected an msprobe dump.json")


def test_statistic_wrong_types(tmp_path):
    path = tmp_path / "statistic.csv"
    path.write_text(HEADER + "\n" + ROW.replace(",input,0,", ",input,x,") + "\n")
    _error(path, f"{path}:2 [Slot]", "Slot is 'x', expected a number")
    path.write_text(HEADER + "\n" + ROW.replace(",1,1,1,", ",big,1,1,") + "\n")
    _error(path, f"{path}:2 [max]", "'big', expected a number")
    path.write_text(HEADER + "\n" + ROW.replace(",input,", ",sideways,") + "\n")
    _error(path, f"{path}:2 [IO]", "expected input or output")


def test_legacy_wrong_types_and_items(tmp_path):
    path = tmp_path / "api_stack_dump.pkl"
    good = '["Torch_relu_0_forward_output", 1, [], "torch.float32", [3], [1.0, 0.0, 0.5]]'
    path.write_text(good + "\n" + '["Torch_relu_0_forward_output", "one", [], "torch.float32", [3], [1, 0, 0.5]]\n')
    _error(path, f"{path}:2 [step]", "expected a non-negative integer")
    path.write_text(good + "\n" + '["Torch_relu_0_forward_output", 1, [], "torch.float32", [3]]\n')
    _error(path, f"{path}:2", "5 items, expected 6")
    path.write_text('["Torch_relu_0_forward_output", 1, [], "torch.float32", [3], [1, 2]]\n')
    _error(path, f"{path}:1 [summary]", "expected a list of 3 or 4 numbers")
    path.write_text('["relu output", 1, [], "torch.float32", [3], [1, 2, 3]]\n')
    _error(path, f"{path}:1", "does not follow")


def _absurd_npy(path, shape=(10 ** 12,)):
    """A .npy whose header claims 4 TB of float32 over 8 bytes of data."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros(2, np.float32))
    header["shape"] = shape
    with open(path, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(b"\0" * 8)


def test_absurd_npy_header_checked_before_allocating(tmp_path):
    folder = tmp_path / "rank_0" / "Net" / "0" / "0"
    folder.mkdir(parents=True)
    path = folder / "MatMul.Default_net-N_MatMul-op0.0.0.1.output.0.DefaultFormat.Float32.npy"
    _absurd_npy(path)
    tracemalloc.start()
    try:
        _error(tmp_path, str(path), "truncated or corrupt .npy")
        assert tracemalloc.get_traced_memory()[1] < 50 * 1024 * 1024
    finally:
        tracemalloc.stop()


def test_truncated_npy(tmp_path):
    folder = tmp_path / "dump"
    folder.mkdir()
    path = folder / "Functional_linear_0_forward_input.0.npy"
    np.save(path, np.ones((100,), np.float32))
    path.write_bytes(path.read_bytes()[:-40])
    _error(folder, str(path), "truncated or corrupt .npy")


def test_deep_nesting(tmp_path):
    path = _msprobe(tmp_path, '{"data": ' + "[" * 5000 + "]" * 5000 + "}")
    _error(tmp_path, str(path), "nests 5001 levels deep")


def test_non_utf8(tmp_path):
    path = tmp_path / "statistic.csv"
    path.write_bytes((HEADER + "\n").encode() + b"MatMul,Op\xff\xfe,0\n")
    _error(path, f"{path}:2", "not UTF-8")
    pkl = tmp_path / "api_stack_dump.pkl"
    pkl.write_bytes(b'["Torch_relu_0_forward_output\xff", 1]\n')
    _error(pkl, f"{pkl}:1", "not UTF-8")


def test_not_a_dump(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    _error(tmp_path, str(tmp_path), "looked for an msprobe dump.json")
    _error(tmp_path / "notes.txt", "is not a dump this tool reads")
    _error(tmp_path / "absent", "file not found")


def test_logits_hostile(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((3, 4, 5, 6), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((3, 8), np.float32))
    with pytest.raises(InputError, match=r"a\.npy: has shape \[3, 4, 5, 6\], expected \[tokens, vocab\]"):
        compare_logits(tmp_path / "a.npy", tmp_path / "b.npy")
    _absurd_npy(tmp_path / "c.npy", shape=(10 ** 6, 10 ** 6))
    with pytest.raises(InputError, match="c.npy: truncated or corrupt .npy"):
        compare_logits(tmp_path / "c.npy", tmp_path / "b.npy")
    np.save(tmp_path / "s.npy", np.array(["x", "y"]))
    with pytest.raises(InputError, match="expected floating-point logits"):
        compare_logits(tmp_path / "s.npy", tmp_path / "b.npy")


def test_formats_yaml_errors_name_file_and_line(tmp_path):
    from workbench.knowledge import knowledge_dir

    text = (knowledge_dir("datasets") / "dump_formats.yaml").read_text()
    broken = tmp_path / "dump_formats.yaml"
    broken.write_text(text.replace("op_pattern: '^(?P<op>", "op_pattern: '^(?P<op"))
    line = next(i for i, l in enumerate(broken.read_text().splitlines(), 1) if l.strip().startswith("op_pattern"))
    with pytest.raises(InputError, match=rf"dump_formats.yaml:{line} \[scope.op_pattern\]: bad regular expression"):
        load_dump_formats(broken)
    broken.write_text(text.replace('"Max Value": max', '"Max Value": maximum'))
    with pytest.raises(InputError, match=r"\[mindspore_statistic.columns.Max Value\]: unknown column 'maximum'"):
        load_dump_formats(broken)
    shutil.copy(knowledge_dir("datasets") / "dump_formats.yaml", broken)
    assert load_dump_formats(broken).dtype("Float32") == "float32"


def test_csv_bad_quoting(tmp_path):
    path = tmp_path / "statistic.csv"
    path.write_text(HEADER + "\n" + ROW + "\n" + ROW.replace('"(1)"', '"(1)"x') + "\n")
    _error(path, f"{path}:3", "not CSV (',' expected after '\"')")
