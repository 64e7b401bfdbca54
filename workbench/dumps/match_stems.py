"""The call stem of every row of a name column, as the key that groups rows into calls (:func:`.match_calls.calls_of`).

The compiled pass (``workbench/native/callstems.c``) finds each name's stem in the names joined a line each and
numbers the distinct stems in order of first appearance while it walks them: no str per row and no hashing of
200k Python strings by ``pd.factorize``. Only the stems of the rows that start a call are made as str, when asked
for. Without the library (not built, or ``WORKBENCH_NATIVE=0``), or for names it does not take (not all str, a line
break in a name, a character outside ASCII), :func:`.match_names.stems_of` gives every stem: the calls are the same
either way, as numbering the stems instead of the str leaves the order of first appearance unchanged
(``tests/test_compare_stems.py`` holds both paths equal).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from .. import native
from .match_names import stems_of


@dataclass
class CallStems:
    """The stems of a name column: ``keys`` (per row, equal exactly where the rows' stems are: an int64 array or the
    list of stems), ``at`` (the stems of the rows at a list of positions), ``one_at`` (for an int64 array of
    positions, a function of k giving the stem of the k-th of them, made when asked), ``digit_ends`` (for an int64
    array of positions, whether each row's stem ends in an ASCII digit, as a bool array; None where the names were
    not checked to be ASCII without line breaks)."""

    keys: object
    at: Callable[[list[int]], list[str]]
    one_at: Callable[[object], Callable[[int], str]]
    digit_ends: Callable[[object], object] | None = None


def call_stems(names: list) -> CallStems:
    found = _compiled(names)
    if found is not None:
        return found
    stems = stems_of(names)

    def at(positions) -> list[str]:
        return list(map(stems.__getitem__, positions))
    return CallStems(stems, at, lambda positions: at(positions.tolist()).__getitem__)


def _compiled(names: list) -> CallStems | None:
    function = _function() if names else None
    if function is None:
        return None
    try:
        text = "\n".join(names)
    except TypeError:                                     # a name that is not a str
        return None
    if not text.isascii() or text.count("\n") != len(names) - 1:
        return None
    import numpy as np

    data = _own_bytes(text)
    lines = len(names)
    start, stem, code, first = (np.empty(lines, dtype=np.int64) for _ in range(4))
    slots = 1 << (2 * lines - 1).bit_length()             # a power of two, at least twice the lines
    table = np.zeros(slots, dtype=np.int64)
    pointer = ctypes.POINTER(ctypes.c_int64)
    distinct = function(data, len(text), lines, *(array.ctypes.data_as(pointer) for array in (start, stem, code, first,
                                                                                             table)), slots)
    if distinct < 0:                                      # refused: never with what is checked above
        return None

    def at(positions: list[int]) -> list[str]:
        return [names[row][:length] for row, length in zip(positions, stem[positions].tolist(), strict=True)]

    def one_at(positions) -> Callable[[int], str]:
        rows, ends = positions.tolist(), stem[positions].tolist()
        return lambda k: names[rows[k]][:ends[k]]

    def digit_ends(positions):
        ends = stem[positions]
        if not text:                                      # one empty name: no byte to read
            return ends > 0
        raw = data if isinstance(data, bytes) else (ctypes.c_uint8 * len(text)).from_address(data)  # text lives here
        last = np.frombuffer(raw, dtype=np.uint8)[np.maximum(start[positions] + ends - 1, 0)]
        return (ends > 0) & (last >= ord("0")) & (last <= ord("9"))

    return CallStems(code, at, one_at, digit_ends)


def _own_bytes(text: str):
    """The address of an ASCII str's own bytes, valid while ``text`` lives: CPython keeps an ASCII str as its bytes
    and ``PyUnicode_AsUTF8AndSize`` returns them without a copy (``encode`` copied the 9 MB of 200k names); the
    encoded bytes where that function is not there (not CPython)."""
    function = _as_utf8()
    if function is None:                                  # pragma: no cover - CPython has it
        return text.encode("ascii")
    size = ctypes.c_ssize_t()
    address = function(text, ctypes.byref(size))
    if address is None or size.value != len(text):       # pragma: no cover - an ASCII str is its own UTF-8
        return text.encode("ascii")
    return address


@lru_cache(maxsize=1)
def _as_utf8():
    function = getattr(getattr(ctypes, "pythonapi", None), "PyUnicode_AsUTF8AndSize", None)
    if function is not None:
        function.restype, function.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t))
    return function


def _function():
    """``callstems_codes`` of the built library, typed, or None (off, not built, stale)."""
    i64, pointer = ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
    return native.function("callstems", "callstems_codes",
                           (ctypes.c_void_p, i64, i64, pointer, pointer, pointer, pointer, pointer, i64), i64)
