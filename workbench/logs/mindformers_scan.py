"""The fast path through a chunk of a MindFormers log. With the compiled scanner (``mfscan.c``, through
``mindformers_native``) C reads the chunk and hands back only the lines it does not read exactly.
Without it (and where C stops inside a block) a ``local_norm`` array (hundreds of lines) is cut out
of the chunk whole with ``bytes.find`` and its numbers set aside to be parsed with the rest of the
chunk's (``fastnum``); every other line goes through the exact per-line parser (``line``).

A block takes the fast path only when the per-line parser would read it the same way: it starts on
the line after ``local_norm:``, every one of its lines starts (after blanks) with what an array line
starts with, it ends on the chunk's first line holding ``]``, it is ASCII and not summarised
(``...``). Anything else (a block cut by the chunk's end, a stray line inside it, bytes that are not
UTF-8) is left to the per-line parser, so notes, errors and line numbers stay exact.
"""
from __future__ import annotations

import ctypes
import re

import numpy as np

from .logscan import PF, mf_library as library
from .mindformers_native import DONE, NativeSteps, hand_back
from .norm_rows import NormBlock

NORM_SIZE = b"norm_size:"
ARRAY_START = (b"[", b"-", b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9", b".", b"n", b"i")
NOT_ARRAY_LINE = re.compile(rb"\n(?![ \t\r\x0b\x0c]*[\[\-0-9.ni])")      # a later line _line would not take


def scan(state, data: bytearray, first: int, line, finish, store=None) -> int:
    """Every line of ``data`` (whole lines, the first numbered ``first``; the reader's buffer, passed to
    C in place) into ``state``: ``line`` is
    the per-line parser, ``finish`` ends a block it would end, ``store(state, step, block)`` stores a
    block at its step (for the compiled scan, ``mindformers_native``, when the library is built).
    The number of the line after the chunk (the scan has counted its line ends: no second count)."""
    lib = library()
    holder = (ctypes.c_char * len(data)).from_buffer(data) if lib is not None and data else None
    try:
        return _lines(state, data, first, line, finish, store, lib, ctypes.addressof(holder) if holder is not None else None)
    finally:
        del holder                                        # the reader may resize its buffer now


def _lines(state, data: bytearray, first: int, line, finish, store, lib, address) -> int:
    pos, number, end = 0, first, len(data)
    native = _native(state, lib) if store is not None and address is not None else None
    while pos <= end:
        if native is not None and native.can_start(state):
            status, pos, number = native.run(state, address, end, pos, number, store)
            if status == DONE:                             # number: the chunk's last line
                return number + 1
            if state.block is None:                        # a line outside a block: the per-line parser's
                eol = data.find(b"\n", pos)
                eol = end if eol < 0 else eol
                hand_back(state, native, bytes(data[pos:eol]), number, line)
                pos, number = eol + 1, number + 1
                continue
        if state.block is not None and not state.block[2] and state.groups is None:
            moved = _fast_block(state, data, pos, number, finish, lib, address)
            if moved is not None:
                pos, number = moved
                continue
        elif state.block is None and state.groups is None:
            stop = _next_block_line(data, pos)
            if stop > pos:
                for raw in bytes(data[pos:stop - 1]).split(b"\n"):       # no norm_size line among them
                    line(state, raw, number)
                    number += 1
                pos = stop
                continue
        eol = data.find(b"\n", pos)
        eol = end if eol < 0 else eol
        line(state, bytes(data[pos:eol]), number)
        pos, number = eol + 1, number + 1
    return number


def _native(state, lib):
    """The reader's compiled scan (made on its first chunk), or ``None`` without the library."""
    if lib is None:
        return None
    if state.native is None:
        state.native = NativeSteps(lib, state.fmt)
    return state.native


def _next_block_line(data: bytes, pos: int) -> int:
    """Where the next line holding ``norm_size:`` starts (``len(data) + 1`` when none does)."""
    at = data.find(NORM_SIZE, pos)
    return len(data) + 1 if at < 0 else (data.rfind(b"\n", pos, at) + 1 or pos)


def _fast_block(state, data: bytearray, pos: int, number: int, finish, lib=None, address=None) -> tuple[int, int] | None:
    """The array of the open block, from its first line at ``pos`` to the line holding ``]``:
    (where the next line starts, its number), or ``None`` for the per-line parser to read it."""
    read = _native_block(state, data, pos, lib, address)
    if read is not None:
        values, stop, ends = read
        first_no, sizes, _ = state.block
        state.block = None
        state.pending.append(NormBlock(first_no, sizes, None, values))
        return stop + 1, number + ends + 1
    close = data.find(b"]", pos)
    if close < 0:
        return None
    stop = data.find(b"\n", close)
    stop = len(data) if stop < 0 else stop
    body = bytes(data[pos:stop])
    first_line = body[:body.find(b"\n")] if b"\n" in body else body
    if (b"local_norm:" in first_line or not first_line.lstrip().startswith(ARRAY_START) or not body.isascii()
            or NOT_ARRAY_LINE.search(body)):
        return None
    if b"..." in body:                                       # summarised: said in a note, read exactly
        state.block[2].append(body.decode("ascii"))
        finish(state)
    else:
        first_no, sizes, _ = state.block
        state.block = None
        block = NormBlock(first_no, sizes, None, None, text=body)
        state.pending.append(block)
        state.batch.append(block)
    return stop + 1, number + body.count(b"\n") + 1


def _native_block(state, data: bytearray, pos: int, lib, address):
    """(values, offset of the block's last line end, line ends inside) read by the compiled scanner
    ``lib`` when it reads the block exactly as the code above would, with ``norm_size``'s count; else
    ``None``."""
    if lib is None or address is None or data.startswith(b"local_norm:", pos):     # (the line above the array)
        return None
    sizes = state.block[1]
    values = np.empty(len(sizes), dtype=np.float64)
    stop, ends = ctypes.c_int64(), ctypes.c_int64()
    count = lib.mfscan_norm_block(address, len(data), pos, values.ctypes.data_as(PF), len(values),
                                   ctypes.byref(stop), ctypes.byref(ends))
    return (values, stop.value, ends.value) if count == len(values) else None
