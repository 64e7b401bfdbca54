"""Config values checked at load (issue 8): wrong container shapes, wrong types, non-finite floats,
out-of-range sizes (declared `min:`/`max:` in checklists/keys.yaml and the framework yamls), unknown
`data diff` fields, and the reference runner's config and counts. Each class is built from scratch
here and goes through the real CLI: exit code 2, one line naming the file, line and key, no traceback.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.config.registry import parse_registry
from workbench.errors import InputError
from workbench.reference.__main__ import main as reference_main
from workbench.replay.capture import BatchCapture
from workbench.yamlio import parse_yaml
from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS, ROOT


def mindformers_yaml(tmp_path, old: str, new: str):
    text = EXAMPLE_MINDFORMERS.read_text()
    assert old in text
    path = tmp_path / "run.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def megatron_script(tmp_path, old: str, new: str):
    text = EXAMPLE_MEGATRON.read_text()
    assert old in text
    path = tmp_path / "train.sh"
    path.write_text(text.replace(old, new, 1))
    return path


def line_of(path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def checklist_error(capsys, megatron=EXAMPLE_MEGATRON, mindformers=EXAMPLE_MINDFORMERS, *extra: str) -> str:
    return one_line_error(capsys, ["checklist", str(megatron), str(mindformers), *extra])


# ---------------------------------------------------------------- container shapes
@pytest.mark.parametrize("old,new,key,found", [
    ("model:\n  model_config:", "model: 5\nunused:\n  model_config:", "model", "an integer (5), expected a mapping"),
    ("parallel_config:\n  data_parallel: 1\n  model_parallel: 1\n  pipeline_stage: 1\n  use_seq_parallel: False\n"
     "  micro_batch_num: 1\n", "parallel_config: [1, 2]\n", "parallel_config", "a list ([1, 2]), expected a mapping"),
    ("betas: [0.9, 0.95]", "betas: 0.9", "optimizer.betas", "a number (0.9), expected a list"),
    ("lr_schedule:\n  type: CosineWithWarmUpLR\n  learning_rate: 1.e-3\n  lr_end: 1.e-4\n  warmup_steps: 2\n"
     "  total_steps: 20\n", "lr_schedule: CosineWithWarmUpLR\n", "lr_schedule", "a string ('CosineWithWarmUpLR')"),
])
def test_a_container_of_the_wrong_type_is_named_not_replaced_by_defaults(tmp_path, capsys, old, new, key, found):
    path = mindformers_yaml(tmp_path, old, new)
    out = tmp_path / "report.json"
    message = checklist_error(capsys, EXAMPLE_MEGATRON, path, "--out", str(out))
    line = line_of(path, new.splitlines()[0])
    assert f"{path}:{line} [{key}]: {key} is {found}" in message
    assert not out.exists()


# ---------------------------------------------------------------- scalar types
@pytest.mark.parametrize("old,new,needle", [
    ("num_layers: 2", "num_layers: two", "expected an integer, found 'two'"),
    ("num_layers: 2", "num_layers: [2]", "model.model_config.num_layers is a list, expected a single value"),
    ("type: AdamW", "type: {name: AdamW}", "optimizer.type is a mapping, expected a single value"),
    ("use_clip_grad: True", "use_clip_grad: 3", "expected true or false, found 3"),
    ("rms_norm_eps: 1.0e-5", "rms_norm_eps: .nan", "expected a finite number, found nan"),
    ("learning_rate: 1.e-3", "learning_rate: .inf", "expected a finite number, found inf"),
])
def test_a_value_of_the_wrong_type_is_one_line_with_file_and_line(tmp_path, capsys, old, new, needle):
    path = mindformers_yaml(tmp_path, old, new)
    message = checklist_error(capsys, EXAMPLE_MEGATRON, path)
    key = new.split(":")[0].strip()
    assert f"({path.name}:{line_of(path, new)})" in message and key in message and needle in message


def test_a_megatron_flag_of_the_wrong_type_names_the_script_line(tmp_path, capsys):
    path = megatron_script(tmp_path, "--lr 1.0e-3", "--lr nan")
    message = checklist_error(capsys, path, EXAMPLE_MINDFORMERS)
    assert f"--lr ({path.name}:{line_of(path, '--lr nan')})" in message and "finite number" in message


# ---------------------------------------------------------------- ranges (keys.yaml min/max)
@pytest.mark.parametrize("old,new,key,expected", [
    ("num_heads: 4", "num_heads: 0", "model.num_attention_heads is 0", "expected at least 1"),
    ("hidden_size: 64", "hidden_size: -64", "model.hidden_size is -64", "expected at least 1"),
    ("betas: [0.9, 0.95]", "betas: [0.9, 1.5]", "optimizer.beta2 is 1.5", "expected between 0 and 1"),
    ("model_parallel: 1", "model_parallel: 0", "parallel.tensor is 0", "expected at least 1"),
    ("batch_size: 2\n  sink_mode", "batch_size: -2\n  sink_mode", "train.micro_batch_size is -2", "at least 1"),
])
def test_out_of_range_values_are_rejected_at_load(tmp_path, capsys, old, new, key, expected):
    path = mindformers_yaml(tmp_path, old, new)
    message = checklist_error(capsys, EXAMPLE_MEGATRON, path)
    assert f"({path.name}:{line_of(path, new.splitlines()[0])})" in message
    assert key in message and expected in message


def test_zero_heads_on_megatron_is_an_error_not_a_division_by_zero(tmp_path, capsys):
    path = megatron_script(tmp_path, "--num-attention-heads 4", "--num-attention-heads 0")
    message = checklist_error(capsys, path, EXAMPLE_MINDFORMERS)
    assert f"--num-attention-heads ({path.name}:{line_of(path, '--num-attention-heads 0')})" in message
    assert "model.num_attention_heads is 0, expected at least 1" in message


def test_a_derived_value_out_of_range_names_its_formula(tmp_path, capsys):
    """TP 2 on one GPU: Megatron's data-parallel size world // (TP·PP·CP) would be 0."""
    path = megatron_script(tmp_path, "    --num-layers 2", "    --num-layers 2\n    --tensor-model-parallel-size 2")
    message = checklist_error(capsys, path, EXAMPLE_MINDFORMERS)
    assert f"{path} [parallel.data]" in message and "world 1 / (TP·PP·CP 2)" in message and "at least 1" in message


