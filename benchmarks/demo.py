"""Wall time of `workbench demo` per stage, as a whole process (target: the whole demo <= 180 s on 2 cores).

Runs ``workbench demo --out TMP`` (clean, or ``--fault NAME``) in a fresh interpreter, the way a user runs
it, and prints each stage's seconds (the demo measures them), the whole process's wall time, the ratio to
the target, and the CPU count it ran on.

    .venv/bin/python benchmarks/demo.py [--fault norm_epsilon] [--long-steps 40]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 180.0
ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", help="a fault of the catalog (workbench demo --list-faults)")
    parser.add_argument("--long-steps", type=int, default=None)
    args = parser.parse_args()
    workbench = Path(sys.executable).with_name("workbench")
    with tempfile.TemporaryDirectory() as work:
        command = [str(workbench), "demo", "--out", str(Path(work) / "demo")]
        command += ["--fault", args.fault] if args.fault else []
        command += ["--long-steps", str(args.long_steps)] if args.long_steps else []
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=work)
        wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        print(done.stdout + done.stderr[-3000:])
        return done.returncode
    timing = re.search(r"^time: .*\((.*)\)$", done.stdout, re.MULTILINE)
    print(f"workbench demo{' --fault ' + args.fault if args.fault else ''} on {os.cpu_count()} CPUs "
          f"(verdict: {re.search(r'^verdict: (.*)$', done.stdout, re.MULTILINE).group(1)})")
    for part in (timing.group(1).split(", ") if timing else []):
        name, seconds = part.rsplit(" ", 1)
        print(f"  {name:14} {float(seconds):7.1f} s")
    verdict = "meets" if wall <= TARGET_SECONDS else "MISSES"
    print(f"whole process {wall:.1f} s: {wall / TARGET_SECONDS:.2f} of the {TARGET_SECONDS:.0f} s target ({verdict} it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
