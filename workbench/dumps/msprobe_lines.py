"""Many strings at once from the compiled ``dumpscan_lines`` (``workbench/native/dumplines.h``): each string is
pieces of dump.json's bytes and of a small ``extra`` buffer, written as one line of a buffer Python sized, then
decoded once and split. On 200k rows this replaces a bytes object and a decode per entry name (22 ms a side) and
two concatenations per row name (49 ms). ``None`` where the library is absent or anything is unexpected: the
caller then makes the strings one by one (``tests/test_dump_lines.py`` holds both to the same lists)."""
from __future__ import annotations

import ctypes

from ..native import address, library

TEXT, EXTRA = 0, 1                                   # a piece's source: dump.json's bytes, or ``extra``
_INT64_P = ctypes.POINTER(ctypes.c_int64)


def lines(raw: bytes, extra: bytes, items, index=None) -> list[str] | None:
    """The strings made of ``items`` (an int64 array: pieces x (source, offset, length)): line r is the items of
    row r of ``index`` (lines x pieces per line), or item r alone without an index. ``raw`` holds valid UTF-8 and
    its pieces are whole JSON strings without escapes (so no newline, and whole characters)."""
    found = _buffer(raw, extra, items, index)
    return None if found is None else _split(*found)


def _buffer(raw: bytes, extra: bytes, items, index):
    """(buffer, count): :func:`lines`' lines written in one buffer, each ended by a newline; None as there."""
    import numpy as np

    scanner = library("dumpscan")
    if scanner is None or b"\n" in extra or items.ndim != 2 or items.shape[1] != 3:
        return None
    items = np.ascontiguousarray(items, dtype=np.int64)
    source, offset, length = items[:, 0], items[:, 1], items[:, 2]
    room = np.where(source == TEXT, len(raw), len(extra))
    if ((source != TEXT) & (source != EXTRA)).any() or (offset < 0).any() or (length < 0).any() \
            or (offset > room).any() or (length > room - offset).any():
        return None                                    # checked here before the buffer is sized (and again in C)
    if index is None:
        count, per_line, size = len(items), 1, int(length.sum())
    else:
        index = np.ascontiguousarray(index, dtype=np.int64)
        if index.ndim != 2 or index.shape[1] < 1 or (index.size and (index.min() < 0 or index.max() >= len(items))):
            return None
        count, per_line = index.shape
        size = int(np.bincount(index.reshape(-1), minlength=len(items)) @ length) if index.size else 0
    if count == 0:
        return bytearray(), 0
    size += count
    out = bytearray(size)
    scanner.dumpscan_lines.restype = ctypes.c_int64
    written = scanner.dumpscan_lines(
        address(raw), ctypes.c_int64(len(raw)), ctypes.c_char_p(extra), ctypes.c_int64(len(extra)),
        items.ctypes.data_as(_INT64_P), ctypes.c_int64(len(items)),
        None if index is None else index.ctypes.data_as(_INT64_P), ctypes.c_int64(count), ctypes.c_int64(per_line),
        (ctypes.c_char * size).from_buffer(out), ctypes.c_int64(size))
    return (out, count) if written == size else None


def _split(out: bytearray, count: int) -> list[str] | None:
    if count == 0:
        return []
    try:
        found = out.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None
    found.pop()                                        # after the last newline
    return found if len(found) == count else None


def spans(raw: bytes, spans) -> list[str] | None:
    """The strings at (offset, length) rows of ``raw`` (entry names, stack.json's ids and names)."""
    found = _span_lines(raw, spans)
    return None if found is None else _split(*found)


def _span_lines(raw: bytes, spans):
    import numpy as np

    items = np.empty((len(spans), 3), np.int64)
    items[:, 0] = TEXT
    items[:, 1:] = spans[:, :2]
    return _buffer(raw, b"", items, None)


class Packed:
    """Strings packed a line each in one buffer: ``text``, and their (offset, length) ``rows`` there. The compiled
    passes read them there (at their places in dump.json each was a cache miss); Python makes strs of only the ones
    it reads (:func:`pick`: the reader reads ~30k module names and a name per API stem of 170k entry names), or of
    all of them once (:func:`as_list`: the slow paths)."""

    def __init__(self, text: bytes, rows):
        self.text, self.rows, self.strings = text, rows, None

    def __len__(self) -> int:
        return len(self.rows)


def packed_lines(raw: bytes, spans) -> Packed | None:
    """The strings at (offset, length) rows of ``raw`` as :class:`Packed`, without a str of each; None as
    :func:`spans`."""
    found = _span_lines(raw, spans)
    return None if found is None else Packed(bytes(found[0]), _lines_at(spans[:, 1]))


def pick(names, rows) -> list[str]:
    """``names[i]`` for each ``i`` of ``rows``: of :class:`Packed` names in one compiled pass, of a list by index."""
    import numpy as np

    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    if not isinstance(names, Packed):
        return [names[i] for i in rows.tolist()]
    if names.strings is not None:
        return [names.strings[i] for i in rows.tolist()]
    found = spans(names.text, names.rows[rows])
    if found is None:                                 # pragma: no cover - the rows were written by the same pass
        found = [names.text[a:a + n].decode("utf-8") for a, n in names.rows[rows].tolist()]
    return found


def as_list(names) -> list[str]:
    """Every name as a str (made once for :class:`Packed` names)."""
    import numpy as np

    if not isinstance(names, Packed):
        return names
    if names.strings is None:
        names.strings = pick(names, np.arange(len(names)))
    return names.strings


def row_names(raw: bytes, name_spans, entry, middles: list[str], middle, tails: list[str], tail) -> list[str] | None:
    """``{entry name}{middle}{tail}`` per row: ``name_spans`` (offset, length) per entry, ``entry`` per row;
    ``middle`` and ``tail`` per row index ``middles`` and ``tails``."""
    import numpy as np

    texts = [m.encode("utf-8") for m in middles] + [t.encode("utf-8") for t in tails]
    lengths = np.array([len(t) for t in texts], np.int64)
    items = np.empty((len(name_spans) + len(texts), 3), np.int64)
    items[:len(name_spans), 0], items[len(name_spans):, 0] = TEXT, EXTRA
    items[:len(name_spans), 1:] = name_spans[:, :2]
    items[len(name_spans):, 1] = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    items[len(name_spans):, 2] = lengths
    index = np.empty((len(entry), 3), np.int64)
    index[:, 0] = entry
    index[:, 1] = middle + len(name_spans)
    index[:, 2] = tail + len(name_spans) + len(middles)
    return lines(raw, b"".join(texts), items, index)


def packed(names: list[str], lengths):
    """The names as one buffer (a newline between them) and their (offset, length) rows in it: the compiled
    passes read them there rather than at their places in dump.json, each on its own page of a 67 MB buffer
    (a join of 78k names 19 → 7 ms, their stems 11 → 2 ms). ``lengths``: the names' lengths in UTF-8 bytes."""
    text = "\n".join(names).encode("utf-8")
    rows = _lines_at(lengths)
    if len(names) and len(text) != int(rows[-1, 0] + rows[-1, 1]):        # pragma: no cover - equal by construction
        raise ValueError("entry names and their lengths disagree")
    return text, rows


def _lines_at(lengths):
    """The (offset, length) rows of lines of these lengths laid end to end, a newline after each."""
    import numpy as np

    rows = np.empty((len(lengths), 2), np.int64)
    rows[:, 1] = lengths
    rows[:, 0] = np.cumsum(rows[:, 1] + 1) - rows[:, 1] - 1
    return rows
