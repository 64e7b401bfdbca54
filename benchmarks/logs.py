"""Log parsing throughput against ``grep -c`` on the same file, in the same run (target: >= 25 %).

1. A Megatron log of --iterations iteration lines (default 200k) as core_v0.12 prints them with MoE
   terms, throughput, num zeros and params norm, with a timer line every 100 iterations.
2. A MindFormers log of --mf-steps steps, each with a local-norm block of --params values (default
   1,000: numpy wraps them over ~200 lines), the step line and the progress line, written by the
   reference writer's formatters.

For each: ``grep -c`` on the message's marker (median of --repeats, page cache warm), then
``read_log``: the process's first read of the file (printed apart: it imports the format's reader,
loads its YAML and faults in fresh memory), then the median of --repeats reads after it (the table of the read before
freed untimed, as a program reading one log holds one table), both as MB/s of wall time and the ratio
(the verdict is the median's: parse throughput, warm like grep's); the same ratio in CPU time (grep's
from RUSAGE_CHILDREN), which other processes on a shared machine disturb far less; the peak of the
memory Python and numpy allocate while reading (tracemalloc, one more untimed run) against the file's
size; and the peak RSS of the process (ru_maxrss).

With ``--scan-alone N``, the compiled Megatron scan on its own (each call the best of N, CPU time,
buffer and arrays already faulted in): the C code's own cost, apart from page faults and the load.
With ``--phases``, one more read of each file with the time of its phases inside ``read_log`` (reading
chunks, the compiled scan, lines read in Python, building the tables) and its page faults.
With ``--ahead on|off`` the chunks are read on a second thread (``workbench/logs/ahead.py``) for every
file of two chunks or more, or never; ``auto`` (default) is what ``read_log`` does: 8 chunks or more,
and only when the 1-minute load leaves a core to spare (the load is printed).
With ``--floors``, also what the unavoidable pieces of any Python/numpy reader cost on the Megatron
file in the same run: reading it in chunks and splitting the lines, parsing its numbers exactly
(``fastnum``), building its row table from ready arrays — each against the 25 % budget. The compiled
scanner (``workbench/native/logscan.c``) is used when built; ``WORKBENCH_NATIVE=0`` measures the
Python/numpy path instead.

    .venv/bin/python benchmarks/logs.py [--iterations 200000] [--mf-steps 300] [--params 1000] [--floors]
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.logs import read_log  # noqa: E402
from workbench.reference.mindformers_log import (format_local_norm_message, format_loss_message,  # noqa: E402
                                                 format_progress_message, line_prefix)

TARGET = 0.25


def write_megatron(path: Path, iterations: int) -> None:
    rng = np.random.default_rng(0)
    losses = 10.0 * np.exp(-np.arange(iterations) / iterations) + rng.normal(0, 0.01, iterations)
    with open(path, "w") as handle:
        for i in range(1, iterations + 1):
            handle.write(
                f" [2025-01-01 12:00:00] iteration {i:8d}/{iterations:8d} | consumed samples: {i * 512:12d} | "
                f"elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 123.4 | "
                f"learning rate: {1e-5 * (1 - i / iterations):.6E} | global batch size:   512 | "
                f"lm loss: {losses[i - 1]:.6E} | load_balancing_loss: 1.012345E-02 | loss scale: 1.0 | "
                f"grad norm: {1 + losses[i - 1] / 10:.3f} | num zeros: 0 | params norm: 123.456 | "
                f"number of skipped iterations:   0 | number of nan iterations:   0 |\n")
            if i % 100 == 0:
                handle.write(f"(min, max) time across ranks (ms):\n    forward-backward ...: ({i}.1, {i}.2)\n")


def write_mindformers(path: Path, steps: int, params: int) -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(64, 4096, params)
    prefix = line_prefix()
    with open(path, "w") as handle:
        for step in range(1, steps + 1):
            norms = rng.random(params, dtype=np.float32) * 1e-3
            handle.write(prefix + format_local_norm_message(sizes, norms) + "\n")
            handle.write(prefix + format_loss_message(1, 1, step, steps, 5.0 - step / steps, 1000, 1e-5, 1.5) + "\n")
            handle.write(prefix + format_progress_message(100 * step / steps, 10.0, steps - step) + "\n")


def timed(function, repeats: int, children: bool = False, before=None) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``function``; CPU of the child processes when ``children``;
    ``before()`` is called before each run, untimed."""
    walls, cpus = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        start, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime if children
                    else time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def peak_traced(function) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def compare(path: Path, marker: str, repeats: int) -> dict:
    """grep's and read_log's throughput on ``path``: read_log's first read in this process apart (it
    imports the format's reader and loads its YAML, and its memory is fresh), then the median of
    ``repeats`` reads after it, as grep's is the median of runs on a warm page cache."""
    size_mb = path.stat().st_size / 1e6
    grep, grep_cpu = timed(lambda: subprocess.run(["grep", "-c", "-F", marker, str(path)], check=True,
                                                  capture_output=True), repeats, children=True)
    result = {}
    first = timed(lambda: result.update(series=read_log(path)), 1)[0]
    parse, parse_cpu = timed(lambda: result.update(series=read_log(path)), repeats, before=result.clear)
    series = result.pop("series")
    return {"file": path.name, "MB": size_mb, "grep MB/s": size_mb / grep, "read_log MB/s": size_mb / parse,
            "ratio": grep / parse, "cpu ratio": grep_cpu / parse_cpu, "first MB/s": size_mb / first,
            "first ratio": grep / first, "rows": len(series.series),
            "local norms": len(series.local_norms), "peak MB": peak_traced(lambda: read_log(path)) / 1e6}


