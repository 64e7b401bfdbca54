"""The wheel carries the knowledge bases and finds them without a checkout."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from workbench_testing import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    pytest.importorskip("hatchling", reason="hatchling (test extra) builds the wheel")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    return next(out.glob("workbench-*.whl"))


def test_wheel_ships_knowledge_and_console_script(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "workbench/_knowledge/checklists/keys.yaml" in names
    assert "workbench/_knowledge/checklists/examples/llama_tiny_megatron.sh" in names
    assert any(name.startswith("workbench/_knowledge/converters/") for name in names)
    assert any(name.startswith("workbench/_knowledge/datasets/") for name in names)
    assert "workbench/report/templates/result.html.j2" in names      # the HTML reports render from an install
    assert not any(name.startswith("datasets/") for name in names)  # never a top-level `datasets` package
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    assert "workbench = workbench.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_runs_the_checklist_from_its_own_knowledge(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    examples = site / "workbench" / "_knowledge" / "checklists" / "examples"
    code = ("import sys; from workbench.knowledge import knowledge_dir; from workbench.cli.main import main; "
            "print(knowledge_dir('checklists')); "
            f"sys.exit(main(['checklist', {str(examples / 'llama_tiny_megatron.sh')!r}, "
            f"{str(examples / 'llama_tiny_mindformers.yaml')!r}, '--format', 'json']))")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); " + code],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == str(site / "workbench" / "_knowledge" / "checklists")
