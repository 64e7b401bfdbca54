"""workbench.process_pool: results in job order from real worker processes; a job's error, a worker that
dies and an error that cannot be pickled each reach the parent as one exception, and no worker outlives
the call."""
from __future__ import annotations

import multiprocessing
import os
import pickle
import time

import pytest

from workbench.errors import InputError
from workbench.process_pool import map_in_processes
from workbench.replay.npy_files import CaptureError


def _square_with_pid(value: int) -> tuple[int, int]:
    return value * value, os.getpid()


def _bad_input(index: int) -> int:
    if index == 2:
        raise InputError("dump.json:3", "expected a list, found 7", "regenerate the dump")
    return index


class _Unpicklable(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")


def _raise_unpicklable(index: int) -> int:
    raise _Unpicklable(index, "more")


def _die(index: int) -> int:
    if index == 1:
        os._exit(7)
    return index


def test_results_come_back_in_job_order_from_the_workers():
    results = map_in_processes(_square_with_pid, [(value,) for value in range(9)], workers=3)
    assert [square for square, _ in results] == [value * value for value in range(9)]
    pids = {pid for _, pid in results}
    assert os.getpid() not in pids and 1 <= len(pids) <= 3
    assert multiprocessing.active_children() == []


def test_an_input_error_reaches_the_parent_whole_with_the_worker_traceback():
    with pytest.raises(InputError) as caught:
        map_in_processes(_bad_input, [(i,) for i in range(4)], workers=2)
    assert (caught.value.where, caught.value.problem, caught.value.fix) == (
        "dump.json:3", "expected a list, found 7", "regenerate the dump")
    assert any("in a worker process" in note and "_bad_input" in note for note in caught.value.__notes__)
    assert multiprocessing.active_children() == []


def test_input_errors_and_their_subclasses_survive_pickling():
    for error in (InputError("a.yaml", "bad", "fix it"), CaptureError("b.npy", "short", "", check="size")):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and again == error and str(again) == str(error)


def test_an_error_that_cannot_be_pickled_arrives_as_its_text():
    with pytest.raises(RuntimeError, match=r"_Unpicklable: [01] and more"):
        map_in_processes(_raise_unpicklable, [(0,), (1,)], workers=2)
    assert multiprocessing.active_children() == []


def test_a_worker_that_dies_is_an_error_naming_its_exit_code():
    with pytest.raises(RuntimeError, match=r"stopped during its job, exit code 7"):
        map_in_processes(_die, [(i,) for i in range(4)], workers=2)
    assert multiprocessing.active_children() == []


class _SlowToUnpickle:
    """A result that takes the parent a while to unpickle, and says when that ended."""

    def __init__(self, started: float):
        self.started = started

    def __reduce__(self):
        return _slow_rebuild, (self.started,)


def _slow_rebuild(started: float) -> tuple[float, float]:
    time.sleep(0.5)
    return started, time.monotonic()


def _started_at(_index: int) -> _SlowToUnpickle:
    return _SlowToUnpickle(time.monotonic())        # CLOCK_MONOTONIC: one clock for every process


def test_a_worker_gets_its_next_job_before_the_parent_unpickles_its_last_result():
    (_, first_unpickled), (second_started, _) = map_in_processes(_started_at, [(0,), (1,)], workers=1)
    assert second_started < first_unpickled
    assert multiprocessing.active_children() == []


def _large(index: int) -> bytes:
    return bytes(range(256)) * (50_000 + index)        # 12.8 MB and more: many reads of the socket each


def test_large_results_arrive_whole_and_in_order():
    results = map_in_processes(_large, [(i,) for i in range(4)], workers=2)
    assert [len(r) for r in results] == [256 * (50_000 + i) for i in range(4)]
    assert all(r == _large(i) for i, r in enumerate(results))


def test_a_message_cut_short_is_the_end_of_its_writer():
    from workbench.process_pool import _read_message, _write_message

    reader, writer = os.pipe()
    try:
        _write_message(writer, b"abc" * 1000)
        os.write(writer, (10).to_bytes(8, "big") + b"short")       # a size, then fewer bytes: the writer died
        os.close(writer)
        assert _read_message(reader) == b"abc" * 1000
        with pytest.raises(EOFError):
            _read_message(reader)
    finally:
        os.close(reader)
