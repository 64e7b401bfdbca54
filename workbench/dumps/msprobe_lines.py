"""Many strings at once from the compiled ``dumpscan_lines`` (``workbench/native/dumplines.h``): each string is
pieces of dump.json's bytes and of a small ``extra`` buffer, written as one line of a buffer Python sized, then
decoded once and split. On 200k rows this replaces a bytes object and a decode per entry name (22 ms a side) and
two concatenations per row name (49 ms). ``None`` where the library is absent or anything is unexpected: the
caller then makes the strings one by one (``tests/test_dump_lines.py`` holds both to the same lists)."""
from __future__ import annotations

import ctypes

from ..native import library

TEXT, EXTRA = 0, 1                                   # a piece's source: dump.json's bytes, or ``extra``
_INT64_P = ctypes.POINTER(ctypes.c_int64)


def lines(raw: bytes, extra: bytes, pieces) -> list[str] | None:
    """The strings made of ``pieces`` (an int64 array: lines x pieces x (source, offset, length)); ``raw`` holds
    valid UTF-8 and the text pieces are whole JSON strings without escapes (so no newline, and whole characters)."""
    import numpy as np

    scanner = library("dumpscan")
    if scanner is None or b"\n" in extra or pieces.ndim != 3 or pieces.shape[2] != 3 or pieces.shape[1] < 1:
        return None
    if len(pieces) == 0:
        return []
    pieces = np.ascontiguousarray(pieces, dtype=np.int64)
    source, offset, length = pieces[:, :, 0], pieces[:, :, 1], pieces[:, :, 2]
    room = np.where(source == TEXT, len(raw), len(extra))
    if ((source != TEXT) & (source != EXTRA)).any() or (offset < 0).any() or (length < 0).any() \
            or (offset > room).any() or (length > room - offset).any():
        return None                                    # checked here before the buffer is sized (and again in C)
    size = int(length.sum()) + len(pieces)
    out = bytearray(size)
    scanner.dumpscan_lines.restype = ctypes.c_int64
    written = scanner.dumpscan_lines(
        ctypes.c_char_p(raw), ctypes.c_int64(len(raw)), ctypes.c_char_p(extra), ctypes.c_int64(len(extra)),
        pieces.ctypes.data_as(_INT64_P), ctypes.c_int64(len(pieces)), ctypes.c_int64(pieces.shape[1]),
        (ctypes.c_char * size).from_buffer(out), ctypes.c_int64(size))
    if written != size:
        return None
    try:
        found = out.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None
    found.pop()                                        # after the last newline
    return found if len(found) == len(pieces) else None


def spans(raw: bytes, spans) -> list[str] | None:
    """The strings at (offset, length) rows of ``raw`` (entry names)."""
    import numpy as np

    pieces = np.empty((len(spans), 1, 3), np.int64)
    pieces[:, 0, 0] = TEXT
    pieces[:, 0, 1:] = spans[:, :2]
    return lines(raw, b"", pieces)


def row_names(raw: bytes, name_spans, entry, middles: list[str], middle, tails: list[str], tail) -> list[str] | None:
    """``{entry name}{middle}{tail}`` per row: ``name_spans`` (offset, length) per entry, ``entry`` per row;
    ``middle`` and ``tail`` per row index ``middles`` and ``tails``."""
    import numpy as np

    texts = [m.encode("utf-8") for m in middles] + [t.encode("utf-8") for t in tails]
    lengths = np.array([len(t) for t in texts], np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    pieces = np.empty((len(entry), 3, 3), np.int64)
    pieces[:, 0, 0], pieces[:, 1:, 0] = TEXT, EXTRA
    pieces[:, 0, 1], pieces[:, 0, 2] = name_spans[entry, 0], name_spans[entry, 1]
    pieces[:, 1, 1], pieces[:, 1, 2] = offsets[middle], lengths[middle]
    tail = tail + len(middles)
    pieces[:, 2, 1], pieces[:, 2, 2] = offsets[tail], lengths[tail]
    return lines(raw, b"".join(texts), pieces)
