"""Disk blocks reserved before a large write (Linux ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``), and freed past
the end of the data when the file closes: the atomic writer (:mod:`.fileio`) uses both for byte copies."""
from __future__ import annotations

import os
import sys

_FALLOC_FL_KEEP_SIZE = 1            # linux/falloc.h


def reserve_blocks(descriptor: int, size: int) -> bool:
    """Linux ``fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, size)``: blocks for ``size`` bytes, file size unchanged.

    Copying 2 GB into an ext4 file whose blocks are reserved costs ~20 % less kernel time than
    allocating them write by write (measured with copy_file_range: 1.0 s against 1.2-1.3 s, as fast
    as ``cp``). Not ``os.posix_fallocate``: where the file system has no fallocate, glibc emulates
    it by writing a byte into every block. Any failure (another OS, a file system without it, a
    full disk: the writes then say so themselves) returns False and changes nothing.
    """
    if size <= 0 or not sys.platform.startswith("linux"):
        return False
    function = _libc_fallocate()
    if function is None:
        return False
    import ctypes

    try:
        return function(descriptor, _FALLOC_FL_KEEP_SIZE, 0, size) == 0
    except (ctypes.ArgumentError, OverflowError, TypeError):       # a size past int64
        return False


def free_past_end(descriptor: int, reserved: int) -> None:
    """Free the blocks reserved past the end of the data: the size stays, growing it by a byte and cutting
    it back makes every file system drop the blocks past the end (a truncate to the same size is a no-op
    on some)."""
    size = os.fstat(descriptor).st_size
    if size < reserved:
        os.ftruncate(descriptor, size + 1)
        os.ftruncate(descriptor, size)


def _libc_fallocate():
    """libc's ``fallocate64`` (or ``fallocate``), looked up once; None where there is none."""
    import ctypes

    from .libc import libc_function

    return libc_function("fallocate64", "fallocate", argtypes=(ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64))
