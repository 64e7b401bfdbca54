"""Benchmark: `workbench compare` against `msprobe compare` (mindstudio-probe 26.2.0) on msprobe dumps.

Generates a pair of msprobe dump trees (``step0/proc0/{dump,stack,construct}.json``) with ``--rows`` tensor rows
per side (default 200k), torch naming against MindSpore naming (``benchmarks/msprobe_dumps.py``, streaming).
Then each tool runs in its own process; wall time and peak RSS (``wait4``, measured by a small process in
between so that this one's size never counts) are printed with the ratios
(targets: workbench ≥ 30× faster, ≤ 1/3 of the memory). Then 8 ranks (``step0/rank{0..7}``), each rank's
dump.json of ``--rank-rows`` rows (default: ``--rows``, the size of the dump above, as each rank of a real run
dumps its own operators): `workbench compare --workers 1` against `--workers 2` (target ≥ 1.7×). Then, as
before, ``--rows`` split over the 8 ranks: units of a few tenths of a second, where the start-up that no pool
shares (the interpreter, pandas' import, the report) is a fifth of the run.

Before the ``--workers`` runs it measures what this machine gives two processes at all (:func:`pair_speed_up`):
a CPU-bound loop alone, then in two processes at once. On a virtual machine whose two cores share more than
their names say, that is less than 2× and bounds every ``--workers 2`` ratio printed after it.

    python benchmarks/compare.py                      # 200k rows per side; 8 ranks of 200k rows each
    python benchmarks/compare.py --rows 20000 --skip-msprobe
    python benchmarks/compare.py --skip-msprobe --workers-only --repeat 3 --keep /tmp/bench   # the 1.7x target

Every time is printed with the 1-minute load average when it ended: on a shared machine, ``--workers 2`` can only
show its gain while the second core is free; the CPU seconds printed beside it (the command's and its workers')
do not depend on the other sessions as much: --workers 2's excess over --workers 1 is what the pool costs.
``--keep DIR`` reuses the dumps already generated there. The checkout's bytecode is compiled before the first run
(:func:`compile_checkout`), so that no run measures the compiler.

`workbench compare` is called as ``python -m workbench compare A B``; while that subcommand does not exist
the benchmark says so and measures msprobe alone.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from msprobe_dumps import write_dump  # noqa: E402  (the generator; tests reach it through this module too)

ROOT = Path(__file__).resolve().parents[1]


# Runs one command and reports its own wall time and peak RSS: a child started straight from this process
# would report this process's RSS when that is larger (Linux counts the parent's pages before exec; the
# parent holds msprobe's result rows), so a small Python process in between starts it and measures it.
_RUNNER = """import os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    cpu = usage.ru_utime + usage.ru_stime               # the child's and its waited-for children's (a pool's workers)
    out.write(f"{os.waitstatus_to_exitcode(status)} {time.perf_counter() - start} {usage.ru_maxrss} {cpu}")
"""


def measure(command: list[str], log: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds of it and its workers) of one child process; its output goes to
    ``log`` (msprobe is verbose)."""
    report = log.with_suffix(".measured")
    with open(log, "w") as out:
        subprocess.run([sys.executable, "-c", _RUNNER, str(report), *command], cwd=ROOT, stdout=out,
                       stderr=subprocess.STDOUT, check=True)
    code, seconds, rss, cpu = report.read_text().split()
    if int(code) not in ok:
        raise SystemExit(f"failed: {' '.join(command)}\n{log.read_text(errors='replace')[-2000:]}")
    return float(seconds), int(rss) / 1024, float(cpu)


def msprobe_command() -> list[str]:
    found = shutil.which("msprobe") or str(Path(sys.executable).with_name("msprobe"))
    return [found, "compare"]


def workbench_has_compare() -> bool:
    run = subprocess.run([sys.executable, "-m", "workbench", "compare", "--help"], cwd=ROOT,
                         capture_output=True, text=True)
    return run.returncode == 0


