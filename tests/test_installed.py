"""Whether MindFormers is installed: a folder named ``mindformers`` in the working directory (``align prepare``
writes one beside plan.yaml) is a namespace package to Python, not MindFormers; commands run from there must
not take it for the framework (optim-check imported ``mindformers.core`` from it and crashed)."""
from __future__ import annotations

import importlib.util
import sys

from workbench.installed import mindformers_installed


def test_a_mindformers_folder_in_the_working_directory_is_not_mindformers(tmp_path, monkeypatch):
    real = mindformers_installed()
    (tmp_path / "mindformers").mkdir()
    (tmp_path / "mindformers" / "step12.yaml").write_text("model: {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "mindformers" or m.startswith("mindformers.")]:
        monkeypatch.delitem(sys.modules, name)
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("mindformers")
    assert spec is not None                              # Python does find something ...
    assert mindformers_installed() == real               # ... which is MindFormers only where it is installed
    if not real:
        assert spec.origin is None
