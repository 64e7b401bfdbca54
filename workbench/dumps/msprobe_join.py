"""construct.json and stack.json joined to dump.json's entry names by their bytes, in compiled passes
(``dumpconstruct`` in ``workbench/native/dumpside.h``, ``dumpscan_join_names``, ``dumpscan_join`` and
``dumpscan_distinct`` in ``dumpstems.h``): an entry's parent and stack id without a Python dict of every name, a str
per parent or stack name, or a lookup per entry. The entry names are distinct (the reader checks): the hash table is
made of them, packed, and the side file's keys are read once in their order (a table of the keys made every lookup
a read at a random place of a 7-9 MB file: both joins of both bench sides 25.9 -> 20.7 ms).

Every name, key and value here is a span of bytes that were checked to be UTF-8 and hold no escape (the scans
refuse escapes), so equal bytes are equal strings. ``None`` wherever the library is absent or anything is
unexpected: the callers then use the dicts of ``json`` (``tests/test_dump_join.py`` holds both to one result).
"""
from __future__ import annotations

import ctypes

from ..native import address, library
from .msprobe_scan import FULL, OK, START

_INT64_P = ctypes.POINTER(ctypes.c_int64)


class Construct:
    """construct.json as spans: ``raw`` and ``pairs`` (name offset, length, parent offset, length; -1: null)."""

    def __init__(self, raw: bytes, pairs):
        self.raw, self.pairs = raw, pairs


def scan_construct(raw: bytes):
    """The (members x 4) pairs of a construct.json of the usual form (every value a string or null, no escape),
    or None (the library absent, or ``json`` must decide)."""
    import numpy as np

    scanner = library("dumpscan")
    if scanner is None:
        return None
    scanner.dumpconstruct.restype = ctypes.c_int
    cap = min(len(raw) // 8 + 1, START)             # a member takes at least 8 bytes: "":"",
    while True:
        pairs = np.empty((cap, 4), np.int64)
        counts = np.zeros(1, np.int64)
        code = scanner.dumpconstruct(address(raw), ctypes.c_int64(len(raw)), pairs.ctypes.data_as(_INT64_P),
                                     ctypes.c_int64(cap), counts.ctypes.data_as(_INT64_P))
        if code == FULL and counts[0] >= cap:
            cap *= 4
            continue
        return pairs[:counts[0]] if code == OK else None


def join(text: bytes, spans, keys_text: bytes, keys, last: bool):
    """For each (offset, length) row of ``spans`` into ``text``, the row of ``keys`` (into ``keys_text``) with the
    same bytes (the last such row, or the first), -1 where none; None without the library or on a row out of
    range (checked here before anything is sized, and again in C). A table of the names where they are distinct,
    else of the keys."""
    import numpy as np

    scanner = library("dumpscan")
    if scanner is None:
        return None
    spans = np.ascontiguousarray(spans[:, :2], dtype=np.int64)
    keys = np.ascontiguousarray(keys[:, :2], dtype=np.int64)
    for rows, size in ((spans, len(text)), (keys, len(keys_text))):
        if len(rows) and (rows.min() < 0 or (rows[:, 0] + rows[:, 1]).max() > size):
            return None
    out = np.empty(len(spans), np.int64)
    code = -2
    # distinct names (the entry names, checked before): their table, the keys read in their order (-2: a repeat)
    for function, table_rows in (("dumpscan_join_names", len(spans)), ("dumpscan_join", len(keys))):
        if code != -2:
            break
        slots = 1 << max(2 * table_rows, 2).bit_length()
        table = np.zeros(slots, np.int64)
        call = getattr(scanner, function)
        call.restype = ctypes.c_int64
        code = call(
            address(text), ctypes.c_int64(len(text)), spans.ctypes.data_as(_INT64_P), ctypes.c_int64(len(spans)),
            address(keys_text), ctypes.c_int64(len(keys_text)), keys.ctypes.data_as(_INT64_P),
            ctypes.c_int64(len(keys)), ctypes.c_int64(1 if last else 0), out.ctypes.data_as(_INT64_P),
            table.ctypes.data_as(_INT64_P), ctypes.c_int64(slots))
    return out if code == 0 else None


def entry_parents(raw: bytes, entries, construct: Construct, texts_of):
    """(code, parents): each entry's parent numbered (-1: no member or null), and the distinct parents' strings,
    each decoded once (``texts_of(raw, spans)``); None where :func:`join` is."""
    import numpy as np

    member = join(raw, entries, construct.raw, construct.pairs, last=True)    # json keeps a repeated name's last
    if member is None:
        return None
    values = construct.pairs[:, 2:4]
    code = np.full(len(member), -1, np.int64)
    found = np.flatnonzero(member >= 0)
    found = found[values[member[found], 1] >= 0]                                # null: no parent
    spans = values[member[found]]
    numbered = number(construct.raw, spans)
    if numbered is None:
        return None
    code[found] = numbered[0]
    return code, texts_of(construct.raw, spans[numbered[1]])


def number(text: bytes, spans):
    """(code, first): the distinct strings at the (offset, length) rows of ``spans`` numbered in order of first
    appearance, and each number's first row; None as :func:`join`."""
    import numpy as np

    scanner = library("dumpscan")
    spans = np.ascontiguousarray(spans[:, :2], dtype=np.int64)
    if scanner is None or (len(spans) and (spans.min() < 0 or (spans[:, 0] + spans[:, 1]).max() > len(text))):
        return None
    code, first = np.empty(len(spans), np.int64), np.empty(len(spans), np.int64)
    slots = 1 << max(2 * len(spans), 2).bit_length()
    table = np.zeros(slots, np.int64)
    scanner.dumpscan_distinct.restype = ctypes.c_int64
    found = scanner.dumpscan_distinct(address(text), ctypes.c_int64(len(text)), spans.ctypes.data_as(_INT64_P),
                                    ctypes.c_int64(len(spans)), code.ctypes.data_as(_INT64_P),
                                    first.ctypes.data_as(_INT64_P), table.ctypes.data_as(_INT64_P), ctypes.c_int64(slots))
    return None if found < 0 else (code, first[:found])

