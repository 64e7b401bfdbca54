"""The method's step-2 check: the reference's step-1 gradients injected into the MindSpore side's optimizer
(``workbench reference train --side mindformers --inject-grads``: the real MindSpore trainer), its weights after
the update saved, and ``optim-check --observed`` explaining THAT update against the configuration. The capture is
a real torch AdamW step through the real capture hook (tests/optim_capture.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the reference capture is a real torch training step")
ms = pytest.importorskip("mindspore", reason="the injected update runs MindSpore's optimizer")

sys.path.insert(0, str(Path(__file__).parent))
from optim_capture import CONFIG, mindformers_yaml, reference_capture  # noqa: E402

from workbench.cli.main import main  # noqa: E402
from workbench.grads.captured import AFTER, BEFORE, open_captured_step  # noqa: E402
from workbench.reference.config import TrainConfig, synthetic_batches  # noqa: E402
from workbench.reference.runner import RunSpec, run, save_batches  # noqa: E402

TRAIN = TrainConfig(steps=1, lr=1e-2, weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8, clip_grad=1.0)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(capture, its yaml, the MindSpore init .ckpt holding the capture's weights before the update, batches)."""
    root = tmp_path_factory.mktemp("observed")
    capture, yaml_path = reference_capture(root / "capture"), mindformers_yaml(root / "mf.yaml")
    with open_captured_step(capture, 1, config=yaml_path) as captured:
        before = {name: captured.read(BEFORE, name) for name in captured.names}
    init = root / "init.ckpt"
    ms.save_checkpoint([{"name": name, "data": ms.Tensor(value)} for name, value in before.items()], str(init))
    batches = root / "batches.npz"
    save_batches(batches, synthetic_batches(CONFIG, 1, micro_batch_size=1, seed=1))
    return capture, yaml_path, init, batches


def injected_run(setup, out: Path, fault: str | None = None) -> Path:
    capture, yaml_path, init, batches = setup
    result = run(RunSpec(side="mindformers", model=CONFIG, train=TRAIN, out=out, init=init, batches=batches,
                         save=("mindspore",), inject=capture, inject_config=yaml_path, fault=fault, jit=False))
    return result.checkpoints[0]


