"""The training-log readers against what real logs hold and against hostile input.

Every file is built here from scratch; each class of bad input gets one test on the real code path
(``read_log``), asserting the exact outcome: a value, a note, or a one-line InputError naming the file
and line. Never a traceback of another type."""
from __future__ import annotations

import math
import os
import tracemalloc

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.logs import read_log
from workbench.logs.formats import load_formats
from workbench.reference.mindformers_log import format_local_norm_message, format_loss_message


def meg(iteration: int, *fields: str, head: str = " [2025-01-01 12:00:00]", total: int = 100) -> str:
    return f"{head} iteration {iteration:8d}/{total:8d} |" + "".join(f" {f} |" for f in fields)


def mf(step: int, rest: str, steps: int = 10, epoch: int = 1) -> str:
    return (f"2025-01-01 12:00:00,000 - mindformers./output/log[mindformers/core/callback/callback.py:616] - INFO - "
            f"{{ Epoch:[{epoch:3d}/  2], step:[{step:5d}/{steps:5d}], {rest}")


def write(tmp_path, name: str, lines):
    path = tmp_path / name
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    else:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------- Megatron grammar ----------------

def test_megatron_fields_in_any_subset_moe_mtp_nan_and_throughput(tmp_path):
    path = write(tmp_path, "moe.log", [
        "building model ...",
        meg(1, "consumed samples: 8", "elapsed time per iteration (ms): 10.0",
            "throughput per GPU (TFLOP/s/GPU): 123.4", "learning rate: 2.000000E-05", "global batch size: 8",
            "lm loss: 5.000000E+00", "load_balancing_loss: 1.000000E-02", "z_loss: 2.000000E-03",
            "mtp_1 loss: 4.000000E+00", "loss scale: 1.0", "grad norm: nan", "num zeros: 3.0",
            "params norm: 10.500", "number of skipped iterations:   0", "number of nan iterations:   1"),
        " [2025-01-01 12:00:01] timers: forward 1.0 | backward 2.0",       # junk with '|' in it
        meg(2, "learning rate: 3.000000E-05", "lm loss: 4.000000E+00", "actual throughput per NPU (TFLOP/s/NPU): 99.0",
            "loss scale: 1.0", "number of skipped iterations:   1", "number of nan iterations:   0"),
    ])
    got = read_log(path)
    assert got.metric("lm_loss").to_dict() == {1: 5.0, 2: 4.0}
    assert math.isnan(got.metric("grad_norm")[1]) and 2 not in got.metric("grad_norm")      # nan, then absent
    assert got.metric("load_balancing_loss")[1] == 0.01 and got.metric("z_loss")[1] == 0.002
    assert got.metric("mtp_1_loss")[1] == 4.0
    assert got.metric("throughput").to_dict() == {1: 123.4, 2: 99.0}
    assert got.metric("lr").to_dict() == {2: 2e-5, 3: 3e-5}
    assert got.metric("num_zeros")[1] == 3 and got.metric("params_norm")[1] == 10.5
    assert got.metric("skipped_iterations")[2] == 1 and got.metric("nan_iterations")[1] == 1


def test_megatron_rank_prefixes_and_no_timestamp(tmp_path):
    path = write(tmp_path, "ranks.log", [
        meg(1, "lm loss: 1.000000E+00", head="[default3]:"),
        meg(1, "lm loss: 2.000000E+00", head="7:  "),
        meg(2, "lm loss: 3.000000E+00", head=""),
    ])
    rows = read_log(path).series
    assert sorted(zip(rows["rank"], rows["step"], rows["value"], strict=True)) == [(-1, 2, 3.0), (3, 1, 1.0), (7, 1, 2.0)]


def test_megatron_log_interval_is_detected_and_said(tmp_path):
    path = write(tmp_path, "interval.log", [meg(i, "lm loss: 1.000000E+00") for i in (10, 20, 30, 40)])
    got = read_log(path)
    assert got.facts["log_interval"] == 10
    assert any("--log-interval 10" in note and "means" in note for note in got.notes)


def test_megatron_fast_and_per_line_paths_agree(tmp_path):
    """Lines with the same '|' count but different keys go through the per-line path: same values."""
    lines = [meg(i, "lm loss: %.6E" % (1.0 / i), "grad norm: %.3f" % i if i % 2 else "params norm: %.3f" % i)
             for i in range(1, 200)]
    got = read_log(write(tmp_path, "mixed.log", lines))
    assert got.metric("lm_loss").tolist() == pytest.approx([1.0 / i for i in range(1, 200)], rel=1e-6)
    assert got.metric("grad_norm").index.tolist() == list(range(1, 200, 2))
    assert got.metric("params_norm").index.tolist() == list(range(2, 200, 2))


# ------------------------------------------------------------- MindFormers grammar -------------

