"""`workbench optim-check` on malformed captures and configs: one line naming the file and the parameter
(or key), exit 2, no report written. Each case damages a copy of a real capture (tests/optim_capture.py)."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the reference capture is a real torch training step")
pytest.importorskip("mindspore", reason="optim-check applies MindSpore's optimizer classes")

sys.path.insert(0, str(Path(__file__).parent))
from optim_capture import mindformers_yaml, reference_capture  # noqa: E402

from workbench.cli.main import main  # noqa: E402
from workbench.replay.step_store import read_step_manifest, save_step_tensors  # noqa: E402
from workbench.tensors.open import open_source  # noqa: E402

QKV = "decoder.layers.0.self_attention.linear_qkv.weight"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return reference_capture(tmp_path_factory.mktemp("capture") / "capture")


@pytest.fixture
def capture(pristine, tmp_path):
    return Path(shutil.copytree(pristine, tmp_path / "capture"))


def rewrite(capture: Path, kind: str, change) -> Path:
    """Write ``kind`` of update 1 again with ``change(tensors)`` applied (the manifest stays consistent)."""
    folder = capture / "step_1" / kind
    with open_source(folder) as source:
        tensors = {name: np.array(source.read(name)) for name in source.metas()}
    meta = read_step_manifest(folder).meta
    change(tensors)
    return save_step_tensors(capture, 1, kind, tensors, meta)


def one_error(capsys, capture: Path, yaml_path: Path, tmp_path: Path, *extra: str) -> str:
    out = tmp_path / "report.json"
    code = main(["optim-check", "--capture", str(capture), "--mindformers", str(yaml_path), "--out", str(out), *extra])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert not out.exists() and not list(tmp_path.glob(".report.json*"))
    return lines[0]


def test_a_kind_missing_a_parameter_names_the_folder_and_the_parameter(capsys, capture, tmp_path):
    rewrite(capture, "params_after", lambda tensors: tensors.pop(QKV))
    line = one_error(capsys, capture, mindformers_yaml(tmp_path / "mf.yaml"), tmp_path)
    assert f"step_1/params_after/{QKV}.npy" in line and f"parameter {QKV!r}" in line and "not here" in line


def test_a_wrong_shape_names_the_file_and_both_shapes(capsys, capture, tmp_path):
    def reshape(tensors):
        tensors[QKV] = tensors[QKV][:-2]
    rewrite(capture, "params_before", reshape)
    line = one_error(capsys, capture, mindformers_yaml(tmp_path / "mf.yaml"), tmp_path)
    assert f"step_1/params_before/{QKV}.npy" in line and "(62, 32)" in line and "(64, 32)" in line


def test_a_truncated_tensor_file_names_the_file(capsys, capture, tmp_path):
    path = capture / "step_1" / "grads" / f"{QKV}.npy"
    path.write_bytes(path.read_bytes()[:200])
    line = one_error(capsys, capture, mindformers_yaml(tmp_path / "mf.yaml"), tmp_path)
    assert QKV in line and "grads" in line


def test_a_parameter_missing_everywhere_is_named_by_the_spec(capsys, capture, tmp_path):
    for kind in ("grads", "params_before", "params_after", "exp_avg", "exp_avg_sq"):
        rewrite(capture, kind, lambda tensors: tensors.pop(QKV))
    line = one_error(capsys, capture, mindformers_yaml(tmp_path / "mf.yaml"), tmp_path)
    assert "linear_qkv" in line


def test_nan_gradients_are_reported_not_passed(capsys, capture, tmp_path):
    def poison(tensors):
        tensors[QKV][0, 0] = np.nan
    rewrite(capture, "grads", poison)
    code = main(["optim-check", "--capture", str(capture), "--mindformers", str(mindformers_yaml(tmp_path / "mf.yaml")),
                 "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["verdict"] == "FAIL"
    assert {row["status"] for row in report["tables"]["parameters"]} == {"non-finite"}   # the nan norm clips all


@pytest.mark.parametrize("value", [0.0, -1.0])
def test_a_bad_loss_scale_in_the_manifest_is_named(capsys, capture, tmp_path, value):
    folder = capture / "step_1" / "grads"
    with open_source(folder) as source:
        tensors = {name: np.array(source.read(name)) for name in source.metas()}
    save_step_tensors(capture, 1, "grads", tensors, {**read_step_manifest(folder).meta, "loss_scale": value})
    line = one_error(capsys, capture, mindformers_yaml(tmp_path / "mf.yaml"), tmp_path)
    assert "manifest.json: loss_scale" in line and "positive" in line


def test_missing_update_and_missing_state_are_named(capsys, capture, tmp_path):
    yaml_path = mindformers_yaml(tmp_path / "mf.yaml")
    assert "step_3/grads" in one_error(capsys, capture, yaml_path, tmp_path, "--step", "3")
    two = reference_capture(tmp_path / "two", steps=2)
    shutil.rmtree(two / "step_1" / "exp_avg")
    line = one_error(capsys, two, yaml_path, tmp_path, "--step", "2")
    assert "step_1/exp_avg" in line and "not captured" in line
    assert "--step" in one_error(capsys, capture, yaml_path, tmp_path, "--step", "0")
    assert "not a folder" in one_error(capsys, tmp_path / "nowhere", yaml_path, tmp_path)


def test_an_optimizer_it_cannot_apply_is_named_with_its_key(capsys, capture, tmp_path):
    yaml_path = mindformers_yaml(tmp_path / "mf.yaml")
    yaml_path.write_text(yaml_path.read_text().replace("type: AdamW", "type: Came"))
    line = one_error(capsys, capture, yaml_path, tmp_path)
    assert "optimizer.type" in line and "Came" in line and "AdamW" in line


@pytest.mark.parametrize("damage", ["non-utf8", "deep", "truncated"])
def test_a_damaged_yaml_is_one_line(capsys, capture, tmp_path, damage):
    yaml_path = mindformers_yaml(tmp_path / "mf.yaml")
    text = yaml_path.read_bytes()
    yaml_path.write_bytes({"non-utf8": text.replace(b"AdamW", b"Adam\xff\xfeW"), "deep": b"a: " + b"[" * 5000,
                           "truncated": text[: text.index(b"optimizer:") + 14]}[damage])
    line = one_error(capsys, capture, yaml_path, tmp_path)
    assert "mf.yaml" in line
