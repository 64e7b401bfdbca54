"""Scans started ahead (``workbench/dumps/msprobe_ahead.py``): a reader that takes one gives what it reads without
one, a changed or vanished file is read (or reported) afresh, and nothing outlives the block."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from dump_tables import benchmark_module
import pandas as pd
import pytest

from workbench.dumps import msprobe_ahead, msprobe_scan
from workbench.dumps.compare_run import CompareOptions, compare_dumps
from workbench.dumps.formats import load_dump_formats
from workbench.dumps.readers_msprobe import read_msprobe
from workbench.errors import InputError
from workbench.native import library

pytestmark = pytest.mark.skipif(library("dumpscan") is None,
                                reason="the dumpscan library is not built (python workbench/native/build.py)")


def _write(folder: Path, framework: str = "pytorch", rows: int = 400, seed: int = 3) -> Path:
    benchmark_module().write_dump(folder, framework, rows, seed)
    return folder / "dump.json"


@pytest.fixture
def scans(monkeypatch):
    """Every PendingScan made, and whether the reader's was one started ahead."""
    made, results = [], []
    init, result = msprobe_scan.PendingScan.__init__, msprobe_scan.PendingScan.result
    monkeypatch.setattr(msprobe_scan.PendingScan, "__init__",
                        lambda self, *a, **k: made.append(self) or init(self, *a, **k))
    monkeypatch.setattr(msprobe_scan.PendingScan, "result",
                        lambda self, *a: results.append(self) or result(self, *a))
    return made, results


def test_taken_scan_reads_the_same_table(tmp_path, scans):
    path = _write(tmp_path / "rank0")
    fmt = load_dump_formats()
    alone = read_msprobe(path.parent, "A", fmt)
    made, results = scans
    made.clear()
    with msprobe_ahead.scans_ahead([path], fmt):
        assert len(made) == 1 and made[0].raw is not None
        ahead = read_msprobe(path.parent, "A", fmt)
        assert msprobe_ahead._AHEAD == {}                    # taken
    assert len(made) == 1 and results[-1] is made[0]         # the reader used the started scan, made no other
    pd.testing.assert_frame_equal(alone, ahead, check_exact=True)


def test_file_changed_after_the_start_is_read_afresh(tmp_path, scans):
    path = _write(tmp_path / "rank0", rows=300, seed=1)
    fmt = load_dump_formats()
    made, results = scans
    with msprobe_ahead.scans_ahead([path], fmt):
        started = made[-1]
        replacement = _write(tmp_path / "other", rows=500, seed=2)
        os.replace(replacement, path)                        # a new inode under the same name
        table = read_msprobe(path.parent, "A", fmt)
    assert results[-1] is not started and len(made) == 2
    os.replace(path, replacement)
    expected = read_msprobe(replacement.parent, "A", fmt)
    assert len(table) == len(expected) and table["name"].tolist() == expected["name"].tolist()


def test_vanished_file_is_reported_by_the_reader(tmp_path, scans):
    path = _write(tmp_path / "rank0")
    fmt = load_dump_formats()
    with msprobe_ahead.scans_ahead([path, tmp_path / "never" / "dump.json"], fmt):
        assert list(msprobe_ahead._AHEAD) == [str(path)]       # no scan for a missing file, no error here
        path.unlink()
        with pytest.raises(InputError) as raised:
            read_msprobe(path.parent, "A", fmt)
    assert "dump.json" in str(raised.value) and "\n" not in str(raised.value)
    assert msprobe_ahead._AHEAD == {}


def test_truncated_file_gives_the_readers_error(tmp_path):
    path = _write(tmp_path / "rank0")
    path.write_bytes(path.read_bytes()[:-200])
    fmt = load_dump_formats()
    with pytest.raises(InputError) as alone:
        read_msprobe(path.parent, "A", fmt)
    with msprobe_ahead.scans_ahead([path], fmt), pytest.raises(InputError) as ahead:
        read_msprobe(path.parent, "A", fmt)
    assert str(ahead.value) == str(alone.value) and str(path) in str(alone.value)


def test_other_formats_do_not_take_it(tmp_path, scans):
    path = _write(tmp_path / "rank0")
    fmt = load_dump_formats()
    other = dataclasses.replace(fmt)                         # equal, but not the formats the scan was started with
    made, results = scans
    with msprobe_ahead.scans_ahead([path], fmt):
        read_msprobe(path.parent, "A", other)
        assert results[-1] is not made[0]
    assert msprobe_ahead._AHEAD == {}


def test_block_end_drops_untaken_scans(tmp_path):
    path = _write(tmp_path / "rank0")
    fmt = load_dump_formats()
    with msprobe_ahead.scans_ahead([path], fmt):
        pending = msprobe_ahead._AHEAD[str(path)][2]
        msprobe_ahead.settle()
        assert not pending.thread.is_alive() and str(path) in msprobe_ahead._AHEAD
    assert msprobe_ahead._AHEAD == {}


@pytest.mark.parametrize("workers", [1, 2])
def test_compare_with_scans_ahead_matches_without(tmp_path, monkeypatch, workers):
    """The first unit's scans start before the modules import, and a pool forks after they settle: the report is
    the one of a comparison with no scan ahead."""
    roots = {}
    for framework in ("pytorch", "mindspore"):
        for rank in range(3):
            _write(tmp_path / framework / f"rank{rank}", framework, 300, rank)
        roots[framework] = tmp_path / framework
    options = CompareOptions(workers=workers)
    ahead = compare_dumps(roots["pytorch"], roots["mindspore"], options)
    monkeypatch.setattr(msprobe_ahead, "start", lambda paths, fmt: None)
    plain = compare_dumps(roots["pytorch"], roots["mindspore"], options)
    pd.testing.assert_frame_equal(ahead.main_table, plain.main_table, check_exact=True)
    assert ahead.summary == plain.summary and ahead.exit_code == plain.exit_code and msprobe_ahead._AHEAD == {}
