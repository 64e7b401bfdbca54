"""The phases of one ``read_log`` and the compiled Megatron scan alone: ``benchmarks/logs.py --phases`` and
``--scan-alone N`` (where the time of a read goes, apart from the load and the page faults).
"""
from __future__ import annotations

import ctypes
import resource
import time
from pathlib import Path

from phase_timer import phase_timer

from workbench.logs import read_log
from workbench.logs.logscan import CODES


class _Timed:
    """A library whose calls are timed into ``spent[label]`` (its functions, called through it)."""

    def __init__(self, lib, spent: dict, label: str):
        self._lib, self._spent, self._label = lib, spent, label

    def __getattr__(self, name):
        function = getattr(self._lib, name)
        return phase_timer(function, self._spent, self._label) if callable(function) else function


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
               (megatron, "_slow_line", phase_timer(megatron._slow_line, spent, "Python lines")),
               (mindformers, "_line", phase_timer(mindformers._line, spent, "Python lines")),
               (megatron, "_series_frame", phase_timer(megatron._series_frame, spent, "tables")),
               (mindformers, "norm_frame", phase_timer(norm_rows.norm_frame, spent, "tables")),
               (mindformers, "typed_frame", phase_timer(mindformers.typed_frame, spent, "tables"))]
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
