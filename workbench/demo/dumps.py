"""The demo's per-operator dumps: msprobe on step 1 of both sides, each in its own process, both at once."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

WORKER_TIMEOUT_S = 300


def dump_both(runs) -> list[str]:
    """Dump step 1 of both sides into the plan's ``megatron_dump`` / ``mindformers_dump``; notes for the user."""
    from .dump_worker import dump_spec

    if importlib.util.find_spec("msprobe") is None:
        return ["msprobe is not installed: no dumps, the dumps stage is NOT RUN (install the msprobe extra)"]
    jobs = []
    for side, weights, artifact in (("megatron", "megatron_checkpoint", "megatron_dump"),
                                    ("mindformers", "mindformers_checkpoint", "mindformers_dump")):
        model, train = runs.configs("step12", side)
        out = runs.path(artifact)
        out.parent.mkdir(parents=True, exist_ok=True)
        fault = runs.fault.name if runs.fault is not None and side == "mindformers" else None
        spec = dump_spec(runs.work / f"dump_{side}.json", side, model, train, runs.path(weights),
                         runs.work / f"{side}_batches.npz", out, fault)
        jobs.append((side, out, _start(spec, runs.work / f"dump_{side}.log")))
    failures = [_finish(side, process, log) for side, _, (process, log) in jobs]
    failures = [failure for failure in failures if failure]
    if failures:
        from ..errors import InputError

        raise InputError("workbench demo", "an msprobe dump failed: " + "; ".join(failures), "see the log named")
    return []


def _start(spec: Path, log_path: Path):
    log = log_path.open("w")
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    process = subprocess.Popen([sys.executable, "-m", "workbench.demo.dump_worker", str(spec)], stdout=log,
                               stderr=subprocess.STDOUT, cwd=spec.parent, env=env)
    return process, log


def _finish(side: str, process, log) -> str | None:
    try:
        code = process.wait(timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
    log.close()
    return None if code == 0 else f"{side} exit {code} ({Path(log.name)})"
