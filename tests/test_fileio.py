"""The one atomic writer (workbench/fileio.py): file modes, symlinks, devices and FIFOs, and one-line
errors for every way a write fails, through the real CLI and the real writers."""
from __future__ import annotations

import errno
import json
import os
import socket
import stat
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS
from workbench.cli.main import main
from workbench.errors import InputError
from workbench.fileio import atomic_file, write_text
from workbench.output_checks import check_output, output_kind

CHECKLIST = ["checklist", str(EXAMPLE_MEGATRON), str(EXAMPLE_MINDFORMERS)]


def checklist_to(out, *extra: str) -> list[str]:
    return [*CHECKLIST, "--format", "json", "--out", str(out), *extra]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path) -> list[Path]:
    return list(folder.rglob(".*.part"))


@pytest.fixture
def umask():
    """Sets the process umask for one test and puts the old one back (os.umask is process-wide)."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


# ----------------------------------------------------------------------------- modes

def test_reports_figures_captures_and_grads_get_0644_under_umask_022(tmp_path, umask):
    from workbench.reference.artifacts import save_grads
    from workbench.replay.capture import BatchCapture
    from workbench.report.emit import emit
    from workbench.report.result import Result

    for name in ("report.md", "report.html"):
        assert main([*CHECKLIST, "--out", str(tmp_path / name)]) == 0
    assert main([*CHECKLIST, "--out", str(tmp_path / "report.json"), "--plot-lr", str(tmp_path / "lr.png")]) == 0
    emit(Result("demo", "demo", "PASS", tables={"rows": pd.DataFrame({"a": [1, 2]})}), "csv", tmp_path / "rows.csv")
    with BatchCapture(tmp_path / "capture", dp_rank=0, dp_world=1, micro_batches=1) as capture:
        tokens = np.arange(8, dtype=np.int64).reshape(1, 8)
        capture.record(0, tokens, tokens, np.ones((1, 8), np.float32))
    save_grads(tmp_path / "grads", 1, {"w": np.ones(3)})
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert len(files) == 12 and {path.suffix for path in files} >= {".md", ".html", ".json", ".png", ".csv", ".npy"}
    assert {str(path.relative_to(tmp_path)): oct(mode(path)) for path in files if mode(path) != 0o644} == {}


def test_checkpoints_logs_and_config_json_get_0644_under_umask_022(tmp_path, umask):
    pytest.importorskip("torch", reason="the reference trainers need torch")
    pytest.importorskip("mindspore", reason="the MindSpore checkpoint needs mindspore")
    from workbench.reference.config import ModelConfig, TrainConfig
    from workbench.reference.runner import RunSpec, run

    run(RunSpec("megatron", ModelConfig(), TrainConfig(steps=1), tmp_path / "torch", save=("megatron", "hf"),
                grads=True))
    run(RunSpec("mindformers", ModelConfig(), TrainConfig(steps=1), tmp_path / "ms", save=("mindspore",), jit=False))
    hf = tmp_path / "torch" / "hf"
    assert main(["convert", str(hf), str(tmp_path / "llama.ckpt"), "--to", "mindformers"]) == 0
    assert main(["convert", str(hf), str(tmp_path / "sharded"), "--to", "mindformers"]) == 0
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"config.json", "model.safetensors", "model_optim_rng.pt", "mindspore.ckpt", "llama.ckpt",
            "train.log", "latest_checkpointed_iteration.txt"} <= names
    assert any((tmp_path / "sharded").iterdir())           # a folder output (one file or shards plus an index)
    assert {str(path.relative_to(tmp_path)): oct(mode(path)) for path in files if mode(path) != 0o644} == {}


def test_the_umask_decides_the_mode(tmp_path, umask):
    umask(0o027)
    write_text(tmp_path / "a.txt", "a\n", fsync=True)
    assert mode(tmp_path / "a.txt") == 0o640 and (tmp_path / "a.txt").read_text() == "a\n"


# ----------------------------------------------------------------------------- targets

def test_a_symlink_is_followed_and_stays_a_link(tmp_path, capsys):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real.name)
    assert main(checklist_to(link)) == 2
    assert "output file already exists" in one_error_line(capsys) and real.read_text() == "old"
    assert main(checklist_to(link, "--force")) == 0
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert json.loads(real.read_text())["schema"].startswith("workbench.checklist")
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to("created.json")
    assert main(checklist_to(dangling)) == 0
    assert dangling.is_symlink() and json.loads((tmp_path / "created.json").read_text())
    assert not leftovers(tmp_path)


def test_a_fifo_is_written_into_not_replaced(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    try:
        assert main(checklist_to(fifo)) == 0                  # no --force: nothing is replaced
    finally:
        if reader.is_alive():                                 # unblock the reader if the writer never opened
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:                                   # ENXIO: the reader closed meanwhile (it is done)
                pass
        reader.join(10)
    assert json.loads(received[0])["schema"].startswith("workbench.checklist")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not leftovers(tmp_path)


def test_an_open_descriptor_is_written_into_like_a_shell_redirect(tmp_path):
    target = tmp_path / "appended.json"                       # as after `>> appended.json`
    target.write_text("pre\n")
    descriptor = os.open(target, os.O_WRONLY | os.O_APPEND)
    try:
        assert main(checklist_to(f"/dev/fd/{descriptor}")) == 0
    finally:
        os.close(descriptor)
    text = target.read_text()
    assert text.startswith("pre\n{") and json.loads(text[4:])["schema"].startswith("workbench.checklist")
    assert not leftovers(tmp_path)


def test_a_full_device_gives_one_line_and_survives(capsys):
    assert output_kind("/dev/full") == "stream"               # else the test below would rename over the node
    assert main(checklist_to("/dev/full", "--force")) == 2
    assert one_error_line(capsys) == ("workbench: error: /dev/full: no space left on the device "
                                      "(free some space or write to another file system)")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_tensor_sink_streaming_into_a_full_device_reports_it():
    from workbench.tensors.base import TensorMeta
    from workbench.tensors.mindspore_ckpt import MindSporeCkptWriter

    array = np.zeros(1 << 20, np.float32)                     # past any buffer: the write reaches the device
    sink = MindSporeCkptWriter(Path("/dev/full"), [TensorMeta("w", array.shape, "fp32")])
    with pytest.raises(InputError) as raised:
        sink.write("w", array)
    assert str(raised.value).startswith("/dev/full: no space left on the device")


@pytest.mark.parametrize("force", [False, True])
def test_a_folder_is_refused_even_with_force(tmp_path, capsys, force):
    assert main(checklist_to(tmp_path, *(["--force"] if force else []))) == 2
    assert f"{tmp_path}: is a folder" in one_error_line(capsys)


def test_a_socket_and_a_block_device_are_refused(tmp_path):
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(InputError, match="is a socket"):
            check_output(tmp_path / "sock", force=True)
    finally:
        server.close()
    block = next((entry.path for entry in os.scandir("/dev") if stat.S_ISBLK(os.lstat(entry.path).st_mode)), None)
    if block is None:
        pytest.skip("no block device in /dev")
    with pytest.raises(InputError, match="is a block device"):         # refused before anything is opened
        check_output(block, force=True)


def test_an_out_under_a_file_and_a_missing_folder(tmp_path, capsys):
    (tmp_path / "file.txt").write_text("x")
    assert main(checklist_to(tmp_path / "file.txt" / "report.json")) == 2
    assert f"{tmp_path / 'file.txt'} is a file, not a folder" in one_error_line(capsys)
    assert main(checklist_to(tmp_path / "missing" / "report.json")) == 2
    assert f"folder {tmp_path / 'missing'} does not exist (create the folder first)" in one_error_line(capsys)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a 0500 folder anyway")
def test_a_folder_without_write_permission(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert main(checklist_to(locked / "report.json")) == 2
        assert "report.json: permission denied" in one_error_line(capsys)
    finally:
        locked.chmod(0o700)


# ----------------------------------------------------------------------------- failures while writing

@pytest.mark.parametrize("code, problem", [
    (errno.EROFS, "read-only file system"), (errno.ENOSPC, "no space left on the device"),
    (errno.EACCES, "permission denied"), (errno.EDQUOT, "disk quota exceeded")])
def test_a_failed_rename_gives_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch, code, problem):
    # A read-only file system or a full disk cannot be made without root and mounts; os.replace (the
    # writer's last step) is patched to fail as the kernel would, with the temporary file as filename.
    def failing_replace(source, target, **_):
        raise OSError(code, os.strerror(code), os.fspath(source), None, os.fspath(target))

    monkeypatch.setattr(os, "replace", failing_replace)
    out = tmp_path / "report.json"
    assert main(checklist_to(out)) == 2
    assert one_error_line(capsys).startswith(f"workbench: error: {out}: {problem} (")
    assert list(tmp_path.iterdir()) == []


def test_an_exception_mid_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_file(target) as handle:
            handle.write(b"new")
            raise RuntimeError("stop")
    assert target.read_bytes() == b"old" and not leftovers(tmp_path)


def test_convert_verify_refuses_a_stream_before_any_work(tmp_path, capsys):
    fifo = tmp_path / "out.ckpt"
    os.mkfifo(fifo)
    assert main(["convert", str(tmp_path / "not-read"), str(fifo), "--to", "mindformers", "--verify"]) == 2
    assert "--verify re-reads the output" in one_error_line(capsys)
