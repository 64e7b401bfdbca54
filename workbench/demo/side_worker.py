"""``python -m workbench.demo.side_worker PLAN_DIR WORK_DIR FAULT RUN...``: the MindSpore side's runs of a demo
in a process of its own (MindSpore imported and each graph compiled once per run), while the demo runs the
torch side in its own process, as two clusters would. FAULT is a catalog name or ``-``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TIMEOUT_S = 1800


def start_side(plan_dir: Path, work: Path, fault: str | None, runs: tuple[str, ...]):
    log = (work / "mindformers_runs.log").open("w")
    command = [sys.executable, "-m", "workbench.demo.side_worker", str(plan_dir), str(work), fault or "-", *runs]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    return process, log


def wait_side(worker) -> None:
    """Wait for the MindSpore side; a failure is one InputError naming its log (the log's last line in it)."""
    from ..errors import InputError
    from .dumps import wait_worker

    process, log = worker
    code = wait_worker(process, log, TIMEOUT_S)
    if code:
        lines = Path(log.name).read_text(errors="replace").strip().splitlines()
        raise InputError(log.name, f"the MindSpore side's runs failed (exit {code}): {lines[-1] if lines else ''}",
                         "see the log")


def run_mindspore_side(plan_dir: str, work: str, fault: str, names: list[str]) -> None:
    from ..align.plan import read_plan
    from ..errors import InputError
    from .catalog import find_fault
    from .run import _Runs

    side = _Runs(read_plan(plan_dir), Path(work), find_fault(fault) if fault != "-" else None)
    for name in names:
        side.run_side(name, "mindformers")
    if "step12" in names and "mindformers_injected" in side.plan.artifacts:
        try:
            side.run_injected()
        except InputError as error:       # e.g. a padded vocabulary the reference's gradients do not fit
            print(f"step-2 injection skipped: {error}", flush=True)


if __name__ == "__main__":
    run_mindspore_side(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