def test_mindformers_message_versions_and_prefixes(tmp_path):
    path = write(tmp_path, "mf.log", [
        mf(1, "loss: 10.633, per_step_time: 1752ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0"),  # r1.0
        "[INFO] 2025-01-01 12:00:00,000 [mindformers/core/callback/callback.py:616] print_output_info: "
        "{ Epoch:[  1/  2], step:[    2/   10], loss:[10.500/10.566], per_step_time: 10ms, overflow cond: True, "
        "loss_scale: 1024.0, global_norm: None",                                       # file sink, non-sink, no lr
        mf(3, "loss: 9.000000, lm_loss: 8.500000, load_balancing_loss: 0.300000, mtp_loss: 0.200000, "
              "per_step_time: 10ms, lr: 9.549147e-05, overflow cond: False, loss_scale: 1.0, "
              "global_norm: [25.431616], train_throughput_per_npu: 1.500T"),
        mf(4, "loss: 8.0, aux_loss: 0.1, per_step_time: 10ms, lr: 0.0009045085, overflow cond: False, "
              "loss_scale: 1.0, global_norm: [1 31049]"),                              # typo of the public docs
        mf(1, "loss: 7.0, per_step_time: 10ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0", epoch=2),
    ])
    got = read_log(path)
    assert got.metric("loss").to_dict() == {1: 10.633, 2: 10.5, 3: 9.0, 4: 8.0, 11: 7.0}
    assert got.metric("overflow").to_dict() == {1: 0.0, 2: 1.0, 3: 0.0, 4: 0.0, 11: 0.0}
    assert math.isnan(got.metric("grad_norm")[2]) and got.metric("grad_norm")[3] == pytest.approx(25.431616)
    assert 4 not in got.metric("grad_norm") and any("[1 31049]" in note for note in got.notes)
    assert 2 not in got.metric("lr") and got.metric("lr")[3] == pytest.approx(9.549147e-05)
    assert got.metric("lm_loss")[3] == 8.5 and got.metric("mtp_loss")[3] == 0.2
    assert got.metric("load_balancing_loss").to_dict() == {3: 0.3, 4: 0.1}
    assert got.metric("throughput")[3] == 1.5 and got.metric("loss_scale")[2] == 1024.0
    assert any("non-sink" in note for note in got.notes)


@pytest.mark.parametrize("folder, rank", [("rank_3", 3), ("rank_999999999999999999", 999999999999999999),
                                          ("rank_99999999999999999999", -1), ("rank_x", -1)])
def test_mindformers_rank_from_the_folder(tmp_path, folder, rank):
    """The rank of ``rank_N/``: int64 ranks only; a longer number is no rank (not an overflow)."""
    (tmp_path / folder).mkdir()
    path = write(tmp_path / folder, "info.log", [format_local_norm_message([4, 4], np.array([1.0, 2.0], np.float32)),
                                                  mf(1, "loss: 1.0, lr: 1e-05")])
    got = read_log(path)
    assert set(got.series["rank"]) == {rank} and set(got.local_norms["rank"]) == {rank}


def test_mindformers_monitor_local_norm_lines(tmp_path):
    prefix = "2025-01-01 12:00:00,000 - mindformers./output/log[mindformers/core/callback/callback.py:1361] - INFO - "
    path = write(tmp_path, "monitor.log", [
        prefix + "Epoch:[  1/  1], step:[    1/    5] local_norm/model.layers.0.attention.wq.weight: 0.1234",
        prefix + "Epoch:[  1/  1], step:[    1/    5] local_norm/model.norm_out.weight: 0.5",
        prefix + "Epoch:[  1/  1], step:[    1/    5] device_local_norm: 1.25",
        mf(1, "loss: 1.0, per_step_time: 1ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0"),
    ])
    got = read_log(path)
    norms = got.local_norms
    assert norms["param"].tolist() == ["model.layers.0.attention.wq.weight", "model.norm_out.weight"]
    assert norms["value"].tolist() == [0.1234, 0.5] and set(norms["definition"]) == {"l2_micro_step"}
    assert norms["position"].tolist() == [0, 1] and got.metric("device_local_norm")[1] == 1.25


def block_log(tmp_path, values, sizes=None, name="block.log"):
    sizes = sizes if sizes is not None else [4] * len(values)
    lines = ["2025-01-01 12:00:00,000 - mindformers./output/log[x.py:158] - INFO - "
             + format_local_norm_message(sizes, values),
             mf(1, format_loss_message(1, 1, 1, 10, 2.0, 5, 1e-5, 1.0)[format_loss_message(1, 1, 1, 10, 2.0, 5, 1e-5,
                                                                                       1.0).index("loss"):])]
    return write(tmp_path, name, lines)