@pytest.mark.parametrize("old,new,needle", [
    ("intermediate_size: 176", "multiple_of: 0", "model.model_config.multiple_of is 0, expected at least 1"),
    ("warmup_steps: 2", "warmup_ratio: 1.5", "lr_schedule.warmup_ratio is 1.5, expected between 0 and 1"),
    ("warmup_steps: 2", "warmup_steps: -2", "lr_schedule.warmup_steps is -2, expected at least 0"),
])
def test_raw_values_that_derivations_read_are_range_checked(tmp_path, capsys, old, new, needle):
    """Declared under `values:` in checklists/frameworks/mindformers.yaml (multiple_of 0 divided by zero)."""
    path = mindformers_yaml(tmp_path, old, new)
    message = checklist_error(capsys, EXAMPLE_MEGATRON, path)
    assert needle in message and f"({path.name}:{line_of(path, new)})" in message


def test_registry_ranges_are_validated_with_file_line_and_key(tmp_path):
    def registry(body: str):
        path = tmp_path / "keys.yaml"
        path.write_text(body)
        return parse_registry(parse_yaml(body, path))

    spec = registry("keys:\n  a.b:\n    type: int\n    min: 1\n    megatron: {arg: b}\n")
    assert spec["a.b"].bounds.minimum == 1
    for body, needle in [
        ("keys:\n  a.b:\n    type: str\n    min: 1\n    megatron: {arg: b}\n", "min/max on a value of type str"),
        ("keys:\n  a.b:\n    type: int\n    min: 3\n    max: 1\n    megatron: {arg: b}\n", "min 3 is above max 1"),
        ("keys:\n  a.b:\n    type: int\n    min: one\n    megatron: {arg: b}\n", "min is a string"),
        ("keys:\n  a.b:\n    type: int\n    min: 1\n    megatron: {arg: b, default: 0}\n", "a.b is 0, expected at least 1"),
    ]:
        with pytest.raises(InputError) as error:
            registry(body)
        assert needle in str(error.value) and "keys.yaml:2 [keys.a.b]" in str(error.value)