def matched_rows(output: Path) -> tuple[int, int]:
    """(rows with a bench counterpart, rows) of msprobe's result csv."""
    found = sorted(output.glob("compare_result*.csv"))
    if not found:
        return 0, 0
    with open(found[-1], newline="") as handle:
        rows = list(csv.DictReader(handle))
    return sum(row.get("Bench Name", "N/A") != "N/A" for row in rows), len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="tensor rows per side")
    parser.add_argument("--ranks", type=int, default=8, help="ranks of the --workers comparison")
    parser.add_argument("--rank-rows", type=int, help="tensor rows per side of each rank (default: --rows)")
    parser.add_argument("--no-split", action="store_true", help="leave out --rows split over the ranks")
    parser.add_argument("--skip-msprobe", action="store_true")
    parser.add_argument("--workers-only", action="store_true", help="only the --workers 1 against 2 comparison")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of workbench on the 200k rows (the ratio takes their median) and of the --workers pair")
    parser.add_argument("--keep", type=Path, help="write the dumps here and keep them (reused when there)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_compare_"))
    try:
        run(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def generated(folder: Path, key: str) -> bool:
    """True when ``folder`` holds dumps written for ``key`` (rows, ranks) by an earlier run (``--keep``)."""
    marker = folder / ".generated"
    return marker.exists() and marker.read_text() == key


def mark_generated(folder: Path, key: str) -> None:
    (folder / ".generated").write_text(key)


def load() -> str:
    """The 1-minute load average, printed beside every time."""
    return f"load {os.getloadavg()[0]:.1f}"


def compile_checkout() -> None:
    """The checkout's bytecode, written once before any run is measured, as an install writes it: with
    PYTHONDONTWRITEBYTECODE set (as on the benchmark machine) every run would compile the ~85 modules a comparison
    imports again (~0.085 s of CPU), in the serial part of --workers 1 and 2 alike."""
    import compileall

    compileall.compile_dir(ROOT / "workbench", quiet=1)


def run(args, work: Path) -> None:
    compile_checkout()
    if args.workers_only:
        run_workers(args, work)
        return
    golden, target = work / "torch" / "step0", work / "mindspore" / "step0"
    start = time.perf_counter()
    if not generated(work / "torch", str(args.rows)):
        rows = (write_dump(golden / "proc0", "pytorch", args.rows, 1),
                write_dump(target / "proc0", "mindspore", args.rows, 2))
        mark_generated(work / "torch", str(args.rows))
        size = sum(p.stat().st_size for p in work.glob("*/step0/proc0/dump.json")) / 2**20
        print(f"generated {rows[0]:,} torch rows and {rows[1]:,} MindSpore rows ({size:.0f} MiB of dump.json) "
              f"in {time.perf_counter() - start:.1f} s under {work}")
    results = {}
    if not args.skip_msprobe:
        output = work / "msprobe_out"
        results["msprobe compare"] = measure(msprobe_command() + ["-tp", str(target), "-gp", str(golden), "-o",
                                                                  str(output)], work / "msprobe.log")
        matched, total = matched_rows(output)
        print(f"msprobe compare: {results['msprobe compare'][0]:.1f} s, peak RSS {results['msprobe compare'][1]:.0f} MiB"
              f" ({matched:,} of {total:,} rows matched to the torch side, no mapping file)")
    if not workbench_has_compare():
        print("workbench compare: skipped (`python -m workbench compare` does not exist yet in this checkout)")
        return
    command = workbench_command(golden.parent, target.parent, work / "workbench.csv")
    runs = []
    for _ in range(args.repeat):               # the first comes right after msprobe's 1.6 GB run: often the slowest
        (work / "workbench.csv").unlink(missing_ok=True)
        runs.append(measure(command, work / "workbench.log", (0, 1)))
        print(f"workbench compare: {runs[-1][0]:.1f} s, CPU {runs[-1][2]:.1f} s, peak RSS {runs[-1][1]:.0f} MiB ({load()})")
    seconds, rss = statistics.median(run[0] for run in runs), max(run[1] for run in runs)
    if "msprobe compare" in results:
        ms_seconds, ms_rss, _ = results["msprobe compare"]
        first = f"; the first run alone: {ms_seconds / runs[0][0]:.1f}x" if len(runs) > 1 else ""
        print(f"ratios: {ms_seconds / seconds:.1f}x faster (target >= 30x; the median of {len(runs)} run(s){first}), "
              f"{rss / ms_rss:.2f} of msprobe's memory (target <= 0.33; the largest peak)")
    run_workers(args, work)


def workbench_command(golden: Path, target: Path, out: Path, *extra: str) -> list[str]:
    """`workbench compare` with the torch dump as reference (A) and the MindSpore dump as candidate (B)."""
    return [sys.executable, "-m", "workbench", "compare", str(golden), str(target), "--out", str(out), *extra]


def run_workers(args, work: Path) -> None:
    """``--workers 1`` against ``--workers 2`` on ``--ranks`` ranks of ``--rank-rows`` rows each (the target), then on
    ``--rows`` split over them (unless ``--no-split``), after the machine's own two-process speed-up."""
    found = pair_speed_up()
    print(f"this machine: two CPU-bound processes at once run {statistics.median(found):.2f}x as fast as one (the "
          f"median of {', '.join(f'{x:.2f}' for x in found)}): about the most --workers 2 can give here")
    per_rank = args.rank_rows or args.rows
    workers_pairs(args, work, "ranks", per_rank, f"{args.ranks} ranks of {per_rank:,} rows", "target >= 1.7x")
    if not args.no_split and args.rows // args.ranks != per_rank:
        workers_pairs(args, work, "split", args.rows // args.ranks, f"{args.rows:,} rows split over {args.ranks} "
                      "ranks", "target >= 1.7x; small units, where the start-up that no pool shares weighs")


def workers_pairs(args, work: Path, name: str, rows_per_rank: int, title: str, remark: str) -> None:
    """--workers 1 against --workers 2 on ``--ranks`` rank folders of ``rows_per_rank`` rows per side, ``--repeat``
    times (each pair back to back)."""
    torch_ranks, mindspore_ranks = work / f"torch_{name}", work / f"mindspore_{name}"
    key = f"{rows_per_rank} {args.ranks}"
    if not generated(torch_ranks, key):
        start = time.perf_counter()
        for side, framework, seed in ((torch_ranks, "pytorch", 3), (mindspore_ranks, "mindspore", 4)):
            for rank in range(args.ranks):
                write_dump(side / "step0" / f"rank{rank}", framework, rows_per_rank, seed * 100 + rank)
        mark_generated(torch_ranks, key)
        print(f"generated {title} per side in {time.perf_counter() - start:.1f} s")
    ratios = []
    for _ in range(args.repeat):
        timed = {}
        for workers in (1, 2):
            out = work / f"workers{workers}.csv"
            out.unlink(missing_ok=True)
            command = workbench_command(torch_ranks, mindspore_ranks, out, "--workers", str(workers))
            timed[workers] = measure(command, work / f"workers{workers}.log", (0, 1))
            print(f"workbench compare, {title}, --workers {workers}: {timed[workers][0]:.1f} s, "
                  f"CPU {timed[workers][2]:.1f} s, peak RSS {timed[workers][1]:.0f} MiB ({load()})")
        ratios.append(timed[1][0] / timed[2][0])
        print(f"--workers 2 speed-up, {title}: {ratios[-1]:.2f}x ({remark})")
    if len(ratios) > 1:
        print(f"--workers 2 speed-up, {title}, the median of {len(ratios)} pairs: {statistics.median(ratios):.2f}x "
              f"({remark})")


_BURN = "import time\nt = time.perf_counter()\ns = 0\nfor i in range(4_000_000): s += i * i\nprint(time.perf_counter() - t)"


def pair_speed_up(runs: int = 5) -> list[float]:
    """``runs`` speed-ups that two processes give: each 2 × a CPU-bound loop's time alone / the slower of two such
    loops at once, each in its own interpreter."""
    def loops(count: int) -> list[float]:
        started = [subprocess.Popen([sys.executable, "-c", _BURN], stdout=subprocess.PIPE, text=True)
                   for _ in range(count)]
        return [float(process.communicate()[0]) for process in started]

    found = []
    for _ in range(runs):
        alone = loops(1)[0]
        found.append(2 * alone / max(loops(2)))
    return found


if __name__ == "__main__":
    main()