def check(capsys, setup, observed: Path, *extra: str) -> tuple[int, dict]:
    capture, yaml_path = setup[0], setup[1]
    code = main(["optim-check", "--capture", str(capture), "--mindformers", str(yaml_path), "--observed",
                 str(observed), "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_the_clean_mindspore_update_from_injected_gradients_is_the_configured_one(setup, tmp_path, capsys):
    observed = injected_run(setup, tmp_path / "clean")
    code, report = check(capsys, setup, observed)
    assert (code, report["verdict"]) == (0, "PASS"), report["summary"]
    assert report["facts"]["subject"] == "the MindSpore run" and "observed update" in report["sources"]
    assert "the MindSpore run's update 1" in report["title"]
    with open_captured_step(setup[0], 1, config=setup[1]) as captured:   # and it is the reference's update too
        reference_after = {name: captured.read(AFTER, name) for name in captured.names}
    saved = {name: value.asnumpy() for name, value in ms.load_checkpoint(str(observed)).items()}
    worst = max(float(np.max(np.abs(saved[n] - v)) / np.max(np.abs(v))) for n, v in reference_after.items())
    assert worst < 1e-6


def test_weight_decay_on_1d_parameters_in_the_mindspore_code_is_named(setup, tmp_path, capsys):
    observed = injected_run(setup, tmp_path / "wd1d", fault="weight_decay_1d")
    code, report = check(capsys, setup, observed)
    diagnosis = report["tables"]["diagnosis"]
    assert (code, report["verdict"]) == (1, "FAIL")
    assert [row["cause"] for row in diagnosis] == ["weight_decay_groups"], diagnosis
    claim = diagnosis[0]["claim"]
    assert claim.startswith("the MindSpore run decays 5 parameter(s)") and "(1-D)" in claim, claim
    assert any("reproduces the MindSpore run's update" in line for line in report["summary"])


def test_adam_without_bias_correction_in_the_mindspore_code_is_named(setup, tmp_path, capsys):
    observed = injected_run(setup, tmp_path / "nobc", fault="no_bias_correction")
    code, report = check(capsys, setup, observed)
    diagnosis = report["tables"]["diagnosis"]
    assert code == 1 and [row["cause"] for row in diagnosis] == ["bias_correction"], diagnosis
    assert diagnosis[0]["claim"].startswith("the MindSpore run updates as AdamWeightDecay")


def test_the_reference_side_takes_no_injected_gradients(setup, tmp_path):
    from workbench.errors import InputError

    with pytest.raises(InputError, match="only the MindSpore side"):
        run(RunSpec(side="megatron", model=CONFIG, train=TRAIN, out=tmp_path / "x", inject=setup[0]))
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------------ hostile observed files
def _write_ckpt(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    ms.save_checkpoint([{"name": n, "data": ms.Tensor(v)} for n, v in tensors.items()], str(path))
    return path


def _after(setup) -> dict[str, np.ndarray]:
    with open_captured_step(setup[0], 1, config=setup[1]) as captured:
        return {name: captured.read(AFTER, name) for name in captured.names}


@pytest.mark.parametrize("case", ["missing", "shape", "truncated", "not a checkpoint"])
def test_a_bad_observed_file_is_one_line_naming_it(setup, tmp_path, capsys, case):
    after = _after(setup)
    name = next(iter(after))
    if case == "missing":
        path = _write_ckpt(tmp_path / "m.ckpt", {n: v for n, v in after.items() if n != name})
        words = (name, "missing")
    elif case == "shape":
        path = _write_ckpt(tmp_path / "s.ckpt", {**after, name: np.zeros((3, 3), np.float32)})
        words = (name, "shape")
    elif case == "truncated":
        full = _write_ckpt(tmp_path / "full.ckpt", after)
        path = tmp_path / "t.ckpt"
        path.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
        words = ("t.ckpt",)
    else:
        path = tmp_path / "n.ckpt"
        path.write_bytes(b"\xff\xfe" * 32 + b"garbage")
        words = ("n.ckpt",)
    capture, yaml_path = setup[0], setup[1]
    code = main(["optim-check", "--capture", str(capture), "--mindformers", str(yaml_path), "--observed", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert all(word in err[0] for word in words), err[0]


def test_observed_safetensors_in_bf16_is_widened(setup, tmp_path, capsys):
    """Any checkpoint format the tensor readers know; bf16 weights are compared after widening (and then differ
    by bf16 rounding: the configured update is not reproduced within 1e-6, which the check says)."""
    from safetensors.numpy import save_file

    from workbench.tensors.base import fp32_to_bf16_bits

    after = _after(setup)
    path = tmp_path / "after.safetensors"
    save_file({n: v for n, v in after.items()}, str(path))
    code, report = check(capsys, setup, path)
    assert (code, report["verdict"]) == (0, "PASS")
    bf16 = tmp_path / "bf16.safetensors"
    import struct

    header = {n: {"dtype": "BF16", "shape": list(v.shape)} for n, v in after.items()}
    blobs, offset = [], 0
    for n, v in after.items():
        data = fp32_to_bf16_bits(v).tobytes()
        header[n]["data_offsets"] = [offset, offset + len(data)]
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    bf16.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    code, report = check(capsys, setup, bf16)
    assert code == 1 and report["verdict"] == "FAIL"
    assert max(row["max_rel_diff"] for row in report["tables"]["parameters"]) < 1e-2


def test_without_observed_the_check_is_the_reference_s(setup, capsys):
    capture, yaml_path = setup[0], setup[1]
    code = main(["optim-check", "--capture", str(capture), "--mindformers", str(yaml_path), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["facts"]["subject"] == "the reference" and report["facts"]["observed"] is None


def test_the_reference_cli_injects_and_the_check_explains_its_update(setup, tmp_path, capsys):
    """``workbench reference train --inject-grads`` (sizes and optimizer from the same yaml, --from) writes the
    .ckpt ``optim-check --observed`` reads: a fault planted by --fault is named, one command after the other."""
    capture, yaml_path, init, batches = setup
    out, sized = tmp_path / "cli", tmp_path / "run.yaml"      # the run's length settled (-1: the dataset's), fp32
    fp32 = "".join(f"    {key}: float32\n" for key in ("compute_dtype", "param_init_type", "layernorm_compute_type",
                                                           "softmax_compute_type", "rotary_dtype", "embedding_init_type"))
    sized.write_text(yaml_path.read_text().replace("total_steps: -1", "total_steps: 1")
                     .replace("    type: LlamaConfig\n", "    type: LlamaConfig\n" + fp32))
    assert main(["reference", "train", "--side", "mindformers", "--from", str(sized), "--steps", "1",
                 "--init", str(init), "--batches", str(batches), "--inject-grads", str(capture),
                 "--inject-config", str(yaml_path), "--fault", "weight_decay_1d", "--save", "mindspore",
                 "--no-jit", "--out", str(out)]) == 0
    assert "step 1: loss nan" in capsys.readouterr().out          # the injected update runs no forward pass
    code, report = check(capsys, setup, out / "mindspore.ckpt")
    assert code == 1 and [row["cause"] for row in report["tables"]["diagnosis"]] == ["weight_decay_groups"]
