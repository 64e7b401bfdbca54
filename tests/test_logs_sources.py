"""Series that are not text logs: msprobe monitor CSVs, CSV/JSONL tables, TensorBoard events,
Megatron --save-wgrads files and the nameless local-norm patch lists."""
import json

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.logs.megatron_grads import read_patch_lists, read_wgrads
from workbench.logs.sources import load_sources, read_msprobe_monitor, read_table
from workbench_testing import fixtures_dir

torch = pytest.importorskip("torch")


def test_the_knowledge_file_loads_and_is_validated(tmp_path):
    sources = load_sources()
    assert sources.tensorboard["megatron"]["learning-rate"].step == "next"
    assert sources.msprobe_monitor["grad_reduced"].definition == "l2_reduced"
    broken = tmp_path / "s.yaml"
    broken.write_text("kind: series_sources\nmsprobe_monitor:\n  grad_reduced: {definition: l3}\n")
    with pytest.raises(InputError, match=r"s.yaml:3 \[msprobe_monitor.grad_reduced\]: unknown definition"):
        load_sources(broken)


def test_msprobe_monitor_fixture_gradients_become_l2_local_norms():
    folder = fixtures_dir("dumps", "msprobe_monitor")
    series = read_msprobe_monitor(folder)
    reduced = series.local_norms[series.local_norms["definition"] == "l2_reduced"]
    first = reduced.iloc[0]
    assert (first["param"], first["step"], first["value"]) == ("0.weight", 1, pytest.approx(0.19842443))
    assert "exp_avg_norm/0.weight" in set(series.series["metric"])
    assert series.series.set_index("metric").loc["exp_avg_norm/0.weight", "step"] == 2     # monitor step 1


def test_monitor_csv_with_missing_columns_or_bad_numbers_is_one_line(tmp_path):
    (tmp_path / "grad_reduced_0-0.csv").write_text("vpp_stage,name,step\n0,a,0\n")
    with pytest.raises(InputError, match=r"grad_reduced_0-0.csv:2: no 'norm' column"):
        read_msprobe_monitor(tmp_path)
    (tmp_path / "grad_reduced_0-0.csv").write_text("name,step,norm\na,0,lots\n")
    with pytest.raises(InputError, match="expected a number, found 'lots'"):
        read_msprobe_monitor(tmp_path)
    (tmp_path / "grad_reduced_0-0.csv").write_bytes(b"name,step,norm\n\xff\xfe,0,1\n")
    with pytest.raises(InputError, match="not UTF-8"):
        read_msprobe_monitor(tmp_path)


