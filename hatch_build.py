"""Build hook: compile the optional native scanners (workbench/native/*.c) into the wheel.

A failed compile only warns; workbench then runs its pure-Python paths (same results, slower).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _native_build():
    path = Path(__file__).resolve().parent / "workbench" / "native" / "build.py"
    spec = importlib.util.spec_from_file_location("_workbench_native_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class NativeBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        built, failed = _native_build().build_all()
        for line in failed:
            self.app.display_warning(line)
        if built:
            root = Path(self.root)
            build_data["artifacts"].extend(str(p.relative_to(root)) for p in built)
            if version == "standard":
                build_data["pure_python"] = False
                build_data["infer_tag"] = True
