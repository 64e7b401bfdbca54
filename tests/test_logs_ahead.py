"""Chunks read on a second thread (``lines.spans(ahead=...)``, ``workbench/logs/ahead.py``) while the
compiled scans run: the same tables, notes, errors and line numbers as read on one thread, at every
chunk seam, with an error in the first chunk or the fifth, in the scan or in the reading thread;
a one-chunk file starts no thread; Ctrl-C and errors leave no thread running."""
from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import workbench.logs.ahead as ahead
import workbench.logs.lines as lines
import workbench.logs.megatron_native as megatron_native
import workbench.logs.mindformers as mindformers
from workbench.errors import InputError
from workbench.logs.formats import load_formats
from workbench.logs.logscan import library, mf_library
from workbench.logs.megatron import read_megatron
from workbench.logs.mindformers import read_mindformers
from workbench.reference.mindformers_log import format_local_norm_message, format_loss_message, line_prefix

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_logs_fastpath import megatron_log, mindformers_log  # noqa: E402
from test_logs_native import assert_same, outcome  # noqa: E402

pytestmark = pytest.mark.skipif(library() is None or mf_library() is None, reason="the compiled log scanners are not built "
                                "(python workbench/native/build.py), or WORKBENCH_NATIVE=0")
READERS = {"megatron": read_megatron, "mindformers": read_mindformers}
SPARE_CORE = ahead.spare_core            # the real gate (the fixture below replaces it for the other tests)


@pytest.fixture(autouse=True)
def read_ahead_from_two_chunks(monkeypatch):
    """Every file of two chunks or more read ahead, whatever the machine's load (``Ahead.worth``)."""
    monkeypatch.setattr(ahead, "MIN_CHUNKS", 2)
    monkeypatch.setattr(ahead, "spare_core", lambda: True)


def reading_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "workbench-read-ahead"]


def one_thread(monkeypatch):
    """``spans`` as the readers call it, without ``ahead``: every chunk read on the calling thread."""
    spans = lines.spans

    def plain(*args, ahead=None, **kwargs):
        return spans(*args, **kwargs)
    for module in (megatron_native, mindformers):
        monkeypatch.setattr(module, "spans", plain)
    return lambda: [monkeypatch.setattr(module, "spans", spans) for module in (megatron_native, mindformers)]


def counted_reads(monkeypatch) -> list[int]:
    """A spy on ``Ahead.read`` (the real one runs): how many reads went through a second thread."""
    calls, read = [], ahead.Ahead.read

    def spied(self, produce):
        calls.append(1)
        return read(self, produce)
    monkeypatch.setattr(ahead.Ahead, "read", spied)
    return calls


def both_ways(monkeypatch, path: Path, fmt: str):
    """The reader's outcome read ahead and on one thread, asserted equal; the first (read ahead)."""
    reader = READERS[fmt]
    threaded = outcome(reader, path, fmt)
    restore = one_thread(monkeypatch)
    try:
        single = outcome(reader, path, fmt)
    finally:
        restore()
    assert_same(threaded, single)
    assert reading_threads() == []
    return threaded


def mindformers_steps(steps: int, params: int = 40, bad_step: int | None = None) -> str:
    prefix, rng = line_prefix(), np.random.default_rng(0)
    out = []
    for step in range(1, steps + 1):
        message = format_local_norm_message([4] * params, rng.random(params, dtype=np.float32))
        if step == bad_step:                                         # one value short of norm_size
            message = message[:-1].rstrip().rsplit(" ", 1)[0] + "]"
        out.append(prefix + message + "\n" + prefix + format_loss_message(1, 1, step, steps, 1.0, 10, 1e-5, 1.0) + "\n")
    return "".join(out)


@pytest.mark.parametrize("chunk", [333, 1000, 4096])
def test_many_chunks_read_ahead_equal_one_thread(tmp_path, monkeypatch, chunk):
    calls = counted_reads(monkeypatch)
    monkeypatch.setattr(lines, "CHUNK", chunk)
    for fmt, data in (("megatron", megatron_log()), ("mindformers", mindformers_log())):
        path = tmp_path / f"{fmt}.log"
        path.write_bytes(data)
        assert len(data) >= 2 * chunk
        got = both_ways(monkeypatch, path, fmt)
        assert not isinstance(got, tuple) and len(got.series) > 0
        assert len(calls) == 1 + (fmt == "mindformers")              # each read ahead (a file of many chunks)


