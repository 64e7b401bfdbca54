"""Log parsing throughput against ``grep -c`` on the same file, in the same run (target: >= 25 %).

1. A Megatron log of --iterations iteration lines (default 200k) as core_v0.12 prints them with MoE
   terms, throughput, num zeros and params norm, with a timer line every 100 iterations.
2. A MindFormers log of --mf-steps steps, each with a local-norm block of --params values (default
   1,000: numpy wraps them over ~200 lines), the step line and the progress line, written by the
   reference writer's formatters.

For each: ``grep -c`` on the message's marker (median of --repeats, page cache warm), then
``read_log`` (median), both as MB/s of wall time and the ratio; the same ratio in CPU time (grep's
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
import ctypes
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
from workbench.logs.logscan import CODES  # noqa: E402
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


def timed(function, repeats: int, children: bool = False) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``function``; CPU of the child processes when ``children``."""
    walls, cpus = [], []
    for _ in range(repeats):
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
    size_mb = path.stat().st_size / 1e6
    grep, grep_cpu = timed(lambda: subprocess.run(["grep", "-c", "-F", marker, str(path)], check=True,
                                                  capture_output=True), repeats, children=True)
    result = {}
    parse, parse_cpu = timed(lambda: result.update(series=read_log(path)), repeats)
    series = result.pop("series")
    return {"file": path.name, "MB": size_mb, "grep MB/s": size_mb / grep, "read_log MB/s": size_mb / parse,
            "ratio": grep / parse, "cpu ratio": grep_cpu / parse_cpu, "rows": len(series.series),
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


class _Timed:
    """A library whose calls are timed into ``spent[label]`` (its functions, called through it)."""

    def __init__(self, lib, spent: dict, label: str):
        self._lib, self._spent, self._label = lib, spent, label

    def __getattr__(self, name):
        function = getattr(self._lib, name)
        return _timer(function, self._spent, self._label) if callable(function) else function


def _timer(function, spent: dict, label: str):
    def timed_call(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - start
    return timed_call


def _timed_chunks(generator, spent: dict):
    """A chunk generator whose own time (reading, counting lines, copying) goes to ``spent``."""
    def timed(*args, **kwargs):
        chunks = generator(*args, **kwargs)
        while True:
            start = time.perf_counter()
            try:
                item = next(chunks)
            except StopIteration:
                return
            finally:
                spent["read chunks"] = spent.get("read chunks", 0.0) + time.perf_counter() - start
            yield item
    return timed


def phases(path: Path) -> str:
    """One more ``read_log`` of ``path`` with its phases timed (wall ms), and the page faults and
    system time of the whole call: where the time goes (one run: expect noise on a shared machine)."""
    from workbench.logs import megatron, megatron_native, mindformers, mindformers_scan, norm_rows

    spent: dict[str, float] = {}
    patches = [(megatron_native, "spans", _timed_chunks(megatron_native.spans, spent)),
               (mindformers, "spans", _timed_chunks(mindformers.spans, spent)),
               (megatron_native, "library", lambda: _Timed(library(), spent, "C scan")),
               (mindformers_scan, "library", lambda: _Timed(mf_library(), spent, "C scan")),
               (megatron, "_slow_line", _timer(megatron._slow_line, spent, "Python lines")),
               (mindformers, "_line", _timer(mindformers._line, spent, "Python lines")),
               (megatron, "_series_frame", _timer(megatron._series_frame, spent, "tables")),
               (mindformers, "norm_frame", _timer(norm_rows.norm_frame, spent, "tables")),
               (mindformers, "typed_frame", _timer(mindformers.typed_frame, spent, "tables"))]
    from workbench.logs.logscan import library, mf_library

    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    try:
        for module, name, replacement in patches:
            setattr(module, name, replacement)
        read_log(path)
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
    total = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    parts = ", ".join(f"{name} {seconds * 1e3:.1f}" for name, seconds in spent.items())
    rest = total - sum(spent.values())
    return (f"phases of {path.name} (ms): {parts}, the rest {rest * 1e3:.1f}; total {total * 1e3:.1f} "
            f"(page faults {after.ru_minflt - before.ru_minflt}, system {1e3 * (after.ru_stime - before.ru_stime):.0f})")


def scan_alone(path: Path, repeats: int) -> str:
    """The compiled Megatron scan alone: each call of ``logscan_megatron`` made by one ``read_log`` is
    repeated ``repeats`` times from the same state (the struct and the code counts restored), the best
    CPU time (this thread's: another job's time on the core is not counted) of each summed; its buffer
    and row arrays are already faulted in from the repeats before."""
    from workbench.logs import megatron_native
    from workbench.logs.logscan import library

    lib, best = library(), []
    if lib is None:
        return "scan alone: the library is not built"

    class Repeated:
        def __getattr__(self, name):
            return getattr(lib, name)

        def logscan_megatron(self, pointer, address, size):
            state = pointer._obj
            saved = ctypes.string_at(ctypes.addressof(state), ctypes.sizeof(state))
            counts_at = ctypes.cast(state.code_rows, ctypes.c_void_p).value
            counts = ctypes.string_at(counts_at, CODES * 8)
            times = []
            for _ in range(repeats):
                ctypes.memmove(ctypes.addressof(state), saved, len(saved))
                ctypes.memmove(counts_at, counts, len(counts))
                start = time.thread_time()
                status = lib.logscan_megatron(pointer, address, size)
                times.append(time.thread_time() - start)
            best.append(min(times))
            return status

    original = megatron_native.library
    megatron_native.library = Repeated
    try:
        rows = len(read_log(path).series)
    finally:
        megatron_native.library = original
    return (f"scan alone of {path.name}: {sum(best) * 1e3:.1f} ms CPU (best of {repeats} per call, {len(best)} "
            f"calls), {sum(best) / max(rows, 1) * 1e9:.1f} ns a field ({rows} fields)")


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
              f"CPU time ratio {row['cpu ratio']:6.1%})  {row['rows']} series rows, {row['local norms']} local "
              f"norms, peak allocated {row['peak MB']:.0f} MB")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; scanner: {scanner()}; "
          f"{said_ahead}")
    for line in said:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
