""":func:`.match_align.align` by the compiled aligner (``workbench/native/callalign.c``) where the library is built.

The features become numbers here: each call's (class, pass), its key (class, pass, element counts) and its last
element count numbered by first appearance in the two sequences, its level as a double. Equal numbers are equal
values, which is all the alignment asks of them, so the anchors, the scores (the same double operations in the
same order), the tables and the pairs are the Python ones. Without the library (not built, or
``WORKBENCH_NATIVE=0``), or should it refuse, :func:`.match_align.align` itself
(``tests/test_compare_align_native.py`` holds both equal).
"""
from __future__ import annotations

import ctypes

from .. import native
from .match_align import MAX_CELLS, Feature, align


def aligned(a: list[Feature], b: list[Feature]) -> list[tuple[int, int]]:
    """Pairs (i, j), increasing in both, of equivalent calls: :func:`.match_align.align`."""
    function = _function() if a and b else None
    if function is not None:
        found = _compiled(function, a, b)
        if found is not None:
            return found
    return align(a, b)


def _numbered(a: list[Feature], b: list[Feature]):
    """(kinds, keys, lasts, levels) of a then b as arrays, and the number of kinds and of keys. A key (class, pass,
    element counts) holds the kind and the last count: those are numbered once per distinct key."""
    import numpy as np

    keys: dict = {}
    both = [*a, *b]
    key = np.asarray([keys.setdefault(f[:3], len(keys)) for f in both], dtype=np.int64)     # Feature.key
    kinds: dict = {}
    lasts: dict = {}
    kind = np.asarray([kinds.setdefault(k[:2], len(kinds)) for k in keys], dtype=np.int64)[key]
    last = np.asarray([lasts.setdefault(k[2][-1:], len(lasts)) for k in keys], dtype=np.int64)[key]
    level = np.fromiter((f.level for f in both), np.float64, len(both))
    return kind, key, last, level, len(kinds), len(keys)


def _compiled(function, a: list[Feature], b: list[Feature]) -> list[tuple[int, int]] | None:
    if not all(type(f.level) is float for f in (*a, *b)):        # Python's arithmetic on other numbers differs
        return None
    return compiled_numbers(function, len(a), len(b), *_numbered(a, b))


def aligned_numbers(n: int, m: int, kind, key, last, level, kinds: int, keys: int) -> list[tuple[int, int]]:
    """:func:`aligned` of features already numbered (:func:`_numbered`'s arrays: a's n calls then b's m; ids from 0
    below ``kinds`` / ``keys``; levels float64): the compiled aligner, else :func:`.match_align.align` of features
    standing for those numbers (the kind as the class, the key and the last count as the element counts: equal
    exactly where the features they number are, so the same pairs)."""
    function = _function() if n and m else None
    if function is not None:
        found = compiled_numbers(function, n, m, kind, key, last, level, kinds, keys)
        if found is not None:
            return found
    features = [Feature(k, "", (y, z), v) for k, y, z, v in zip(kind.tolist(), key.tolist(), last.tolist(),
                                                                level.tolist(), strict=True)]
    return align(features[:n], features[n:])


def compiled_numbers(function, n: int, m: int, kind, key, last, level, kinds: int, keys: int):
    """The compiled aligner on numbered features (int64 and float64 arrays, a's n then b's m), or None if refused."""
    import numpy as np

    ints = np.empty(3 * keys + 7 * n + kinds + 1 + m, dtype=np.int64)
    cells = np.empty(2 * min(n * m, MAX_CELLS) + n + m + 1, dtype=np.float64)
    capacity = min(n, m)
    pair_a, pair_b = np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int64)
    i64 = ctypes.POINTER(ctypes.c_int64)
    f64 = ctypes.POINTER(ctypes.c_double)

    def sides(values, pointer):
        return values[:n].ctypes.data_as(pointer), values[n:].ctypes.data_as(pointer)

    kind, key, last = (np.ascontiguousarray(v, dtype=np.int64) for v in (kind, key, last))
    level = np.ascontiguousarray(level, dtype=np.float64)
    (kind_a, kind_b), (key_a, key_b), (last_a, last_b) = (sides(v, i64) for v in (kind, key, last))
    level_a, level_b = sides(level, f64)
    count = function(n, m, kind_a, key_a, last_a, level_a, kind_b, key_b, last_b, level_b, kinds, keys, MAX_CELLS,
                     ints.ctypes.data_as(i64), len(ints), cells.ctypes.data_as(f64), len(cells),
                     pair_a.ctypes.data_as(i64), pair_b.ctypes.data_as(i64), capacity)
    if count < 0:                                  # refused: never with the sizes made above
        return None
    return list(zip(pair_a[:count].tolist(), pair_b[:count].tolist(), strict=True))


def _function():
    """``callalign_pairs`` of the built library, typed, or None (off, not built, stale)."""
    i64, ints, doubles = ctypes.c_int64, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_double)
    return native.function("callalign", "callalign_pairs", (i64, i64, ints, ints, ints, doubles, ints, ints, ints,
                           doubles, i64, i64, i64, ints, i64, doubles, i64, ints, ints, i64), i64)
