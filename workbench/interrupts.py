"""SIGTERM and SIGHUP unwind the program like Ctrl-C does, so that partial output is removed.

Batch schedulers (Slurm, Kubernetes, ``timeout``) stop a job with SIGTERM; by default that kills
Python on the spot and leaves the ``.part`` file of an output being written. Inside
:func:`signals_unwind` the signal raises :class:`Terminated` in the main thread instead: it
unwinds through every ``with`` block, :class:`workbench.fileio.AtomicFile` removes its
temporary file, and the CLI exits with ``128 + signal`` (SIGTERM 143, SIGHUP 129; Ctrl-C is
Python's ``KeyboardInterrupt``: 130). The first signal unwinds; a second one of the same kind
kills at once (the default action is restored when the first arrives). A signal that was
ignored when the program started (``nohup``) stays ignored.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

UNWOUND = (signal.SIGTERM, signal.SIGHUP)
"""Signals turned into :class:`Terminated` (SIGINT already raises ``KeyboardInterrupt``)."""


class Terminated(BaseException):
    """A termination signal arrived. A ``BaseException`` (like ``KeyboardInterrupt``), so that
    ``except Exception`` blocks do not swallow it."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum: int, frame) -> None:
    signal.signal(signum, signal.SIG_DFL)          # a second signal kills without unwinding
    raise Terminated(signum)


@contextmanager
def signals_unwind() -> Iterator[None]:
    """Turn :data:`UNWOUND` signals into :class:`Terminated` for the block; the previous handlers
    come back afterwards. Only signals at their default action are taken over; outside the main
    thread (where Python cannot install handlers) nothing changes."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in UNWOUND:
            if signal.getsignal(signum) is signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def exit_code(interruption: BaseException) -> int:
    """The shell's convention, ``128 + signal``: 130 for Ctrl-C, 143 for SIGTERM."""
    if isinstance(interruption, Terminated):
        return interruption.exit_code
    return 128 + signal.SIGINT
