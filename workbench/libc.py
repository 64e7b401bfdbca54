"""The C library's functions for the few calls Python does not wrap (``fallocate``, ``madvise``, ``malloc_trim``, ``mallopt``):
each looked up once, with its argument and result types; None where this C library has none of its names (no
glibc, not Linux)."""
from __future__ import annotations

_FOUND: dict[tuple[str, ...], object] = {}


def libc_function(*names: str, argtypes: tuple = (), restype=None):
    """The first of ``names`` the C library has (``errno`` kept for ``ctypes.get_errno``), or None. ``restype``:
    ``ctypes.c_int`` unless given."""
    if names not in _FOUND:
        _FOUND[names] = _looked_up(names, argtypes, restype)
    return _FOUND[names]


def _looked_up(names: tuple[str, ...], argtypes: tuple, restype):
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    for name in names:
        function = getattr(libc, name, None)
        if function is not None:
            function.argtypes = list(argtypes)
            function.restype = ctypes.c_int if restype is None else restype
            return function
    return None


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``). A reader's transient objects
    (the decoded JSON, row tuples, the scan's arrays) leave free but fragmented heap that glibc keeps, and it
    would count again in the peak of everything after (a 200k-row comparison: 453 against 516 MiB). Called once,
    after a dump is read: trimming again after matching or before the verdicts lowered no peak and only made the
    next allocations fault their pages in again (~15k page faults). Elsewhere (no glibc) nothing happens."""
    import ctypes

    trim = libc_function("malloc_trim", argtypes=(ctypes.c_size_t,))
    if trim is not None:
        trim(0)


M_ARENA_MAX = -8                   # glibc's mallopt parameter (malloc.h)


def one_heap_for_threads() -> None:
    """Threads allocate from the main thread's C heap (glibc ``mallopt(M_ARENA_MAX, 1)``), called before the
    reader starts its scanning thread. Otherwise that thread's first ``malloc`` makes a heap of its own, where the
    scan's arrays live, and what they leave free there is never reused by the main thread: 30-40 MB more in the
    peak of a 200k-row comparison (508 against 470 MiB). The threads only contend on the heap's lock for the
    few large arrays the scan allocates. Elsewhere (no glibc) nothing happens."""
    import ctypes

    mallopt = libc_function("mallopt", argtypes=(ctypes.c_int, ctypes.c_int))
    if mallopt is not None:
        mallopt(M_ARENA_MAX, 1)
