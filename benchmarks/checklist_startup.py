"""Time `workbench checklist` on the example pair as a whole process (target: <= 1.0 s).

Beside it, in the same run: a bare interpreter (`python -c pass`) and `import torch`, the
cost the checklist must never pay. Prints medians of N runs and the ratios.

    .venv/bin/python benchmarks/checklist_startup.py [--runs 7]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "checklists" / "examples"
TARGET_SECONDS = 1.0


def median_seconds(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
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
    results = {name: median_seconds(command, args.runs) for name, command in rows}
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
