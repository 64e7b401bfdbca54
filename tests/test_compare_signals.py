"""SIGTERM (a batch scheduler) and Ctrl-C while `workbench compare --workers 2` runs its pool, on a real
`python -m workbench`: the workers stop at once, nothing is written, the exit status is 128 + signal."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dump_tables import benchmark_module

from workbench_testing import ROOT

RANKS, ROWS = 4, 160_000                 # rows per side: a unit takes ~0.3-0.5 s (and more under load), so the
                                         # signal, 0.1 s after the worker starts, lands inside the first two


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    bench, root = benchmark_module(), tmp_path_factory.mktemp("signals")
    for side, framework in (("a", "pytorch"), ("b", "mindspore")):
        for rank in range(RANKS):
            bench.write_dump(root / side / "step0" / f"rank{rank}", framework, ROWS // RANKS, rank)
    return root


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "children").read_text()
        except FileNotFoundError:          # a thread that ended since the listing (the scans started ahead)
            continue
        found.update(int(child) for child in text.split())
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"                  # exited, not reaped yet by whoever adopted it


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from Linux's /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_pool_at_once_and_writes_nothing(dumps, tmp_path, signum):
    out = tmp_path / "report.csv"
    command = [sys.executable, "-m", "workbench", "compare", str(dumps / "a"), str(dumps / "b"), "--workers", "2",
               "--out", str(out)]
    # As a terminal's Ctrl-C reaches a foreground job: a job started in the background (a CI runner) inherits
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=_sigint_as_in_a_terminal)
    deadline, workers = time.monotonic() + 60, set()
    while not workers and child.poll() is None and time.monotonic() < deadline:
        workers = _children(child.pid)
        time.sleep(0.02)
    assert len(workers) == 1, "the pool's worker never started (the parent computes units too)"
    time.sleep(0.5)                      # inside the first units, the parent's and the worker's
    child.send_signal(signum)
    start = time.monotonic()
    _, stderr = child.communicate(timeout=60)
    stopped = time.monotonic() - start
    print(f"stopped {stopped:.2f} s after the signal")
    assert child.returncode == 128 + signum and stopped < 3, stderr       # not after the units (10 s and more)
    assert "Traceback" not in stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in workers), "a worker outlived the command"
    assert os.getpid() not in workers