def test_wide_and_long_tables_and_jsonl(tmp_path):
    (tmp_path / "wide.csv").write_text("iteration,lm loss,grad_norm\n1,5.0,2.0\n2,4.5,\n")
    wide = read_table(tmp_path / "wide.csv")
    assert wide.metric("lm_loss").tolist() == [5.0, 4.5] and wide.metric("grad_norm").tolist() == [2.0]
    (tmp_path / "long.jsonl").write_text('{"step": 1, "metric": "learning_rate", "value": 0.001}\n\n')
    assert read_table(tmp_path / "long.jsonl").metric("lr").tolist() == [0.001]
    (tmp_path / "bad.jsonl").write_text("[" * 100_000 + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl:1: JSON line nests 100000 levels"):
        read_table(tmp_path / "bad.jsonl")
    (tmp_path / "nostep.csv").write_text("loss\n1\n")
    with pytest.raises(InputError, match="no step column"):
        read_table(tmp_path / "nostep.csv")


def test_tensorboard_events_written_like_megatron_shift_the_lr(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    from workbench.logs.tensorboard_io import read_tensorboard

    writer = SummaryWriter(log_dir=str(tmp_path / "tb"))
    for iteration in (1, 2, 3):
        writer.add_scalar("lm loss", 10.0 / iteration, iteration)
        writer.add_scalar("learning-rate", 1e-3 * iteration, iteration)
        writer.add_scalar("my-own-tag", 7.0, iteration)
    writer.close()
    series = read_tensorboard(tmp_path / "tb")
    assert series.format == "tensorboard:megatron"
    assert series.metric("lm_loss").to_dict() == pytest.approx({1: 10.0, 2: 5.0, 3: 10 / 3})
    assert series.metric("lr").index.tolist() == [2, 3, 4]          # the next update's lr
    assert series.metric("my-own-tag").tolist() == [7.0] * 3
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "events.out.tfevents.1.x").write_bytes(b"\x10\x00\x00\x00" + b"\xff" * 40)
    try:
        read_tensorboard(tmp_path / "junk")     # damaged: a one-line error or nothing read, never a crash
    except InputError as error:
        assert "events.out.tfevents" in str(error)


def _reference_tensors():
    from workbench.reference.config import ModelConfig, PrecisionConfig
    from workbench.reference.torch_model import build_model

    model_config = ModelConfig(num_layers=2)
    model = build_model(model_config, PrecisionConfig(), seed=3)
    return model_config, {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize(("tensor_parallel", "pipeline_parallel"), [(1, 1), (2, 1), (2, 2)])
def test_wgrads_shards_merge_to_the_full_sums_of_squares(tmp_path, tensor_parallel, pipeline_parallel):
    from workbench.reference.megatron_parallel import shard_tensor_parallel, split_pipeline

    model_config, tensors = _reference_tensors()
    folder = tmp_path / "wgrads" / "iter_0000001"
    folder.mkdir(parents=True)
    for pp, stage in enumerate(split_pipeline(tensors, model_config.num_layers, pipeline_parallel)):
        for tp, shard in enumerate(shard_tensor_parallel(stage, model_config, tensor_parallel)):
            suffix = f"_{pp:03d}" if pipeline_parallel > 1 else ""
            torch.save({"model_chunk0": {f"module.{k}": v for k, v in shard.items()}},
                       folder / f"mp_rank_{tp:02d}{suffix}.pth")
    norms = read_wgrads(tmp_path / "wgrads").local_norms
    got = dict(zip(norms["param"], norms["value"], strict=True))
    assert set(got) == set(tensors) and set(norms["step"]) == {1}
    for name, tensor in tensors.items():
        assert got[name] == pytest.approx(float(tensor.double().pow(2).sum()), rel=1e-12), name


def test_wgrads_that_are_not_tensors_or_truncated_are_one_line(tmp_path):
    folder = tmp_path / "iter_0000002"
    folder.mkdir()
    torch.save({"model_chunk0": {"a.weight": "oops"}}, folder / "mp_rank_00.pth")
    with pytest.raises(InputError, match=r"\[a.weight\]: not a tensor"):
        read_wgrads(folder)
    data = (folder / "mp_rank_00.pth").read_bytes()
    (folder / "mp_rank_00.pth").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="mp_rank_00.pth"):
        read_wgrads(folder)


def test_patch_lists_belong_to_the_next_iteration_line(tmp_path):
    log = tmp_path / "megatron.log"
    log.write_text("junk\n[tensor(1.5e-05, device='cuda:0'), tensor(2.0, device='cuda:0')]\n"
                   " [2025-01-01 00:00:00] iteration        1/      10 | lm loss: 5.0 |\n"
                   "[rank0]: [tensor([3.0], device='cuda:0'), tensor(nan, device='cuda:0')]\n")
    norms = read_patch_lists(log).local_norms
    assert norms[["step", "position"]].values.tolist() == [[1, 0], [1, 1], [2, 0], [2, 1]]
    assert norms["value"].tolist()[:3] == [1.5e-05, 2.0, 3.0] and np.isnan(norms["value"].iloc[3])
    assert set(norms["param"]) == {""}
    (tmp_path / "none.log").write_text(json.dumps({"x": 1}))
    with pytest.raises(InputError, match="no \\[tensor"):
        read_patch_lists(tmp_path / "none.log")


def test_hostile_jsonl_is_one_line_naming_the_line(tmp_path):
    cases = {b'{"step": 1, "loss": 2.0}\n' + b"[" * 50_000 + b"]" * 50_000 + b"\n": ":2: JSON line nests 50000 levels",
             b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": \xff}\n': ":2: not UTF-8",
             b'{"step": 1, "loss": 2.0}\n{"step": 2, "lo': ":2:",                       # truncated
             b'{"step": 1}\n[1, 2]\n': ":2: expected a JSON object"}
    for index, (content, words) in enumerate(cases.items()):
        path = tmp_path / f"series_{index}.jsonl"
        path.write_bytes(content)
        with pytest.raises(InputError) as caught:
            read_table(path)
        assert words in str(caught.value) and str(path) in str(caught.value), str(caught.value)
