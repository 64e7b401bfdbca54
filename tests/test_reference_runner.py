"""`python -m workbench.reference`: train a side, write logs, checkpoints and gradients, continue from a checkpoint."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the reference runs need torch (test extra)")

from checkpoint_merge import merge_megatron_legacy  # noqa: E402
from workbench.reference.__main__ import main  # noqa: E402
from workbench.reference.config import ModelConfig, TrainConfig  # noqa: E402
from workbench.reference.runner import RunSpec, run  # noqa: E402

MEGATRON_LINE = re.compile(r"iteration\s+(\d+)/\s*(\d+) \| consumed samples:\s+(\d+) \| elapsed time per iteration "
                           r"\(ms\): ([\d.]+) \| learning rate: ([\d.E+-]+) \| global batch size:\s+(\d+) \| "
                           r"lm loss: ([\d.E+-]+) \| loss scale: ([\d.]+) \| grad norm: ([\d.]+) \|")
MINDFORMERS_LINE = re.compile(r"\{ Epoch:\[\s*(\d+)/\s*(\d+)\], step:\[\s*(\d+)/\s*(\d+)\], loss: ([\d.]+), "
                              r"per_step_time: (\d+)ms, lr: ([\d.e+-]+), overflow cond: (\w+), loss_scale: ([\d.]+), "
                              r"global_norm: \[([\d.]+)\]")


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "batches.npz"
    assert main(["batches", "--steps", "4", "--out", str(path)]) == 0
    return path


def test_megatron_side_writes_log_norms_grads_and_tp2_pp2_checkpoint(batches, tmp_path, capsys):
    out = tmp_path / "torch"
    assert main(["train", "--side", "megatron", "--steps", "3", "--batches", str(batches), "--out", str(out),
                 "--save", "megatron,hf", "--tp", "2", "--pp", "2", "--local-norms", "--grads"]) == 0
    printed = [float(x) for x in re.findall(r"loss ([\d.]+)", capsys.readouterr().out)]
    lines = (out / "train.log").read_text().splitlines()
    iterations = [MEGATRON_LINE.search(line) for line in lines if "iteration" in line]
    assert [int(match.group(1)) for match in iterations] == [1, 2, 3]
    assert [float(match.group(7)) for match in iterations] == pytest.approx(printed, rel=1e-6)
    names = [line.split(":")[0] for line in lines if line.startswith("local_norm/")]
    assert len(names) == 3 * len(set(names)) and "local_norm/embedding.word_embeddings.weight" in names
    assert sorted(p.name for p in (out / "grads").iterdir()) == ["step_1", "step_2", "step_3"]
    root = out / "megatron_checkpoint"
    assert (root / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    assert len(list(root.glob("iter_0000003/mp_rank_0[01]_00[01]/model_optim_rng.pt"))) == 4
    merged = merge_megatron_legacy(root, ModelConfig())
    from safetensors.numpy import load_file  # the HF export of the same final weights
    hf = load_file(out / "hf" / "model.safetensors")
    np.testing.assert_array_equal(merged["output_layer.weight"].numpy(), hf["lm_head.weight"])


def test_continuing_from_a_checkpoint_reproduces_the_next_loss(batches, tmp_path):
    full = run(RunSpec("megatron", ModelConfig(), TrainConfig(steps=4), tmp_path / "full", batches=batches))
    first = run(RunSpec("megatron", ModelConfig(), TrainConfig(steps=3), tmp_path / "first", batches=batches,
                        save=("megatron",), tensor_parallel=2, pipeline_parallel=2))  # resumed from merged shards
    assert first.losses == full.losses[:3]
    shifted = tmp_path / "shifted.npz"  # batch 4 first
    with np.load(batches) as data:
        np.savez(shifted, **{key: data[key][3:] for key in data.files})
    resumed = run(RunSpec("megatron", ModelConfig(), TrainConfig(steps=1), tmp_path / "resumed", batches=shifted,
                          init=tmp_path / "first" / "megatron_checkpoint"))
    assert resumed.losses[0] == pytest.approx(full.losses[3], rel=1e-6)  # forward of update 4, same weights


def test_mindformers_side_log_checkpoint_and_continuation(batches, tmp_path):
    pytest.importorskip("mindspore", reason="the MindSpore side needs mindspore")
    train = TrainConfig(steps=2, log_local_norms=True, decay_style="cosine", warmup_steps=1)
    full = run(RunSpec("mindformers", ModelConfig(), replace(train, steps=3), tmp_path / "full", batches=batches,
                       jit=False))
    first = run(RunSpec("mindformers", ModelConfig(), train, tmp_path / "first", batches=batches,
                        save=("mindspore",), jit=False))
    text = first.log.read_text()
    matches = MINDFORMERS_LINE.findall(text)
    assert [int(m[2]) for m in matches] == [1, 2] and float(matches[0][4]) == pytest.approx(first.losses[0], abs=1e-3)
    assert text.count("local_norm:") == 2
    assert first.lrs[0] == 0.0 and first.losses == full.losses[:2]
    shifted = tmp_path / "shifted.npz"
    with np.load(batches) as data:
        np.savez(shifted, **{key: data[key][2:] for key in data.files})
    resumed = run(RunSpec("mindformers", ModelConfig(), replace(train, steps=1), tmp_path / "resumed",
                          batches=shifted, init=tmp_path / "first" / "mindspore.ckpt", jit=False))
    assert resumed.losses[0] == pytest.approx(full.losses[2], rel=1e-6)


def test_config_file_and_bad_inputs(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("model:\n  num_layers: 1\n  hidden_size: 32\ntrain:\n  steps: 1\n  lr: 1.0e-4\n")
    assert main(["train", "--side", "megatron", "--config", str(config), "--out", str(tmp_path / "ok")]) == 0
    config.write_text("model:\n  num_layers: 1\n  hiden_size: 32\n")
    assert main(["train", "--side", "megatron", "--config", str(config), "--out", str(tmp_path / "bad")]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "run.yaml:3" in error[0] and "hiden_size" in error[0]
    assert main(["train", "--side", "mindformers", "--save", "hf", "--out", str(tmp_path / "x")]) == 2
    assert main(["train", "--side", "megatron", "--out", str(tmp_path / "ok")]) == 2  # exists: needs --force


def test_reference_configs_from_the_example_pair_describe_the_same_run():
    from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS
    from workbench.reference.from_canonical import configs_from_file

    model_m, train_m = configs_from_file(EXAMPLE_MEGATRON, "megatron", steps=5)
    model_f, train_f = configs_from_file(EXAMPLE_MINDFORMERS, "mindformers", steps=5)
    assert model_m == model_f == ModelConfig(num_layers=2, hidden_size=64, num_attention_heads=4, num_kv_heads=2,
                                             ffn_hidden_size=176, vocab_size=128, seq_length=32)
    assert train_m == train_f and (train_m.steps, train_m.schedule_steps, train_m.warmup_steps) == (5, 20, 2)
    np.testing.assert_allclose(train_m.lr_per_update("megatron"), train_f.lr_per_update("mindformers"), rtol=1e-12)


def test_configs_from_a_config_that_leaves_values_open_name_them():
    from workbench_testing import fixtures_dir
    from workbench.errors import InputError
    from workbench.reference.from_canonical import configs_from_file

    script = fixtures_dir("configs", "megatron") / "mindspeed_llm_v2.2.0__pretrain_llama2_7b_ptd.sh"
    with pytest.raises(InputError, match="model.padded_vocab_size is not settled"):
        configs_from_file(script, "megatron")


def test_a_failed_run_leaves_no_folder_and_a_rerun_replaces_the_old_one(batches, tmp_path, monkeypatch):
    """The run folder is staged beside --out and renamed in at the end: a run that fails half-way (here: the
    checkpoint writer) leaves neither the folder nor a staging folder; a finished run replaces the old folder."""
    import workbench.reference.runner as runner

    out = tmp_path / "run"
    spec = RunSpec("megatron", ModelConfig(), TrainConfig(steps=2), out, batches=batches, save=("megatron",))

    def broken(*_):
        raise RuntimeError("disk went away")
    monkeypatch.setattr(runner, "_save", broken)        # a real failure point: after the log and grads exist
    with pytest.raises(RuntimeError):
        run(spec)
    assert list(tmp_path.iterdir()) == []                # no run folder, no staging folder
    monkeypatch.undo()
    (out / "old").mkdir(parents=True)
    result = run(spec)
    assert result.log == out / "train.log" and result.log.is_file() and not (out / "old").exists()
    assert result.checkpoints and all(path.exists() and out in path.parents for path in result.checkpoints)
    assert not any(p.name.startswith(".run") for p in tmp_path.iterdir())