def floors(path: Path, repeats: int) -> list[str]:
    """The CPU time of the pieces every reader pays (module doc), beside grep's in the same run."""
    from workbench.logs.fastnum import token_floats
    from workbench.logs.lines import chunks
    from workbench.logs.megatron import _series_frame

    grep = timed(lambda: subprocess.run(["grep", "-c", "-F", "iteration", str(path)], check=True,
                                        capture_output=True), repeats, children=True)[1]
    rows = read_log(path).series
    text = b" ".join([b"1.000126E+01"] * len(rows))
    count = len(rows) // 13
    parts = [(f"metric{k}", b"key", np.arange(count), np.ones(count), np.arange(count) * 2 + 1, np.full(count, -1))
             for k in range(13)]
    pieces = {"read + split lines": lambda: [data.split(b"\n") for _, data in chunks(path, [])],
              f"parse {len(rows)} numbers": lambda: token_floats(text, len(rows)),
              f"row table of {13 * count} rows": lambda: _series_frame("run", parts)}
    said = [f"floors on {path.name}: grep -c CPU {grep * 1e3:.0f} ms, 25 % budget {4 * grep * 1e3:.0f} ms"]
    for name, function in pieces.items():
        said.append(f"  {name:28s} CPU {timed(function, repeats)[1] * 1e3:7.0f} ms")
    return said


def read_ahead(mode: str) -> str:
    """Sets the second thread's use (``--ahead``); what it is, with the load now."""
    import os

    from workbench.logs import ahead

    if mode != "auto":
        ahead.MIN_CHUNKS = 2
        ahead.spare_core = (lambda: True) if mode == "on" else (lambda: False)
    load = os.getloadavg()[0]
    return f"read ahead: {mode} (spare core now: {ahead.spare_core()}, 1-minute load {load:.2f})"


def scanner() -> str:
    from workbench.logs.logscan import library

    return "compiled (workbench/native/logscan.c, mfscan.c)" if library() is not None else \
        "Python/numpy (WORKBENCH_NATIVE=0, or the library is not built: python workbench/native/build.py)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=200_000)
    parser.add_argument("--mf-steps", type=int, default=300)
    parser.add_argument("--params", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--floors", action="store_true", help="also time the pieces every reader pays")
    parser.add_argument("--phases", action="store_true", help="also time the phases inside read_log (one run each)")
    parser.add_argument("--scan-alone", type=int, default=0, metavar="N",
                        help="also time the compiled Megatron scan alone, each call the best of N (pre-faulted)")
    parser.add_argument("--ahead", choices=("auto", "on", "off"), default="auto",
                        help="read chunks on a second thread: as read_log decides, always, or never")
    args = parser.parse_args(argv)
    from logs_phases import phases, scan_alone            # beside this file (a script's folder is on the path)
    said_ahead = read_ahead(args.ahead)
    with tempfile.TemporaryDirectory() as folder:
        megatron, mindformers = Path(folder) / "megatron.log", Path(folder) / "mindformers.log"
        write_megatron(megatron, args.iterations)
        write_mindformers(mindformers, args.mf_steps, args.params)
        rows = [compare(megatron, "iteration", args.repeats), compare(mindformers, "Epoch:[", args.repeats)]
        said = floors(megatron, args.repeats) if args.floors else []
        said += [phases(megatron), phases(mindformers)] if args.phases else []
        said += [scan_alone(megatron, args.scan_alone)] if args.scan_alone > 0 else []
    for row in rows:
        verdict = "meets" if row["ratio"] >= TARGET else "below"
        print(f"{row['file']:16s} {row['MB']:8.1f} MB  grep -c {row['grep MB/s']:8.1f} MB/s  read_log "
              f"{row['read_log MB/s']:7.1f} MB/s  ratio {row['ratio']:6.1%} ({verdict} the {TARGET:.0%} target; "
              f"CPU time ratio {row['cpu ratio']:6.1%}; the process's first read {row['first MB/s']:7.1f} MB/s, "
              f"{row['first ratio']:6.1%})  {row['rows']} series rows, {row['local norms']} local "
              f"norms, peak allocated {row['peak MB']:.0f} MB")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; scanner: {scanner()}; "
          f"{said_ahead}")
    for line in said:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
