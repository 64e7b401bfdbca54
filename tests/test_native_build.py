"""The optional native libraries: built from their source, never loaded when stale or turned off."""
from __future__ import annotations

import shutil

import pytest

from workbench.native import build, load, library

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")

SOURCE = """
#ifndef WORKBENCH_SOURCE_HASH
#error the build must say which source it compiled
#endif
const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }
int twice(int value) { return 2 * value; }
"""


def _built(tmp_path, name="probe", text=SOURCE):
    source = tmp_path / f"{name}.c"
    source.write_text(text)
    build.compile_library(source)
    return source


def test_a_built_library_loads_and_runs(tmp_path):
    _built(tmp_path)
    loaded = load("probe", tmp_path)
    assert loaded is not None and loaded.twice(21) == 42
    assert not list(tmp_path.glob(".*.part"))


def test_a_library_older_than_its_source_is_not_loaded(tmp_path):
    source = _built(tmp_path, "stale")
    source.write_text(SOURCE + "int thrice(int value) { return 3 * value; }\n")
    assert load("stale", tmp_path) is None


def test_a_missing_library_or_source_is_not_loaded(tmp_path):
    assert load("absent", tmp_path) is None
    source = _built(tmp_path, "orphan")
    source.unlink()
    assert load("orphan", tmp_path) is None


def test_a_failed_compile_raises_with_the_compiler_message_and_leaves_nothing(tmp_path):
    source = tmp_path / "broken.c"
    source.write_text("int broken(void) { return undeclared; }\n")
    with pytest.raises(RuntimeError, match="undeclared"):
        build.compile_library(source)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.c"]


def test_a_missing_compiler_is_reported_not_raised_by_build_all(tmp_path, monkeypatch):
    (tmp_path / "probe.c").write_text(SOURCE)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    built, failed = build.build_all(tmp_path)
    assert built == [] and len(failed) == 1
    assert failed[0].startswith("probe.c: not built, the pure-Python path will be used")


def test_workbench_native_0_turns_every_library_off(monkeypatch):
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    assert library("anything") is None
