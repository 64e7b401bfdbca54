"""The compiled log scanners ``workbench/native/logscan.c`` (Megatron) and ``mfscan.c`` (MindFormers)
through ctypes: ``library()`` / ``mf_library()`` is the loaded library with its functions typed, or
``None`` (not built, stale, or ``WORKBENCH_NATIVE=0``): every caller then takes its Python path,
which gives the same results."""
from __future__ import annotations

import ctypes

P64, P32, P8, PF = (ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int8),
                    ctypes.POINTER(ctypes.c_double))
CODES = 128                      # metric codes C writes (int8; logscan_recode's table has this many entries)


class Scan(ctypes.Structure):
    """``megatron_scan`` of logscan.c, field for field."""

    _fields_ = [("keys", ctypes.c_void_p), ("key_start", P64), ("key_kind", P32), ("key_order", P32),
                ("key_shift", P32), ("key_flags", P32), ("nkeys", ctypes.c_int64),
                ("rank", P32), ("step", P32), ("line", P32), ("code", P8), ("value", PF),
                ("rows_cap", ctypes.c_int64), ("rows", ctypes.c_int64), ("code_rows", P64), ("code_cap", ctypes.c_int64),
                ("iteration", P64), ("iterations", ctypes.c_int64),
                ("back", P64), ("back_cap", ctypes.c_int64), ("backs", ctypes.c_int64),
                ("pos", ctypes.c_int64), ("line_no", ctypes.c_int64), ("done", ctypes.c_int64),
                ("last_candidate", ctypes.c_int64), ("flags", ctypes.c_int64), ("non_ascii", ctypes.c_int64)]


def pointer(array, kind):
    """A numpy array's data as the ctypes pointer ``kind`` (the array must outlive C's use of it)."""
    return array.ctypes.data_as(kind)


def count_lines(buffer: bytearray, size: int) -> int:
    """``buffer.count(b"\\n", 0, size)``, by the library when it is built (a memchr loop, not a byte loop)."""
    lib = library()
    if lib is None:
        return buffer.count(b"\n", 0, size)
    holder = (ctypes.c_char * max(size, 1)).from_buffer(buffer)
    try:
        return lib.logscan_count_lines(ctypes.addressof(holder), size)
    finally:
        del holder                                        # the caller may resize its buffer after


def library():
    """The Megatron scanner and line counter (``logscan.c``), or ``None``."""
    from ..native import library as native

    lib = native("logscan")
    if lib is not None and not getattr(lib, "_workbench_typed", False):
        lib.logscan_megatron.argtypes = [ctypes.POINTER(Scan), ctypes.c_void_p, ctypes.c_int64]
        lib.logscan_megatron.restype = ctypes.c_int
        lib.logscan_non_ascii.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        lib.logscan_non_ascii.restype = ctypes.c_int64
        lib.logscan_recode.argtypes = [P8, ctypes.c_int64, P8]
        lib.logscan_recode.restype = None
        lib.logscan_count_lines.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        lib.logscan_count_lines.restype = ctypes.c_int64
        lib._workbench_typed = True
    return lib


def mf_library():
    """The MindFormers scanner (``mfscan.c``: step lines, norm_size lines, local_norm arrays), or ``None``."""
    from ..native import library as native
    from .mindformers_native import MFScan

    lib = native("mfscan")
    if lib is not None and not getattr(lib, "_workbench_typed", False):
        lib.mfscan_mindformers.argtypes = [ctypes.POINTER(MFScan), ctypes.c_void_p, ctypes.c_int64]
        lib.mfscan_mindformers.restype = ctypes.c_int
        lib.mfscan_norm_block.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, PF, ctypes.c_int64, P64, P64]
        lib.mfscan_norm_block.restype = ctypes.c_int64
        lib._workbench_typed = True
    return lib
