"""The `workbench` command as a user runs it: exit codes, one-line errors, outputs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS, ROOT
from workbench.cli.main import main


def workbench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "workbench", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def mismatched_pair(tmp_path: Path) -> tuple[Path, Path]:
    """The example pair with a different learning rate on the Megatron side."""
    script = tmp_path / "megatron.sh"
    script.write_text(EXAMPLE_MEGATRON.read_text().replace("--lr 1.0e-3", "--lr 2.0e-3"))
    return script, EXAMPLE_MINDFORMERS


def test_help_lists_subcommands_and_ends_with_examples():
    result = workbench("--help")
    assert result.returncode == 0
    assert "checklist" in result.stdout and result.stdout.rstrip().splitlines()[-1].strip().startswith("workbench")
    sub = workbench("checklist", "--help")
    assert sub.returncode == 0 and "examples:" in sub.stdout and "workbench checklist" in sub.stdout.split("examples:")[1]


def test_version():
    result = workbench("--version")
    assert result.returncode == 0 and result.stdout.startswith("workbench ")


def test_aligned_example_exits_zero_and_prints_table():
    result = workbench("checklist", EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS)
    assert result.returncode == 0, result.stderr
    assert "Network structure" in result.stdout and "0 MISMATCH" in result.stdout


def test_mismatch_exits_one(tmp_path):
    megatron, mindformers = mismatched_pair(tmp_path)
    result = workbench("checklist", megatron, mindformers, "--only", "MISMATCH", "--format", "md")
    assert result.returncode == 1
    assert "| Learning rate |" in result.stdout and "| Hidden size |" not in result.stdout
    assert workbench("checklist", megatron, mindformers).returncode == 1  # the terminal table too


def test_strict_counts_risk(tmp_path):
    yaml_text = EXAMPLE_MINDFORMERS.read_text().replace("seed: 1234", "seed: 7")  # seed: a warning item
    mindformers = tmp_path / "mf.yaml"
    mindformers.write_text(yaml_text)
    assert main(["checklist", str(EXAMPLE_MEGATRON), str(mindformers), "--format", "json"]) == 0
    assert main(["checklist", str(EXAMPLE_MEGATRON), str(mindformers), "--format", "json", "--strict"]) == 1


@pytest.mark.parametrize("args,needle", [
    (("missing.sh", EXAMPLE_MINDFORMERS), "missing.sh: file not found"),
    ((EXAMPLE_MINDFORMERS, EXAMPLE_MINDFORMERS), "this is a MindFormers config"),
    ((EXAMPLE_MEGATRON, EXAMPLE_MEGATRON), "not a MindFormers yaml"),
])
def test_bad_input_is_one_line_exit_two(args, needle):
    result = workbench("checklist", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in result.stderr


def test_neither_framework_says_what_was_detected(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\nworld\n")
    other = tmp_path / "other.yaml"
    other.write_text("foo: 1\nbar: {a: 2}\n")
    first = workbench("checklist", notes, EXAMPLE_MINDFORMERS)
    assert first.returncode == 2 and "detected a text file of 2 lines" in first.stderr
    second = workbench("checklist", EXAMPLE_MEGATRON, other)
    assert second.returncode == 2 and "top-level keys foo, bar" in second.stderr


def test_unresolved_variable_becomes_unknown_naming_it(tmp_path):
    script = tmp_path / "m.sh"
    script.write_text(EXAMPLE_MEGATRON.read_text().replace("--lr 1.0e-3", "--lr ${LR}"))
    result = workbench("checklist", script, EXAMPLE_MINDFORMERS, "--format", "json")
    item = next(i for i in json.loads(result.stdout)["items"] if i["id"] == "learning_rate")
    assert item["verdict"] == "UNKNOWN" and "$LR" in item["message"]


def test_yaml_syntax_error_names_line_and_column(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("model:\n  model_config:\n    hidden_size: [64\n    num_layers: 2\n")
    result = workbench("checklist", EXAMPLE_MEGATRON, broken)
    assert result.returncode == 2
    assert "broken.yaml:" in result.stderr and "YAML syntax error" in result.stderr


def test_debug_shows_traceback():
    result = workbench("--debug", "checklist", "missing.sh", EXAMPLE_MINDFORMERS)
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_out_writes_by_suffix_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "report.json"
    assert workbench("checklist", EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS, "--out", out).returncode == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "workbench.checklist/1" and data["exit_code"] == 0
    again = workbench("checklist", EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS, "--out", out)
    assert again.returncode == 2 and "--force" in again.stderr
    assert workbench("checklist", EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS, "--out", out, "--force").returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temp files left behind


def test_failure_leaves_no_output(tmp_path):
    out = tmp_path / "report.md"
    result = workbench("checklist", "missing.sh", EXAMPLE_MINDFORMERS, "--out", out)
    assert result.returncode == 2 and not out.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize("fmt,marker", [("md", "| Verdict |"), ("html", "<table>"), ("json", '"schema"')])
def test_formats_to_stdout(fmt, marker, capsys):
    assert main(["checklist", str(EXAMPLE_MEGATRON), str(EXAMPLE_MINDFORMERS), "--format", fmt]) == 0
    assert marker in capsys.readouterr().out


def test_plot_lr_writes_png(tmp_path):
    megatron, mindformers = mismatched_pair(tmp_path)
    png = tmp_path / "lr.png"
    assert main(["checklist", str(megatron), str(mindformers), "--format", "json", "--plot-lr", str(png)]) == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_checklist_never_imports_torch_or_mindspore():
    code = ("import sys; from workbench.cli.main import main; "
            f"main(['checklist', {str(EXAMPLE_MEGATRON)!r}, {str(EXAMPLE_MINDFORMERS)!r}, '--format', 'json']); "
            "print(sorted(m for m in ('torch', 'mindspore', 'pandas', 'matplotlib') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_output_into_a_pipe_closed_early_stops_quietly(tmp_path):
    """`workbench checklist ... | head`: the reader has gone; one quiet exit (141, as SIGPIPE), no traceback."""
    process = subprocess.Popen([sys.executable, "-m", "workbench", "checklist", str(EXAMPLE_MEGATRON),
                                str(EXAMPLE_MINDFORMERS), "--format", "json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    process.stdout.close()                                  # the reader leaves before the first byte
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "Exception ignored" not in stderr
