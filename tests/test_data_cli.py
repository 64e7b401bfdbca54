"""`workbench data verify|show|diff`: exit codes 0 / 1 / 2, one-line errors, help with examples."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from workbench.cli.main import main
from workbench.replay.capture import BatchCapture
from workbench_testing import ROOT


def capture(root: Path, steps=(0, 1), dp=2, micro=2) -> Path:
    for rank in range(dp):
        with BatchCapture(root, dp_rank=rank, dp_world=dp, micro_batches=micro) as writer:
            for step in steps:
                for micro_batch in range(micro):
                    text = np.arange(2 * 9).reshape(2, 9) + 10 * step + 3 * rank + micro_batch
                    writer.record(step, text[:, :-1], text[:, 1:], np.ones((2, 8), np.float32))
    return root


def workbench(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def test_verify_exit_codes(tmp_path, capsys):
    root = capture(tmp_path / "cap")
    assert main(["data", "verify", str(root), "--vocab-size", "100"]) == 0
    out = capsys.readouterr().out
    assert "layout workbench, 2 step(s) (0-1), dp_world 2, 8 micro-batch(es) read" in out
    assert main(["data", "verify", str(root), "--vocab-size", "20"]) == 1
    out = capsys.readouterr().out
    assert "token_range" in out and "outside [0, 20)" in out
    assert main(["data", "verify", str(root), "--format", "json"]) == 0
    assert '"ok": true' in capsys.readouterr().out


def test_show_formats(tmp_path, capsys):
    root = capture(tmp_path / "cap")
    assert main(["data", "show", str(root), "--step", "1", "--rank", "1", "--micro-batch", "1", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "sample,position,token,label,loss_mask" and lines[1] == "0,0,14,15,1.0" and len(lines) == 17
    assert main(["data", "show", str(root), "--step", "0", "--rank", "0", "--format", "md"]) == 0
    assert "| sample | position | token | label | loss_mask |" in capsys.readouterr().out


def test_diff_reports_the_first_difference(tmp_path, capsys):
    a, b = capture(tmp_path / "a"), capture(tmp_path / "b", steps=(0, 1, 2))
    target = b / "step_1" / "rank_0" / "tokens.npy"
    tokens = np.load(target)
    tokens[0, 3] = 99
    np.save(target, tokens)
    assert main(["data", "diff", str(a), str(a)]) == 0
    capsys.readouterr()
    assert main(["data", "diff", str(a), str(b), "--format", "md"]) == 1
    out = capsys.readouterr().out
    assert ("- first difference: step 1, rank 0, micro-batch 0, field tokens, position [0, 3]: "
            "A 13 vs B 99 (differs)") in out.splitlines()
    assert "| 2 |  |  |  | only in B |" in out


def test_bad_input_is_one_line_with_exit_2(tmp_path):
    root = capture(tmp_path / "cap")
    labels = root / "step_1" / "rank_1" / "mb_1" / "labels.npy"
    labels.write_bytes(labels.read_bytes()[:100])
    result = workbench("data", "show", root, "--step", "1", "--rank", "1", "--micro-batch", "1")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and str(labels) in result.stderr and "truncated or corrupt" in result.stderr
    assert main(["data", "show", str(root), "--step", "7", "--rank", "0"]) == 2
    assert main(["data", "verify", str(tmp_path / "nowhere")]) == 2
    assert main(["data", "diff", str(root), str(tmp_path)]) == 2  # not a capture
    assert main(["data", "verify", str(root)]) == 1  # verify lists the corrupt file as a problem


def test_help_ends_with_examples():
    result = workbench("data", "verify", "--help")
    assert result.returncode == 0
    assert result.stdout.rstrip().splitlines()[-1].strip().startswith("workbench data verify")
    for command in ("show", "diff"):
        text = subprocess.run([sys.executable, "-m", "workbench", "data", command, "--help"], capture_output=True,
                              text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
        assert "examples:" in text and text.rstrip().splitlines()[-1].strip().startswith(f"workbench data {command}")
