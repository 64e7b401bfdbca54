"""Run ``function(*job)`` for each job in worker processes, with no threads, so that an error or a signal
stops every worker at once and the program exits at once.

::

    parent ──job──▶ worker 1 ──result──▶ parent ──next job──▶ worker 1 …
           ──job──▶ worker 2 ──result──▶ parent ──next job──▶ worker 2 …

Each worker has one pipe; the parent sends a worker its next job only when it has read the worker's
last result, so neither side ever waits on the other. It sends it as soon as it has the result's bytes, and
only then unpickles them: the worker computes its next job meanwhile instead of waiting (a compared unit's
result takes the parent 12-22 ms to unpickle on an idle machine, 50 ms and more under load, once per unit).
Results travel in a frame of our own (:func:`_write_message`, :func:`_read_message`), read into one buffer of
their size: ``Connection.recv_bytes`` asks ``os.read`` for all the bytes still missing at every chunk of the
socket, which allocates and shrinks a buffer of that size each time, then copies the whole once more (11 MB
messages in a loop: 14-17 ms of the parent's CPU and 30-60 ms of wall each, against 3 ms and 10 ms). ``concurrent.futures.ProcessPoolExecutor`` was
used before: after Ctrl-C or SIGTERM, terminating its workers raced its manager thread ("Bad file
descriptor" tracebacks) and its queue's feeder thread could block the exit for ever (CPython
gh-107219). Here the parent only sends, receives and waits, in its main thread, where a signal's
exception unwinds it; the workers are then terminated and reaped.
"""
from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import signal
import struct
import traceback
from multiprocessing.connection import wait
from multiprocessing.reduction import ForkingPickler
from typing import Callable

STOP_GRACE_S = 5.0
"""How long a terminated worker may take to exit before it is killed."""


def map_in_processes(function: Callable, jobs: list[tuple], workers: int) -> list:
    """``[function(*job) for job in jobs]``, computed by ``workers`` processes; the first error raised by a
    job to reach the parent is raised here (with the worker's traceback as a note) and the other workers
    are stopped."""
    context = multiprocessing.get_context()
    pool: list = []
    finished = False
    try:
        for _ in range(min(workers, len(jobs))):
            pool.append(_start_worker(context, function))
        results = _distribute(pool, jobs)
        finished = True
        return results
    finally:
        _stop(pool, finished)


STOPPING = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _start_worker(context, function: Callable):
    """One worker and its pipe. The stopping signals are blocked while it starts, so that it never runs
    the parent's handlers (inherited by fork) before :func:`_serve` sets its own; one that reaches the
    parent meanwhile is delivered when the block ends."""
    parent_end, worker_end = context.Pipe()
    process = context.Process(target=_serve, args=(function, worker_end), daemon=True)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    worker_end.close()
    return process, parent_end


def _distribute(pool: list, jobs: list[tuple]) -> list:
    results: list = [None] * len(jobs)
    waiting = iter(range(len(jobs)))
    busy: dict = {}                                   # connection → (index of its job, process)
    for process, connection in pool:
        _send_next(connection, process, waiting, jobs, busy)
    while busy:
        for connection in wait(list(busy)):
            index, process = busy.pop(connection)
            data = _received(connection, process)
            _send_next(connection, process, waiting, jobs, busy)
            results[index] = _value(data)
    return results


def _send_next(connection, process, waiting, jobs: list[tuple], busy: dict) -> None:
    index = next(waiting, None)
    if index is not None:
        connection.send(jobs[index])
        busy[connection] = (index, process)


def _received(connection, process) -> bytearray:
    """A worker's pickled outcome, read whole (not unpickled yet)."""
    try:
        return _read_message(connection.fileno())
    except EOFError:
        process.join(STOP_GRACE_S)
        raise RuntimeError(f"a worker process (pid {process.pid}) stopped during its job, exit code "
                           f"{process.exitcode}; run with --workers 1 to see the error") from None


_SIZE = struct.Struct("!Q")


def _write_message(descriptor: int, data) -> None:
    """``data`` (bytes-like) after its size, written whole to the descriptor."""
    view = memoryview(data).cast("B")
    for piece in (memoryview(_SIZE.pack(view.nbytes)), view):
        while piece:
            piece = piece[os.write(descriptor, piece):]


def _read_message(descriptor: int) -> bytearray:
    """What :func:`_write_message` wrote, read into one buffer; EOFError when the writer went away."""
    raw = io.FileIO(descriptor, closefd=False)
    size, = _SIZE.unpack(_read_exactly(raw, _SIZE.size))
    return _read_exactly(raw, size)


def _read_exactly(raw, size: int) -> bytearray:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        count = raw.readinto(view[got:])
        if not count:
            raise EOFError
        got += count
    return buffer


def _value(data: bytearray):
    """The result in a worker's outcome, or its error raised here."""
    outcome, value, remote = pickle.loads(data)
    if outcome == "error":
        value.add_note(f"in a worker process:\n{remote}")
        raise value
    return value


def _serve(function: Callable, connection) -> None:
    """A worker: jobs in, results out, until the parent sends None or goes away. Ctrl-C reaches the whole
    process group; only the parent acts on it (it terminates the workers); SIGTERM kills a worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)         # not the parent's handler, inherited by fork
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
    while True:
        try:
            job = connection.recv()
        except EOFError:
            return
        if job is None:
            return
        _write_message(connection.fileno(), ForkingPickler.dumps(_outcome(function, job)))


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
        if finished:
            connection.send(None)
        else:
            process.terminate()
    for process, connection in pool:
        process.join(STOP_GRACE_S)
        if process.is_alive():
            process.kill()
            process.join()
        connection.close()