def test_seams_at_every_offset(tmp_path, monkeypatch):
    """Chunk sizes around a record's length put the seam at every place of a line and a block."""
    counted_reads(monkeypatch)
    path = tmp_path / "megatron.log"
    path.write_bytes(megatron_log(final=False))
    mf = tmp_path / "mindformers.log"
    mf.write_text(mindformers_steps(30))
    for chunk in range(2000, 2600, 61):
        monkeypatch.setattr(lines, "CHUNK", chunk)
        both_ways(monkeypatch, path, "megatron")
        both_ways(monkeypatch, mf, "mindformers")


@pytest.mark.parametrize("bad_step", [1, 5, 40])
def test_an_error_in_the_first_or_a_later_chunk_is_the_same(tmp_path, monkeypatch, bad_step):
    monkeypatch.setattr(lines, "CHUNK", 4096)                           # ~4 steps a chunk: step 5 in chunk 2, 40 in ~10
    path = tmp_path / "mf.log"
    path.write_text(mindformers_steps(60, bad_step=bad_step))
    calls = counted_reads(monkeypatch)
    got = both_ways(monkeypatch, path, "mindformers")
    assert calls and isinstance(got, tuple) and got[0] == "error"
    assert got == outcome(read_mindformers, path, "mindformers", fast=False)
    norm_size_lines = [number for number, text in enumerate(path.read_text().split("\n"), 1) if "norm_size:" in text]
    assert f":{norm_size_lines[bad_step - 1]}" in got[1] and "has 39 values but norm_size lists 40" in got[1]


def test_an_error_on_the_reading_thread_comes_after_the_chunks_before_it(tmp_path, monkeypatch):
    """An error while reading chunk 5 (here an OSError put into ``_chunk``, which runs on the reading
    thread: a disk error cannot be made on demand) reaches the caller after chunks 1-4, as on one thread."""
    monkeypatch.setattr(lines, "CHUNK", 4096)
    path = tmp_path / "meg.log"
    path.write_bytes(megatron_log() * 3)
    chunk, calls = lines._chunk, []

    def failing(*args):
        calls.append(1)
        if len(calls) == 5:
            raise OSError(5, "Input/output error")
        return chunk(*args)
    monkeypatch.setattr(lines, "_chunk", failing)
    seen = []
    with pytest.raises(OSError, match="Input/output error"):
        for first, _, _ in lines.spans(path, [], chunk=4096, ahead=ahead.Ahead()):
            seen.append(first)
    assert len(seen) == 4 and reading_threads() == []


def test_a_one_chunk_file_starts_no_thread(tmp_path, monkeypatch):
    started = []
    thread_start = threading.Thread.start

    def spied(self):
        started.append(self.name)
        thread_start(self)
    monkeypatch.setattr(threading.Thread, "start", spied)
    path = tmp_path / "meg.log"
    path.write_bytes(megatron_log())
    mf = tmp_path / "mf.log"
    mf.write_text(mindformers_steps(5))
    assert path.stat().st_size < megatron_native.SCAN_CHUNK
    assert len(read_megatron(path, load_formats()["megatron"]).series) > 0
    assert len(read_mindformers(mf, load_formats()["mindformers"]).local_norms) == 200
    assert "workbench-read-ahead" not in started


def test_small_files_and_busy_machines_read_on_one_thread(tmp_path, monkeypatch):
    """Below ``MIN_CHUNKS`` chunks, or with no core to spare, no thread (``Ahead.worth``)."""
    monkeypatch.setattr(ahead, "MIN_CHUNKS", 8)
    assert ahead.Ahead.worth(8 * 4096, 4096) and not ahead.Ahead.worth(8 * 4096 - 1, 4096)
    monkeypatch.setattr(ahead, "spare_core", lambda: False)
    assert not ahead.Ahead.worth(100 * 4096, 4096)
    calls = counted_reads(monkeypatch)
    monkeypatch.setattr(lines, "CHUNK", 4096)
    path = tmp_path / "meg.log"
    path.write_bytes(megatron_log())
    assert len(read_megatron(path, load_formats()["megatron"]).series) > 0 and calls == []


