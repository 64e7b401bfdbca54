"""When an API entry name's op and pass can be read once per stem: ``Tensor.pow.0.forward`` and
``Tensor.pow.7.forward`` share the stem ``(Tensor.pow, forward)``, and 200k-row dumps hold ~80k API entries of a few
hundred stems, each matched by the YAML's ``api_pattern`` (half of the entry names' time).

That is exact when the pattern is ``P\\.(?P<index>\\d+)\\.(?P<pass>forward|backward)$`` (the shipped one): for a
name ``{head}.{digits}.{pass}`` the index group can only be the last but one piece (it holds no dot and ends before
``.{pass}`` at the end), so P must match exactly ``head``, and the regex engine's first way to do that does not
depend on the digits unless P looks ahead (``(?=``, ``(?!``) or has a conditional group, which read past ``head``.
Any other pattern (other tail, flags, top-level alternation, look-arounds) is matched name by name.
"""
from __future__ import annotations

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
