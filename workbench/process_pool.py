"""Run ``function(*job)`` for each job in ``workers`` processes, the parent and ``workers - 1`` forked ones, with no
threads, so that an error or a signal stops every worker at once and the program exits at once.

::

    job numbers (one pipe) ──▶ parent:   job, job, …    (its results stay where they are)
                           ──▶ worker 1: job, job, …  ──result (an anonymous file)──▶ parent
                           ──▶ worker 2: …

Every process takes its next job number from one pipe (a number is 4 bytes, read whole), so the jobs spread over
the processes as they finish, whatever their speed. The parent computes jobs like the others: it used to be idle
while ``workers`` forked processes ran, except for unpickling their results, which took CPU from the cores they
ran on (``compare --workers 2`` on 2 cores), and every result crossed a pipe; now the parent's share never does.
A worker writes each result into an anonymous file (``memfd``) and sends its descriptor to the parent over its
socket: it never waits for the parent, which may be inside a job of its own, and goes on to its next job at once;
the parent reads the results between its jobs and after its last. An anonymous file is gone with the last
descriptor to it, so a signal leaves nothing behind. ``concurrent.futures.ProcessPoolExecutor`` was used before:
after Ctrl-C or SIGTERM, terminating its workers raced its manager thread ("Bad file descriptor" tracebacks) and
its queue's feeder thread could block the exit for ever (CPython gh-107219). Here the parent computes, receives
and waits in its main thread, where a signal's exception unwinds it; the workers are then terminated and reaped.
"""
from __future__ import annotations

import mmap
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import traceback
from multiprocessing.connection import wait
from multiprocessing.reduction import ForkingPickler
from typing import Callable

STOP_GRACE_S = 5.0
"""How long a terminated worker may take to exit before it is killed."""

STOPPING = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def map_in_processes(function: Callable, jobs: list[tuple], workers: int) -> list:
    """``[function(*job) for job in jobs]``, computed by the parent and ``workers - 1`` forked processes; the first
    error raised by a job to reach the parent is raised here (a worker's with its traceback as a note) and the
    workers are stopped."""
    context = multiprocessing.get_context()
    numbers = JobNumbers(len(jobs))
    pool: list = []
    finished = False
    try:
        for _ in range(min(workers, len(jobs)) - 1):
            pool.append(_start_worker(context, function, jobs, numbers))
        results = _distribute(pool, function, jobs, numbers)
        finished = True
        return results
    finally:
        numbers.close()
        _stop(pool, finished)


class JobNumbers:
    """The numbers 0 … count-1 in a pipe that every process takes from. The parent writes as many as the pipe holds
    (64 KiB: 16384 numbers) and the rest as they are taken, then closes its end, so that a reader of the empty pipe
    gets its end. Both ends are non-blocking (the reading end's mode is shared by every process): a worker waits
    for it to be readable; the parent, which must not wait on a pipe only it can fill, writes more first."""

    NUMBER = struct.Struct("=I")           # 4 bytes <= PIPE_BUF: written and read whole, never split

    def __init__(self, count: int):
        self.reader, self.writer = os.pipe()
        os.set_blocking(self.reader, False)
        os.set_blocking(self.writer, False)
        self.count, self.written = count, 0
        self.fill()

    def fill(self) -> None:
        """Write numbers until the pipe is full or all are written (then the writing end is closed)."""
        while self.writer is not None and self.written < self.count:
            try:
                os.write(self.writer, self.NUMBER.pack(self.written))
            except BlockingIOError:
                return
            self.written += 1
        self.close_writer()

    def take(self, writes: bool) -> int | None:
        """The next job's number, or None when every number is taken. ``writes``: the caller holds the writing
        end (the parent): it tops the pipe up at each take, so that the workers find numbers while it computes,
        and when the pipe runs dry it writes more instead of waiting."""
        while True:
            if writes:
                self.fill()
            try:
                data = os.read(self.reader, self.NUMBER.size)
            except BlockingIOError:
                if not writes:
                    wait([self.reader])
                continue
            return self.NUMBER.unpack(data)[0] if data else None

    def close_writer(self) -> None:
        if self.writer is not None:
            os.close(self.writer)
            self.writer = None

    def close(self) -> None:
        self.close_writer()
        os.close(self.reader)


def _start_worker(context, function: Callable, jobs: list[tuple], numbers: JobNumbers):
    """One worker and its socket. The stopping signals are blocked while it starts, so that it never runs
    the parent's handlers (inherited by fork) before :func:`_serve` sets its own; one that reaches the
    parent meanwhile is delivered when the block ends."""
    parent_end, worker_end = context.Pipe()
    process = context.Process(target=_serve, args=(function, jobs, numbers, worker_end), daemon=True)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    worker_end.close()
    return process, parent_end