# ---------------------------------------------------------------- workbench data diff --fields
def capture(root, steps=(0,)):
    with BatchCapture(root, dp_rank=0, dp_world=1, micro_batches=1) as writer:
        for step in steps:
            text = np.arange(18).reshape(2, 9) + step
            writer.record(step, text[:, :-1], text[:, 1:], np.ones((2, 8), np.float32))
    return root


def test_data_diff_unknown_field_lists_the_fields_that_exist(tmp_path, capsys):
    a, b = capture(tmp_path / "a"), capture(tmp_path / "b")
    message = one_line_error(capsys, ["data", "diff", str(a), str(b), "--fields", "tokens,bogus"])
    assert "--fields: unknown field(s) bogus; the captures hold tokens, labels, loss_mask" in message
    one_line_error(capsys, ["data", "diff", str(a), str(b), "--fields", ","])
    assert main(["data", "diff", str(a), str(b), "--fields", "tokens"]) == 0


# ---------------------------------------------------------------- python -m workbench.reference
def reference_error(capsys, argv: list[str]) -> str:
    assert reference_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("workbench: error: ") and "Traceback" not in err
    return err


@pytest.mark.parametrize("option,value,needle", [
    ("--steps", "0", "--steps: --steps is 0, expected an integer between 1 and 1000000"),
    ("--steps", "-1", "--steps: --steps is -1, expected an integer between 1 and 1000000"),
    ("--steps", "1000000000000", "--steps is 1000000000000, expected an integer between 1 and 1000000"),
    ("--micro-batch-size", "0", "--micro-batch-size is 0"),
    ("--data-seed", "-3", "--data-seed is -3, expected an integer at least 0"),
])
def test_reference_counts_are_checked(tmp_path, capsys, option, value, needle):
    out = tmp_path / "batches.npz"
    assert needle in reference_error(capsys, ["batches", option, value, "--out", str(out)])
    assert not out.exists()


def test_reference_steps_zero_through_the_module_entry_point(tmp_path):
    result = subprocess.run([sys.executable, "-m", "workbench.reference", "batches", "--steps", "0", "--out",
                             str(tmp_path / "b.npz")], capture_output=True, text=True, cwd=ROOT, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == ["workbench: error: --steps: --steps is 0, expected an "
                                                  "integer between 1 and 1000000 (pass --steps between 1 and 1000000)"]


@pytest.mark.parametrize("body,key,needle", [
    ("model:\n  num_layers: 2\n  hidden_size: two\n", "model.hidden_size", "is a string ('two'), expected an integer"),
    ("model:\n  num_layers: -2\n", "model.num_layers", "model.num_layers is -2, expected at least 1"),
    ("model:\n  num_attention_heads: 0\n", "model.num_attention_heads", "is 0, expected at least 1"),
    ("model:\n  hidden_size: 64\n  num_attention_heads: 5\n", "model.hidden_size", "not divisible by"),
    ("train:\n  steps: 0\n", "train.steps", "train.steps is 0, expected at least 1"),
    ("train:\n  steps: 1000000000000\n", "train.steps", "more than the 1000000 steps a CPU reference run takes"),
    ("train:\n  lr: .nan\n", "train.lr", "expected a finite number"),
    ("train:\n  beta2: 2.0\n", "train.beta2", "expected between 0 and 1"),
    ("train:\n  decay_style: wsd\n", "train.decay_style", "expected one of constant, linear, cosine"),
])
def test_reference_config_values_are_one_line_with_file_line_and_key(tmp_path, capsys, body, key, needle):
    config = tmp_path / "tiny.yaml"
    config.write_text(body)
    message = reference_error(capsys, ["batches", "--config", str(config), "--out", str(tmp_path / "b.npz")])
    line = body.splitlines().index(next(l for l in body.splitlines() if l.strip().startswith(key.split(".")[1]))) + 1
    assert f"{config}:{line} [{key}]" in message and needle in message