def test_local_norm_block_of_a_thousand_values_wrapped_reads_whole(tmp_path):
    values = np.linspace(1e-6, 2.0, 1000, dtype=np.float32)
    got = read_log(block_log(tmp_path, values, sizes=range(1, 1001)))
    norms = got.local_norms
    assert len(norms) == 1000 and norms["position"].tolist() == list(range(1000))
    np.testing.assert_array_equal(norms["value"].to_numpy(np.float32), values)
    assert norms["numel"].tolist() == list(range(1, 1001)) and set(norms["step"]) == {1}


def test_summarised_local_norm_block_keeps_true_positions_and_says_so(tmp_path):
    values = np.arange(1, 1501, dtype=np.float32)                     # > 1000: numpy prints [a b c ... x y z]
    got = read_log(block_log(tmp_path, values))
    norms = got.local_norms
    assert norms["position"].tolist() == [0, 1, 2, 1497, 1498, 1499]
    assert norms["value"].tolist() == [1.0, 2.0, 3.0, 1498.0, 1499.0, 1500.0]
    assert any("summarised" in note and "6 of 1500" in note and "3..1496" in note for note in got.notes)


def test_block_count_differs_from_norm_size(tmp_path):
    path = block_log(tmp_path, np.ones(5, dtype=np.float32), sizes=[4] * 6)
    with pytest.raises(InputError) as error:
        read_log(path)
    assert str(error.value).startswith(f"{path}:1: local_norm block has 5 values but norm_size lists 6")
    assert "\n" not in str(error.value)


def test_param_groups_name_the_block_and_bad_groups_are_a_note(tmp_path):
    prefix = "2025-01-01 12:00:00,000 - mindformers./output/log[m/optimizer_grouped_parameters.py:181] - INFO - "
    groups = ['Param groups = {', '  "weight_decay": {', '    "weight_decay": 0.1,', '    "params": [',
              '      "a.weight",', '      "b.weight"', '    ]', '  },', '  "no_weight_decay": {',
              '    "weight_decay": 0.0,', '    "params": [', '      "a.bias"', '    ]', '  }', '}']
    block = block_log(tmp_path, np.float32([1, 2, 3]), sizes=[4, 4, 2]).read_text()
    good = write(tmp_path, "good.log", [prefix + groups[0], *groups[1:], block])
    got = read_log(good)
    assert got.param_order == ["a.weight", "b.weight", "a.bias"]
    assert got.local_norms["param"].tolist() == ["a.weight", "b.weight", "a.bias"]
    broken = write(tmp_path, "broken.log", [prefix + groups[0], *groups[1:-2], "}", block])   # unclosed list
    deep = write(tmp_path, "deep.log", [prefix + "Param groups = " + "{\"a\": " * 5000 + "1" + "}" * 5000, block])
    for path in (broken, deep):
        got = read_log(path)
        assert got.param_order is None and set(got.local_norms["param"]) == {""}
        assert any(f"{path}:1 [Param groups]" in note and "names not taken" in note for note in got.notes)


def test_param_groups_of_the_wrong_shape_or_count_are_a_note_and_a_later_bad_block_keeps_the_order(tmp_path):
    prefix = "2025-01-01 12:00:00,000 - mindformers./output/log[m/optimizer_grouped_parameters.py:181] - INFO - "
    good = prefix + 'Param groups = {"decay": {"params": ["a.weight", "b.weight", "a.bias"]}}'
    block = block_log(tmp_path, np.float32([1, 2, 3]), sizes=[4, 4, 2]).read_text()
    for name, line in (("group_list", '{"decay": ["a.weight"]}'), ("numbers", '{"decay": {"params": [1, 2, 3]}}'),
                       ("no_params", '{"decay": {"weight_decay": 0.1}}')):
        got = read_log(write(tmp_path, f"{name}.log", [prefix + "Param groups = " + line, block]))
        assert got.param_order is None and set(got.local_norms["param"]) == {""}
        assert any("expected {group: {'params': [name, ...]}}" in note for note in got.notes), name
    short = write(tmp_path, "short.log", [prefix + 'Param groups = {"decay": {"params": ["a.weight"]}}', block])
    got = read_log(short)
    assert got.param_order == ["a.weight"] and set(got.local_norms["param"]) == {""}
    assert any("lists 1 parameters but norm_size lists 3" in note for note in got.notes)
    later = write(tmp_path, "later.log", [good, prefix + 'Param groups = {"x": 1}', block])
    got = read_log(later)
    assert got.param_order == ["a.weight", "b.weight", "a.bias"]
    assert got.local_norms["param"].tolist() == ["a.weight", "b.weight", "a.bias"]
    assert any(f"{later}:2 [Param groups]" in note for note in got.notes)


# ------------------------------------------------------------- hostile bytes -------------------

