"""Capture and batch readers against hostile bytes: a real capture (BatchCapture) or batch file is
built in tmp_path, damaged one way, and read through the real CLI (`workbench data show|verify`,
`python -m workbench.reference train`): exit 2, one line naming the file and the key, no traceback,
nothing allocated for a size the file does not hold."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.replay.capture import BatchCapture

SEQ = 8


def capture(root: Path) -> Path:
    with BatchCapture(root, dp_rank=0, dp_world=1, micro_batches=1) as writer:
        for step in (0, 1):
            text = np.arange(2 * (SEQ + 1)).reshape(2, SEQ + 1) + step
            writer.record(step, text[:, :-1], text[:, 1:], np.ones((2, SEQ), np.float32))
    return root


def one_error_line(capsys, argv: list[str], entry=main, prefix: str = "workbench: error: ") -> str:
    assert entry(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    assert "Traceback" not in err
    return lines[0]


def show(capsys, root: Path, step: int = 1) -> str:
    return one_error_line(capsys, ["data", "show", str(root), "--step", str(step), "--rank", "0"])


def npy_claiming(shape: tuple, dtype: str = "<i8", size: int = 128) -> bytes:
    """A ``.npy`` of ``size`` bytes whose header claims ``shape``."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    head = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
    return head + bytes(max(size - len(head), 0))


def test_a_128_byte_npy_claiming_10_to_the_12_elements_allocates_nothing(tmp_path, capsys):
    root = capture(tmp_path / "cap")
    tokens = root / "step_1" / "rank_0" / "tokens.npy"
    tokens.write_bytes(npy_claiming((10 ** 6, 10 ** 6)))
    line = show(capsys, root)
    assert str(tokens) in line and "claims 7.3 TiB (8000000000000 bytes) of data, the file holds" in line
    assert "-" not in line.split("claims")[1].split("(")[0]        # never "needs -4 bytes"


@pytest.mark.parametrize("shape, words", [
    ((2 ** 32, 2 ** 32), "has 18446744073709551616 elements"),
    ((2 ** 62, 2), "shape[0] is 4611686018427387904, expected 0 to 2**40"),
])
def test_npy_shapes_whose_size_wraps_are_refused(tmp_path, capsys, shape, words):
    root = capture(tmp_path / "cap")
    labels = root / "step_1" / "rank_0" / "labels.npy"
    labels.write_bytes(npy_claiming(shape))
    line = show(capsys, root)
    assert str(labels) in line and words in line


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("change, key", [
    (lambda m: m.update(micro_batches="1"), "micro_batches is a string"),
    (lambda m: m.update(files=[]), "files is a list"),
    (lambda m: m["files"]["tokens.npy"].update(shape="2,8"), "files.tokens.npy.shape is a string"),
    (lambda m: m["files"]["tokens.npy"].update(shape=[2, -8]), "files.tokens.npy.shape[1] is -8"),
    (lambda m: m["files"]["tokens.npy"].update(dtype=8), "files.tokens.npy.dtype is an integer"),
    (lambda m: m["files"]["tokens.npy"].update(sha256=None), "files.tokens.npy.sha256 is null"),
    (lambda m: m["files"]["tokens.npy"].update(micro_batch=True), "files.tokens.npy.micro_batch is true/false"),
])
def test_manifest_fields_with_wrong_types(tmp_path, capsys, change, key):
    root = capture(tmp_path / "cap")
    manifest = root / "step_1" / "rank_0" / "manifest.json"
    edit_json(manifest, change)
    line = show(capsys, root)
    assert f"{manifest}: {key}" in line


@pytest.mark.parametrize("marker, key", [
    ({"format": "workbench.capture/1", "dp_world": "two"}, "dp_world is a string"),
    ({"format": "workbench.capture/1", "dp_world": 0}, "dp_world is 0, expected an integer at least 1"),
    (["dp_world", 1], "the capture marker is a list"),
])
def test_capture_marker_with_wrong_types(tmp_path, capsys, marker, key):
    root = capture(tmp_path / "cap")
    (root / "workbench_capture.json").write_text(json.dumps(marker))
    line = one_error_line(capsys, ["data", "verify", str(root)])
    assert f"{root / 'workbench_capture.json'}: {key}" in line


def test_capture_json_nested_100k_deep(tmp_path, capsys):
    root = capture(tmp_path / "cap")
    manifest = root / "step_1" / "rank_0" / "manifest.json"
    manifest.write_text("[" * 100_000 + "]" * 100_000)
    assert f"{manifest}: manifest nests 100000 levels deep" in show(capsys, root)
    (root / "workbench_capture.json").write_text("{\"a\":" + "[" * 100_000 + "]" * 100_000 + "}")
    line = one_error_line(capsys, ["data", "verify", str(root)])
    assert "workbench_capture.json: capture marker nests 100001 levels deep" in line


def test_fields_whose_shapes_disagree_name_both(tmp_path, capsys):
    root = capture(tmp_path / "cap")
    labels = root / "step_1" / "rank_0" / "labels.npy"
    np.save(labels, np.zeros((2, SEQ + 3), np.int64))
    edit_json(root / "step_1" / "rank_0" / "manifest.json", lambda m: m["files"]["labels.npy"].update(shape=[2, 11]))
    line = show(capsys, root)
    assert f"{labels}: labels shape [2, 11] disagrees with tokens shape [2, 8]" in line


def test_fifo_and_self_referencing_symlink_in_a_capture(tmp_path, capsys):
    root = capture(tmp_path / "cap")
    tokens = root / "step_1" / "rank_0" / "tokens.npy"
    tokens.unlink()
    os.mkfifo(tokens)
    assert f"{tokens}: is a pipe (FIFO)" in show(capsys, root)       # must not block on the pipe
    tokens.unlink()
    tokens.symlink_to(tokens)
    assert f"{tokens}: is a symlink that loops" in show(capsys, root)
    marker = root / "workbench_capture.json"
    marker.unlink()
    os.mkfifo(marker)
    assert f"{marker}: is a pipe (FIFO)" in one_error_line(capsys, ["data", "verify", str(root)])


def reference_train(capsys, tmp_path, batches: Path) -> str:
    from workbench.reference.__main__ import main as reference_main

    out = tmp_path / "run"
    line = one_error_line(capsys, ["train", "--side", "megatron", "--steps", "1", "--batches", str(batches),
                                   "--out", str(out)], reference_main, "workbench: error: ")
    assert str(batches) in line and not out.exists()              # nothing written for bad batches
    return line


def test_reference_batches_whose_shapes_disagree(tmp_path, capsys):
    batches = tmp_path / "batches.npz"
    np.savez(batches, tokens=np.zeros((2, 2, 8), np.int64), labels=np.zeros((2, 2, 9), np.int64),
             loss_mask=np.ones((2, 2, 8), np.float32))
    line = reference_train(capsys, tmp_path, batches)
    assert f"{batches} [labels]: labels shape [2, 2, 9] disagrees with tokens shape [2, 2, 8]" in line


def test_reference_batches_claiming_more_than_they_hold(tmp_path, capsys):
    import zipfile

    batches = tmp_path / "batches.npz"
    with zipfile.ZipFile(batches, "w") as archive:
        archive.writestr("tokens.npy", npy_claiming((10 ** 6, 10 ** 5, 2)))
        archive.writestr("labels.npy", npy_claiming((1,), size=0))
        archive.writestr("loss_mask.npy", npy_claiming((1,), size=0))
    line = reference_train(capsys, tmp_path, batches)
    assert f"{batches} [tokens]: truncated or corrupt .npy" in line and "claims 1.5 TiB" in line
