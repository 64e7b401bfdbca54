"""workbench.process_pool: results in job order from the parent and real worker processes; a job's error, a worker that
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


PARENT = os.getpid()
"""The test process: jobs it computes itself (the parent computes its share) wait, so that a worker takes some."""


def _in_worker() -> bool:
    if os.getpid() == PARENT:
        time.sleep(0.3)
        return False
    return True


def _square_with_pid(value: int) -> tuple[int, int]:
    time.sleep(0.05)
    return value * value, os.getpid()


def _bad_input(index: int) -> int:
    if _in_worker():
        raise InputError("dump.json:3", "expected a list, found 7", "regenerate the dump")
    return index


class _Unpicklable(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")


def _raise_unpicklable(index: int) -> int:
    if _in_worker():
        raise _Unpicklable(index, "more")
    return index


def _die(index: int) -> int:
    if _in_worker():
        os._exit(7)
    return index


def _fail_in_the_parent(index: int) -> int:
    if os.getpid() == PARENT:
        raise InputError("dump.json:9", "bad", "fix it")
    time.sleep(0.3)
    return index


def test_results_come_back_in_job_order_from_the_parent_and_the_workers():
    results = map_in_processes(_square_with_pid, [(value,) for value in range(9)], workers=3)
    assert [square for square, _ in results] == [value * value for value in range(9)]
    pids = {pid for _, pid in results}
    assert 2 <= len(pids) <= 3                       # the parent and two workers share the jobs
    assert multiprocessing.active_children() == []


def test_an_input_error_reaches_the_parent_whole_with_the_worker_traceback():
    with pytest.raises(InputError) as caught:
        map_in_processes(_bad_input, [(i,) for i in range(4)], workers=2)
    assert (caught.value.where, caught.value.problem, caught.value.fix) == (
        "dump.json:3", "expected a list, found 7", "regenerate the dump")
    assert any("in a worker process" in note and "_bad_input" in note for note in caught.value.__notes__)
    assert multiprocessing.active_children() == []


def test_an_error_in_the_parents_own_job_stops_the_workers():
    with pytest.raises(InputError, match="bad"):
        map_in_processes(_fail_in_the_parent, [(i,) for i in range(4)], workers=2)
    assert multiprocessing.active_children() == []


def test_input_errors_and_their_subclasses_survive_pickling():
    for error in (InputError("a.yaml", "bad", "fix it"), CaptureError("b.npy", "short", "", check="size")):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and again == error and str(again) == str(error)


def test_an_error_that_cannot_be_pickled_arrives_as_its_text():
    with pytest.raises(RuntimeError, match=r"_Unpicklable: [0-3] and more"):
        map_in_processes(_raise_unpicklable, [(0,), (1,), (2,), (3,)], workers=2)
    assert multiprocessing.active_children() == []


def test_a_worker_that_dies_is_an_error_naming_its_exit_code():
    with pytest.raises(RuntimeError, match=r"stopped during its job, exit code 7"):
        map_in_processes(_die, [(i,) for i in range(4)], workers=2)
    assert multiprocessing.active_children() == []


def _ended_at(index: int) -> tuple[int, float, bytes]:
    """A job that takes the parent a second and a worker no time, with a result far larger than a socket holds."""
    if os.getpid() == PARENT:
        time.sleep(1.0)
    return os.getpid(), time.monotonic(), bytes(4 << 20)         # CLOCK_MONOTONIC: one clock for every process


def test_a_worker_never_waits_for_the_parent_inside_its_own_job():
    results = map_in_processes(_ended_at, [(i,) for i in range(6)], workers=2)
    parent_ended = max(ended for pid, ended, _ in results if pid == PARENT)
    in_worker = [ended for pid, ended, _ in results if pid != PARENT]
    assert len(in_worker) == 5 and max(in_worker) < parent_ended     # its 20 MB went out while the parent slept
    assert multiprocessing.active_children() == []


def _large(index: int) -> bytes:
    return bytes(range(256)) * (50_000 + index)        # 12.8 MB and more: many reads of the socket each


def test_large_results_arrive_whole_and_in_order():
    results = map_in_processes(_large, [(i,) for i in range(4)], workers=2)
    assert [len(r) for r in results] == [256 * (50_000 + i) for i in range(4)]
    assert all(r == _large(i) for i, r in enumerate(results))


def test_more_jobs_than_the_pipe_of_job_numbers_holds():
    count = 20_000                                    # the pipe holds 16384 numbers: the parent writes the rest later
    results = map_in_processes(_identity, [(i,) for i in range(count)], workers=2)
    assert results == list(range(count))


def _identity(index: int) -> int:
    return index


def test_job_numbers_are_each_taken_once_then_end():
    from workbench.process_pool import JobNumbers

    numbers = JobNumbers(3)
    try:
        assert [numbers.take(writes=True) for _ in range(4)] == [0, 1, 2, None]
    finally:
        numbers.close()


def test_without_memfd_results_travel_in_removed_temporary_files(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the forked worker inherits both
    results = map_in_processes(_ended_at, [(i,) for i in range(3)], workers=2)
    assert [len(data) for _, _, data in results] == [4 << 20] * 3
    assert list(tmp_path.iterdir()) == []


def _kill_the_worker_then_work(index: int) -> int:
    """The parent's last job kills the (idle, numberless) worker: every result is in hand all the same."""
    if os.getpid() == PARENT and index == 2:
        for child in multiprocessing.active_children():
            os.kill(child.pid, 9)
            child.join()
    return index


def test_a_worker_that_died_idle_does_not_fail_a_finished_map():
    import workbench.process_pool as pool

    original = pool.JobNumbers.take

    def parent_first(self, writes):
        return original(self, writes) if writes else None      # a worker leaves every number to the parent

    pool.JobNumbers.take = parent_first       # inherited by the fork
    try:
        assert map_in_processes(_kill_the_worker_then_work, [(i,) for i in range(3)], workers=2) == [0, 1, 2]
    finally:
        pool.JobNumbers.take = original
    assert multiprocessing.active_children() == []