def test_truncated_lines_lose_only_their_cut_field(tmp_path):
    full = meg(1, "lm loss: 5.000000E+00", "grad norm: 1.000")
    path = write(tmp_path, "cut.log", [full, meg(2, "lm loss: 4.000000E+00", "grad norm: 1.000")[:-9]])
    got = read_log(path)
    assert got.metric("lm_loss").to_dict() == {1: 5.0, 2: 4.0} and 2 not in got.metric("grad_norm")
    assert any("cut off" in note and "line 2" in note for note in got.notes)
    mf_path = block_log(tmp_path, np.ones(40, dtype=np.float32), name="mf_cut.log")
    mf_path.write_text("\n".join(mf_path.read_text().splitlines()[:3]) + "\n")          # block cut mid-array
    got = read_log(mf_path)
    assert got.local_norms.empty and any("cut off" in note for note in got.notes)


def test_non_utf8_bytes_are_replaced_and_said(tmp_path):
    data = (meg(1, "lm loss: 5.000000E+00") + "\n").encode() + b"\xff\xfe garbage \x80\n" + \
        (meg(2, "lm loss: 4.000000E+00") + "\n").encode()
    got = read_log(write(tmp_path, "bytes.log", data))
    assert got.metric("lm_loss").to_dict() == {1: 5.0, 2: 4.0}
    assert any("not UTF-8" in note and "line 2" in note for note in got.notes)


def test_a_50_mb_line_is_skipped_in_bounded_memory(tmp_path):
    path = tmp_path / "huge.log"
    with open(path, "w") as handle:
        handle.write(meg(1, "lm loss: 5.000000E+00") + "\n")
        handle.write("x" * (50 << 20) + "\n")
        handle.write(meg(2, "lm loss: 4.000000E+00") + "\n")
    tracemalloc.start()
    try:
        got = read_log(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.metric("lm_loss").to_dict() == {1: 5.0, 2: 4.0}
    assert any("longer than 4 MiB skipped (line 2)" in note for note in got.notes)
    assert peak < 40 << 20, f"peak {peak >> 20} MiB while skipping a 50 MiB line"


def test_absurd_numbers_are_inf_or_left_out(tmp_path):
    path = write(tmp_path, "absurd.log", [
        meg(1, "lm loss: 1e999999", "grad norm: " + "9" * 5000, "loss scale: -inf"),
        meg(10 ** 30, "lm loss: 1.0"),                                     # 31 digits: not an iteration counter
        meg(2, "lm loss: not-a-number"),
    ])
    got = read_log(path)
    assert got.metric("lm_loss")[1] == math.inf and got.metric("grad_norm")[1] == math.inf
    assert got.metric("loss_scale")[1] == -math.inf and math.isnan(got.metric("lm_loss")[2])
    assert sorted(got.series["step"].unique()) == [1, 2]
    assert any("not numbers" in note for note in got.notes)


# ------------------------------------------------------------- dispatch -------------------------

def test_what_is_not_a_log_is_one_line_error(tmp_path):
    text = write(tmp_path, "notes.txt", ["hello", "world"])
    with pytest.raises(InputError, match=r"notes\.txt: no Megatron iteration line"):
        read_log(text)
    with pytest.raises(InputError, match="file not found"):
        read_log(tmp_path / "missing.log")
    with pytest.raises(InputError, match="folder with no training log"):
        read_log(tmp_path)
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="pipe"):
        read_log(fifo)
    with pytest.raises(InputError, match="unknown log format"):
        read_log(text, format="excel")


def test_forced_format_and_patch_lists_dispatch(tmp_path):
    patch = write(tmp_path, "patch.log", ["[tensor(1.5e-05, device='cuda:0'), tensor(2.0, device='cuda:0')]",
                                          meg(1, "lm loss: 1.000000E+00")])
    got = read_log(patch)
    assert got.format == "megatron" and got.local_norms["value"].tolist() == [1.5e-05, 2.0]
    assert set(got.local_norms["step"]) == {1} and got.metric("lm_loss")[1] == 1.0
    only = write(tmp_path, "only.log", ["[tensor(3.0, device='cuda:0')]"])
    assert read_log(only).format == "megatron_patch"


def test_log_formats_yaml_is_validated_with_file_line_and_key(tmp_path):
    bad = tmp_path / "log_formats.yaml"
    bad.write_text("kind: log_formats\nmegatron:\n  detect: [iteration]\n  fields:\n"
                   "    \"lm loss\": {metric: lm_losss}\nmindformers:\n  detect: [x]\n  fields: {loss: {metric: loss}}\n")
    with pytest.raises(InputError, match=r"log_formats\.yaml:5 \[megatron\.fields\.lm loss\]: unknown metric 'lm_losss'"):
        load_formats(bad)
