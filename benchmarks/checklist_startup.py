"""Time `workbench checklist` on the example pair as a whole process (target: <= 1.0 s).

Beside it, in the same run: a bare interpreter (`python -c pass`) and `import torch`, the
cost the checklist must never pay. Prints medians of N runs and the ratios.

    .venv/bin/python benchmarks/checklist_startup.py [--runs 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "checklists" / "examples"
TARGET_SECONDS = 1.0


def installed_like_env(pycache: Path) -> dict[str, str]:
    """The children write and reuse bytecode (under ``pycache``) as an installed package has it, even where
    PYTHONDONTWRITEBYTECODE is set (compiling every module each run would be timed otherwise)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def median_seconds(command: list[str], runs: int, env: dict[str, str]) -> float:
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    times = []                                                   # after one untimed run that fills the caches
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    checklist = [sys.executable, "-m", "workbench", "checklist", str(EXAMPLES / "llama_tiny_megatron.sh"),
                 str(EXAMPLES / "llama_tiny_mindformers.yaml")]
    rows = [("python -c pass", [sys.executable, "-c", "pass"]),
            ("workbench checklist (table)", checklist),
            ("workbench checklist --format json", checklist + ["--format", "json"]),
            ("python -c 'import torch'", [sys.executable, "-c", "import torch"])]
    with tempfile.TemporaryDirectory() as pycache:
        env = installed_like_env(Path(pycache))
        results = {name: median_seconds(command, args.runs, env) for name, command in rows}
    bare = results["python -c pass"]
    print(f"median of {args.runs} runs, whole process")
    for name, seconds in results.items():
        print(f"  {name:36s} {seconds:6.3f} s   {seconds / bare:5.1f}x bare python")
    worst = max(results["workbench checklist (table)"], results["workbench checklist --format json"])
    verdict = "meets" if worst <= TARGET_SECONDS else "MISSES"
    print(f"checklist {worst:.3f} s {verdict} the {TARGET_SECONDS:.1f} s target "
          f"({worst / results[rows[3][0]]:.2f}x the cost of importing torch alone)")


if __name__ == "__main__":
    main()
