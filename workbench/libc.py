"""The C library's functions for the few calls Python does not wrap (``fallocate``, ``madvise``, ``malloc_trim``):
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
