"""`workbench reference train|batches`: one CLI with the other subcommands (help with examples, one-line errors,
exit 2), the `python -m workbench.reference` alias, and `--steps 0 --save` writing loadable initial weights."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def one_error_line(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error: ") and "Traceback" not in captured.err
    return lines[0]


def test_reference_is_a_workbench_subcommand_whose_help_ends_with_examples(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0 and "reference" in capsys.readouterr().out
    for argv in (["reference", "--help"], ["reference", "train", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = capsys.readouterr().out
        examples = text[text.index("examples:"):].strip().splitlines()[1:]
        assert examples and all(line.strip().startswith("workbench reference ") for line in examples)
        assert text.rstrip().endswith(examples[-1].strip())


def test_reference_without_a_command_is_one_line(capsys):
    assert "expected a command: train or batches" in one_error_line(capsys, ["reference"])


@pytest.mark.parametrize("argv,needle", [
    (["batches", "--steps", "0"], "--steps is 0, expected an integer between 1 and 1000000"),
    (["train", "--side", "megatron", "--steps", "0"], "--steps 0 trains nothing and, without --save, writes nothing"),
    (["train", "--side", "megatron", "--steps", "-1", "--save", "megatron"], "--steps is -1, expected an integer "
                                                                             "between 0 and 1000000"),
    (["train", "--side", "megatron", "--steps", "1", "--fault", "norm_epsilon"],
     "--fault: faults are planted on the MindSpore side, not on megatron"),
    (["train", "--side", "mindformers", "--steps", "1", "--fault", "no_such_fault"],
     "--fault: unknown fault 'no_such_fault' (use one of embedding_fp32,"),
    (["train", "--side", "mindformers", "--steps", "1", "--fault", "gate_up_swapped"],
     "gate_up_swapped is a weights fault, planted in files, not in the model code"),
])
def test_bad_reference_arguments_are_one_line_and_write_nothing(tmp_path, capsys, argv, needle):
    out = tmp_path / "out"
    assert needle in one_error_line(capsys, ["reference", *argv, "--out", str(out)])
    assert not out.exists()


def test_the_module_alias_runs_the_same_command(tmp_path):
    out = tmp_path / "b.npz"
    result = subprocess.run([sys.executable, "-m", "workbench.reference", "batches", "--steps", "2", "--out", str(out)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    with np.load(out) as data:
        assert data["tokens"].shape[0] == 2
    bad = subprocess.run([sys.executable, "-m", "workbench.reference", "--debug", "batches", "--steps", "0",
                          "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode != 0 and "Traceback" in bad.stderr          # --debug reaches the one error handler


def test_list_faults_prints_the_catalog(capsys):
    assert main(["reference", "--list-faults"]) == 0
    text = capsys.readouterr().out
    for name in ("embedding_fp32", "softmax_fp16", "norm_epsilon", "rotary_base", "weight_decay_1d",
                 "no_bias_correction", "lr_schedule", "gate_up_swapped", "data_off_by_one", "vocab_padding"):
        assert name in text


def test_steps_zero_writes_the_initial_weights_both_sides_load(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    ms = pytest.importorskip("mindspore")
    from workbench.reference import ms_model, torch_model
    from workbench.reference.config import ModelConfig, PrecisionConfig, TrainConfig

    torch_out, ms_out = tmp_path / "torch", tmp_path / "ms"
    assert main(["reference", "train", "--side", "megatron", "--steps", "0", "--save", "megatron,hf",
                 "--out", str(torch_out)]) == 0
    assert main(["reference", "train", "--side", "mindformers", "--steps", "0", "--save", "mindspore",
                 "--out", str(ms_out)]) == 0
    assert "no training (--steps 0): wrote the initial weights" in capsys.readouterr().out
    assert not (torch_out / "train.log").exists() and not (ms_out / "train.log").exists()
    assert (torch_out / "megatron_checkpoint" / "latest_checkpointed_iteration.txt").read_text().strip() == "0"
    with torch.serialization.safe_globals([argparse.Namespace]):      # Megatron stores its args Namespace
        saved = torch.load(torch_out / "megatron_checkpoint" / "iter_0000000" / "mp_rank_00" / "model_optim_rng.pt",
                           weights_only=True)["model"]
    expected = torch_model.build_model(ModelConfig(), PrecisionConfig(), seed=TrainConfig().seed).state_dict()
    for name, value in expected.items():
        torch.testing.assert_close(saved[name], value, rtol=0, atol=0)
    loaded = ms.load_checkpoint(str(ms_out / "mindspore.ckpt"))
    initial = ms_model.initial_weights(ModelConfig(), TrainConfig().seed)
    assert set(loaded) == set(initial)
    for name, value in initial.items():
        np.testing.assert_array_equal(loaded[name].asnumpy(), value)


def test_steps_zero_from_init_writes_that_checkpoint_back(tmp_path):
    ms = pytest.importorskip("mindspore")
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["reference", "train", "--side", "mindformers", "--steps", "1", "--save", "mindspore",
                 "--out", str(first)]) == 0
    assert main(["reference", "train", "--side", "mindformers", "--steps", "0", "--save", "mindspore",
                 "--init", str(first / "mindspore.ckpt"), "--out", str(second)]) == 0
    trained, copied = (ms.load_checkpoint(str(path / "mindspore.ckpt")) for path in (first, second))
    for name, value in trained.items():
        np.testing.assert_array_equal(copied[name].asnumpy(), value.asnumpy())
