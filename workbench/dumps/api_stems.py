"""When an API entry name's op and pass can be read once per stem: ``Tensor.pow.0.forward`` and
``Tensor.pow.7.forward`` share the stem ``(Tensor.pow, forward)``, and 200k-row dumps hold ~80k API entries of a few
hundred stems, each matched by the YAML's ``api_pattern`` (half of the entry names' time).

That is exact when the pattern is ``P\\.(?P<index>\\d+)\\.(?P<pass>forward|backward)$`` (the shipped one): for a
name ``{head}.{digits}.{pass}`` the index group can only be the last but one piece (it holds no dot and ends before
``.{pass}`` at the end), so P must match exactly ``head``, and the regex engine's first way to do that does not
depend on the digits unless P looks ahead (``(?=``, ``(?!``) or has a conditional group, which read past ``head``.
Any other pattern (other tail, flags, top-level alternation, look-arounds) is matched name by name.

Where the library is built, the stems of all entry names are found and numbered in one compiled pass
(:func:`stem_codes`, ``workbench/native/dumpstems.h``), so Python meets each stem once, not each name; and when the
``module_pattern`` ends in ``\\.(?P<index>\\d+)$`` (:func:`ends_in_digits`) it cannot match a name of the stem
form (which ends in ``forward``/``backward``), so those names are not tried against it one by one.
"""
from __future__ import annotations

import ctypes
import re
from functools import lru_cache

try:
    from re import _parser as sre_parse       # Python 3.11+
except ImportError:                            # pragma: no cover - Python 3.10
    import sre_parse                           # type: ignore[no-redef]

TAIL = r"\.(?P<index>\d+)\.(?P<pass>forward|backward)$"
PASSES = frozenset(("forward", "backward"))
_TAIL_OPS = ("LITERAL", "SUBPATTERN", "LITERAL", "SUBPATTERN", "AT")
_READS_AHEAD = frozenset(("ASSERT", "ASSERT_NOT", "GROUPREF_EXISTS"))
DIGITS_TAIL = r"\.(?P<index>\d+)$"
_INT64_P = ctypes.POINTER(ctypes.c_int64)


@lru_cache(maxsize=8)
def by_stem(pattern: re.Pattern) -> bool:
    """Whether ``pattern``'s groups on ``{head}.{digits}.{pass}`` depend on ``(head, pass)`` only (see above)."""
    text = pattern.pattern
    if not isinstance(text, str) or pattern.flags != re.UNICODE or not text.endswith(TAIL):
        return False
    try:
        parsed = sre_parse.parse(text)
    except (re.error, RecursionError):         # pragma: no cover - it compiled already
        return False
    items = list(parsed)
    if len(items) < len(_TAIL_OPS) or tuple(str(op) for op, _ in items[-len(_TAIL_OPS):]) != _TAIL_OPS:
        return False                                       # not a sequence ending in the tail: an alternation
    groups = [av[0] for op, av in items[-len(_TAIL_OPS):] if str(op) == "SUBPATTERN"]
    if groups != [pattern.groupindex.get("index"), pattern.groupindex.get("pass")]:
        return False
    return not any(str(op) in _READS_AHEAD for op in _ops(items[:-len(_TAIL_OPS)]))


@lru_cache(maxsize=8)
def ends_in_digits(pattern: re.Pattern) -> bool:
    """Whether every match of ``pattern`` (``match``, no flag) ends in a digit at the end of the name or before a
    final newline: the pattern is a sequence (no top-level alternation) ending in ``\\.(?P<index>\\d+)$``. A name
    of the stem form ends in a letter, so such a pattern cannot match it."""
    text = pattern.pattern
    if not isinstance(text, str) or pattern.flags != re.UNICODE or not text.endswith(DIGITS_TAIL):
        return False
    try:
        items = list(sre_parse.parse(text))
    except (re.error, RecursionError):         # pragma: no cover - it compiled already
        return False
    tail = [str(op) for op, _ in items[-3:]]
    return tail == ["LITERAL", "SUBPATTERN", "AT"] and items[-2][1][0] == pattern.groupindex.get("index") \
        and str(items[-1][1]) == "AT_END"


def stem_codes(raw: bytes, spans):
    """(code, first) of the names at ``spans`` ((offset, length) rows into ``raw``, valid UTF-8): each name's stem
    (:func:`stem`) numbered in order of first appearance, -1 for a name without one, and each number's first name;
    ``None`` where the library is absent (the caller then reads the names one by one)."""
    import numpy as np

    from ..native import library

    scanner = library("dumpscan")
    if scanner is None:
        return None
    spans = np.ascontiguousarray(spans[:, :2], dtype=np.int64)
    n = len(spans)
    if n and (spans.min() < 0 or (spans[:, 0] + spans[:, 1]).max() > len(raw)):
        return None                                    # checked here before anything is sized (and again in C)
    code, first = np.empty(n, np.int64), np.empty(n, np.int64)
    slots = 1 << max(2 * n, 2).bit_length()
    table = np.zeros(slots, np.int64)
    scanner.dumpscan_stems.restype = ctypes.c_int64
    found = scanner.dumpscan_stems(ctypes.c_char_p(raw), ctypes.c_int64(len(raw)), spans.ctypes.data_as(_INT64_P),
                                   ctypes.c_int64(n), code.ctypes.data_as(_INT64_P), first.ctypes.data_as(_INT64_P),
                                   table.ctypes.data_as(_INT64_P), ctypes.c_int64(slots))
    return None if found < 0 else (code, first[:found])


def stem(name: str) -> tuple[str, str] | None:
    """``(head, pass)`` of ``{head}.{digits}.{pass}``, else None (then the name is matched on its own)."""
    head, _, passed = name.rpartition(".")
    if passed not in PASSES:
        return None
    head, dot, index = head.rpartition(".")
    return (head, passed) if dot and index.isdecimal() and index.isascii() else None


def _ops(items):
    """Every opcode of parsed pattern items, nested groups, branches and repeats included (a character class
    holds no group: its items are not searched)."""
    for op, av in items:
        yield op
        yield from _nested(av)


def _nested(value):
    if isinstance(value, sre_parse.SubPattern):
        yield from _ops(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _nested(item)