@pytest.mark.parametrize(("cores", "load", "spare"), [(2, 0.0, True), (2, 1.2, True), (2, 1.5, False),
                                                      (2, 3.0, False), (1, 0.0, False), (16, 14.0, True)])
def test_a_core_is_spare_below_the_cores_minus_a_half(monkeypatch, cores, load, spare):
    """The caller counts in the load: on two cores, a load of 1.2 is the caller and a little more."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert SPARE_CORE() is spare


def test_ctrl_c_stops_and_joins_the_reading_thread(tmp_path, monkeypatch):
    """A real SIGINT while the caller scans chunk 3: KeyboardInterrupt, and no reading thread left."""
    monkeypatch.setattr(lines, "CHUNK", 4096)
    path = tmp_path / "meg.log"
    path.write_bytes(megatron_log() * 4)
    spans, chunks = lines.spans, []

    def interrupted(*args, **kwargs):
        for item in spans(*args, **kwargs):
            chunks.append(item[0])
            if len(chunks) == 3:
                assert reading_threads()                                   # read ahead indeed
                signal.raise_signal(signal.SIGINT)
            yield item
    monkeypatch.setattr(megatron_native, "spans", interrupted)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)   # Python's Ctrl-C (a background
    # job starts with SIGINT ignored, and Python then installs no handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            read_megatron(path, load_formats()["megatron"])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(chunks) == 3 and reading_threads() == []


def test_an_error_in_the_scan_joins_the_reading_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(lines, "CHUNK", 4096)
    path = tmp_path / "mf.log"
    path.write_text(mindformers_steps(60, bad_step=30))
    with pytest.raises(InputError, match="39 values"):
        read_mindformers(path, load_formats()["mindformers"])
    assert reading_threads() == []


def test_fault_in_keeps_every_byte(tmp_path, monkeypatch):
    """Pages faulted in on the reading thread while this thread writes them keep what it wrote (a spy
    on the real ``madvise`` call counts the pieces faulted in)."""
    populate, pieces = ahead._populate(), []
    if populate is None:
        pytest.skip("no MADV_POPULATE_WRITE here (Linux 5.14+)")
    monkeypatch.setattr(ahead, "_POPULATE", lambda address, length: pieces.append(length) or populate(address, length))
    path = tmp_path / "meg.log"
    path.write_bytes(megatron_log() * 20)
    firsts = [first for first, _, _ in lines.spans(path, [], chunk=4096)]
    values, step = np.empty(12 << 20, dtype=np.float64), (12 << 20) // len(firsts)
    reading, written = ahead.Ahead(), 0
    for first, _, _ in lines.spans(path, [], chunk=4096, ahead=reading):
        if not written:
            reading.fault_in((values, len(values)))
        values[written:written + step] = first + np.arange(step)
        written += step
    assert written == step * len(firsts) and pieces
    assert np.array_equal(values[:written], np.concatenate([first + np.arange(step) for first in firsts]))
    reading.fault_in((values, len(values)))                     # after the read: nothing kept, nothing done
    assert not reading._faults


def test_a_line_over_4_mib_is_skipped_the_same_read_ahead(tmp_path, monkeypatch):
    """The skipped line's note comes once every chunk is read, as on one thread; the ring's two
    buffers stay bounded (the line is never held whole)."""
    import tracemalloc

    calls = counted_reads(monkeypatch)
    path = tmp_path / "long.log"
    head, tail = megatron_log().split(b"\n(min", 1)
    path.write_bytes(head + b"\n" + b"x" * (5 << 20) + b"\n(min" + tail)
    tracemalloc.start()
    try:
        got = both_ways(monkeypatch, path, "megatron")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert calls and any("longer than 4 MiB skipped" in note for note in got.notes)
    assert peak < 24 << 20, f"peak {peak >> 20} MiB"
