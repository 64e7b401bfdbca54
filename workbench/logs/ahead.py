"""Reading a log's chunks on a second thread while the caller scans the chunk before (``lines.spans``
with ``ahead=``): the compiled scans release the GIL, so reading (the kernel's copy, finding the last
line end, counting line ends) and faulting in the scan's fresh row arrays run on the other core.

    reading = Ahead()
    for first, buffer, size in spans(path, notes, ahead=reading):   # buffer: one of DEPTH, reused
        ...                                         # may call reading.fault_in((array, count), ...)

Memory stays bounded: a ring of ``DEPTH`` buffers (the one scanned, the one read next); the
reading thread takes a buffer only once the caller has asked for the chunk after the one it held.
What it produced comes in file order, an error where it happened (after the chunks before it);
when the caller stops (its own error, Ctrl-C) the thread is told to stop and joined before the
generator returns. While it has no free buffer it faults in the pages the caller asked for
(``madvise(MADV_POPULATE_WRITE)``, Linux 5.14+: the kernel maps the pages writable without changing
a byte, so the scan may be writing them at the same time); elsewhere that is skipped.
"""
from __future__ import annotations

import ctypes
import mmap
import sys
import threading
from collections import deque

DEPTH = 2                        # buffers in the ring: the one scanned, the one read next
MIN_CHUNKS = 8                   # a smaller file is read on one thread (measured: no gain below ~10 MiB)
PIECE = 2 << 20                  # bytes faulted in at a time (a huge page)
MADV_POPULATE_WRITE = 23         # include/uapi/asm-generic/mman-common.h (Linux 5.14)
_ITEM, _DONE, _ERROR = range(3)


class _Stopped(Exception):
    """The caller stopped reading: the reading thread unwinds."""


class Ahead:
    """One read ahead: the ring, what is ready, and the pages to fault in (module doc)."""

    def __init__(self, depth: int = DEPTH):
        self._cond = threading.Condition()
        self._free: deque = deque()
        self._ready: deque = deque()
        self._faults: deque = deque()
        self._made, self._depth, self._stop, self._running = 0, depth, False, False

    @staticmethod
    def worth(size: int, chunk: int) -> bool:
        """Whether a file of ``size`` bytes is read ahead: ``MIN_CHUNKS`` chunks or more, and a core to
        spare (at least two usable, the 1-minute load below their count minus one: on a machine whose
        cores are busy the second thread only waits for one, measured slower than one thread)."""
        return size >= MIN_CHUNKS * chunk and spare_core()

    def fault_in(self, *arrays) -> None:
        """Fault in the first ``count`` items of each ``(array, count)`` on the reading thread, a piece of
        each in turn (a scan writes them side by side), in place of what was asked before (arrays that
        grew are replaced: no reference to them is kept); nothing without that thread, or where pages
        cannot be populated."""
        if not self._running or _populate() is None:
            return
        spans = [(array, array.ctypes.data, min(count, len(array)) * array.itemsize) for array, count in arrays]
        pieces = max([-(-length // PIECE) for _, _, length in spans] + [1])
        with self._cond:
            self._faults.clear()
            for piece in range(pieces):
                for array, start, length in spans:
                    low, high = length * piece // pieces, length * (piece + 1) // pieces
                    if high > low:
                        self._faults.append((array, start + low, high - low))
            self._cond.notify_all()

    def read(self, produce):
        """The items of ``produce(take)`` (a chunk generator that asks ``take(buffer, size)`` for each
        chunk's buffer), produced on a second thread; the second item of each is its buffer, free again
        when the next item is asked for."""
        thread = threading.Thread(target=self._produce, args=(produce,), name="workbench-read-ahead", daemon=True)
        thread.start()
        self._running, held = True, None
        try:
            while True:
                with self._cond:
                    if held is not None:
                        self._free.append(held)
                        held = None
                        self._cond.notify_all()
                    while not self._ready:
                        self._cond.wait()
                    kind, item = self._ready.popleft()
                if kind == _DONE:
                    return
                if kind == _ERROR:
                    raise item
                held = item[1]
                yield item
        finally:
            with self._cond:
                self._stop, self._running = True, False
                self._faults.clear()
                self._cond.notify_all()
            thread.join()

    def _produce(self, produce) -> None:
        try:
            for item in produce(self._take):
                self._put(_ITEM, item)
            self._put(_DONE, None)
        except _Stopped:
            pass
        except BaseException as error:        # noqa: BLE001  (raised again on the caller's thread, in order)
            self._put(_ERROR, error, stopped=False)

    def _put(self, kind: int, item, stopped: bool = True) -> None:
        with self._cond:
            if self._stop and stopped:
                raise _Stopped
            self._ready.append((kind, item))
            self._cond.notify_all()

    def _take(self, buffer: bytearray | None, size: int) -> bytearray:
        """A buffer for the next chunk (``buffer``: the one just produced, which the caller holds)."""
        while True:
            with self._cond:
                if self._stop:
                    raise _Stopped
                if self._free:
                    return self._free.popleft()
                make = self._made < self._depth
                self._made += make
                piece = None if make or not self._faults else self._faults.popleft()
                if not make and piece is None:
                    self._cond.wait()
                    continue
            if make:
                return bytearray(size)
            _populate()(piece[1], piece[2])


def spare_core() -> bool:
    """At least two usable cores and a 1-minute load under their count minus a half: the caller, reading
    already, is usually one of the load's runnable tasks, so on two cores a load of ~1 is the caller alone."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return False
    return cores >= 2 and load < cores - 0.5


def _populate():
    """``populate(address, length)``: the whole pages inside the range faulted in, or ``None``."""
    global _POPULATE
    if _POPULATE is False:
        _POPULATE = _madvise() if sys.platform.startswith("linux") else None
    return _POPULATE


_POPULATE = False


def _madvise():
    from ..libc import libc_function

    madvise = libc_function("madvise", argtypes=(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))
    if madvise is None:
        return None
    page = mmap.PAGESIZE
    probe = ctypes.create_string_buffer(2 * page)
    start = -(-ctypes.addressof(probe) // page) * page
    if madvise(start, page, MADV_POPULATE_WRITE) != 0:            # an older kernel: EINVAL
        return None

    def populate(address: int, length: int) -> None:
        low, high = -(-address // page) * page, (address + length) // page * page
        if high > low:
            madvise(low, high - low, MADV_POPULATE_WRITE)
    return populate