def _distribute(pool: list, function: Callable, jobs: list[tuple], numbers: JobNumbers) -> list:
    """The parent's loop: a job of its own, then the results the workers have sent meanwhile, until no number is
    left; then the results still to come."""
    results: list = [None] * len(jobs)
    missing = len(jobs)
    while (index := numbers.take(writes=True)) is not None:
        results[index] = function(*jobs[index])
        missing -= 1
        if missing:                                   # a worker gone once every result is here is no error
            missing -= _collect(pool, results, timeout=0)
    while missing:
        missing -= _collect(pool, results, timeout=None)
    return results


def _collect(pool: list, results: list, timeout: float | None) -> int:
    """The results the workers have sent, each into its place; how many. ``timeout=None`` waits for one at least."""
    processes = {connection: process for process, connection in pool}
    count = 0
    while ready := wait(list(processes), timeout):
        for connection in ready:
            index, value = _received(connection, processes[connection])
            results[index] = value
            count += 1
        timeout = 0
    return count


def _received(connection, process) -> tuple[int, object]:
    """A worker's next (job number, result), or its job's error raised here."""
    with socket.socket(fileno=os.dup(connection.fileno())) as end:
        message, descriptors, _, _ = socket.recv_fds(end, 1, 1)
    if not message or not descriptors:
        process.join(STOP_GRACE_S)
        raise RuntimeError(f"a worker process (pid {process.pid}) stopped during its job, exit code "
                           f"{process.exitcode}; run with --workers 1 to see the error") from None
    try:
        with mmap.mmap(descriptors[0], 0, access=mmap.ACCESS_READ) as data:
            index, outcome, value, remote = pickle.loads(data)
    finally:
        os.close(descriptors[0])
    if outcome == "error":
        value.add_note(f"in a worker process:\n{remote}")
        raise value
    return index, value


def _serve(function: Callable, jobs: list[tuple], numbers: JobNumbers, connection) -> None:
    """A worker: jobs from the numbers' pipe, results to the parent, until no number is left; then it waits for the
    parent's None (or its end). Ctrl-C reaches the whole process group; only the parent acts on it (it terminates
    the workers); SIGTERM kills a worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)         # not the parent's handler, inherited by fork
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
    numbers.close_writer()                            # the parent's: the pipe must end when the parent closes it
    with socket.socket(fileno=os.dup(connection.fileno())) as end:
        while (index := numbers.take(writes=False)) is not None:
            try:
                _send(end, (index, *_outcome(function, jobs[index])))
            except (BrokenPipeError, ConnectionResetError):
                return                                # the parent is gone
    try:
        connection.recv()
    except EOFError:
        pass


def _send(end: socket.socket, message: tuple) -> None:
    """``message`` pickled into an anonymous file whose descriptor goes to the parent: never waits for the parent to
    read. Pickled straight into the file, a frame at a time: ``dumps`` first builds the whole pickle in a growing
    buffer, then it is copied again (31 ms against 20 ms of CPU for a compared unit's 10.9 MB, under load)."""
    descriptor = _anonymous_file()
    try:
        with open(descriptor, "wb", closefd=False) as file:
            ForkingPickler(file).dump(message)
        socket.send_fds(end, [b"r"], [descriptor])
    finally:
        os.close(descriptor)


def _anonymous_file() -> int:
    """A file with no name (``memfd``; where there is none, a temporary file removed at once)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("workbench-result", os.MFD_CLOEXEC)
    import tempfile

    descriptor, path = tempfile.mkstemp(prefix="workbench-result-")
    os.unlink(path)
    return descriptor


def _outcome(function: Callable, job: tuple) -> tuple:
    try:
        return "result", function(*job), None
    except Exception as error:                       # noqa: BLE001 - every error goes to the parent, whole
        remote = traceback.format_exc()
        try:
            pickle.loads(ForkingPickler.dumps(error))
        except Exception:                            # noqa: BLE001 - an error that cannot be pickled and read back
            error = RuntimeError(f"{type(error).__name__}: {error}")
        return "error", error, remote


def _stop(pool: list, finished: bool) -> None:
    """All jobs done: each worker (idle) is told to stop. Failed or interrupted: each is terminated, busy or
    not. Then every worker is reaped, killed if it has not exited after :data:`STOP_GRACE_S`."""
    for process, connection in pool:
        if not finished:
            process.terminate()
            continue
        try:
            connection.send(None)
        except OSError:                               # it died idle, its jobs all done (or none taken): reaped below
            pass
    for process, connection in pool:
        process.join(STOP_GRACE_S)
        if process.is_alive():
            process.kill()
            process.join()
        connection.close()
