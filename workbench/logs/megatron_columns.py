"""The numpy fast path of the Megatron reader (used without the compiled scanner): iteration lines
grouped by their number of ``|`` and cut into columns, each column's key checked for every line with
one ``count``, the line heads read with two regex scans. A group that is not uniform, a column with a
NUL, an empty value or several tokens returns ``False`` and the caller reads its lines one by one."""
from __future__ import annotations

import re
from collections import defaultdict
from itertools import compress, repeat
from operator import contains, itemgetter

import numpy as np

HEAD = re.compile(rb"(?:^|\x00)(?:\s*(?:\[default(\d{1,18})\]:|(\d{1,18}):\s))?[^\x00]*?iteration\s+(\d{1,18})\s*/\s*\d{1,18}\s*(?=\x00|$)")
HEAD_END = re.compile(rb"iteration\s+(\d{1,18})\s*/\s*\d{1,18}\s*(?=\x00|$)")     # HEAD's counter, found fast
HEAD_RANK = re.compile(rb"\x00\s*(?:\[default(\d{1,18})\]:|(\d{1,18}):\s)")          # HEAD's rank prefix, after a NUL
ONE_TOKEN = re.compile(rb"(?:[ \t\r\x0b\x0c]*[^ \t\r\x0b\x0c\x00\[\]]+[ \t\r\x0b\x0c]*(?:\x00|\Z))+")  # NUL-separated values, one token each


def fast_group(lines: list[bytes], numbers: list[int], columns) -> bool:
    """Column-wise parse of iteration lines with the same number of '|'; False if keys differ."""
    width = lines[0].count(b"|") + 1
    pieces = b"|".join(lines).split(b"|")
    if len(pieces) != width * len(lines) or b"".join(pieces[width - 1::width]).strip():
        return False                                       # text after the last '|': a truncated line
    matched = _heads(b"\x00".join(pieces[0::width]), len(lines))
    if matched is None:
        return False
    keys = []
    for column in range(1, width - 1):
        values = pieces[column::width]
        key = values[0].partition(b":")[0]
        joined = b"\x00" + b"\x00".join(values)
        if not key.strip() or joined.count(b"\x00" + key + b":") != len(values):
            return False
        keys.append((key, joined))
    iterations, ranks = matched
    numbers = np.asarray(numbers, dtype=np.int64)
    values = [joined.replace(b"\x00" + key + b":", b"\x00")[1:] for key, joined in keys]
    if any(joined.count(b"\x00") != len(lines) - 1 or not ONE_TOKEN.fullmatch(joined) for joined in values):
        return False             # a NUL, a field without a value or with several tokens: the line parser reads it
    for (key, _), joined in zip(keys, values, strict=True):
        columns.add_block(key.strip(), iterations, joined, numbers, ranks)
    return True


def _heads(joined: bytes, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(iterations, ranks) of ``count`` NUL-separated line heads, each ending in ``iteration N/ T``;
    ``None`` when one does not. Two quick scans; the full ``HEAD`` pattern only when some heads
    carry a rank prefix and others do not."""
    found = HEAD_END.findall(joined)
    if len(found) != count:
        return None
    ranked = HEAD_RANK.findall(b"\x00" + joined)
    if not ranked:
        ranks = np.full(count, -1, dtype=np.int64)
    elif len(ranked) == count:
        ranks = np.array([int(a or b) for a, b in ranked], dtype=np.int64)
    else:
        matched = HEAD.findall(joined)
        if len(matched) != count:
            return None
        found = [it for _, _, it in matched]
        ranks = np.array([int(a or b) if (a or b) else -1 for a, b, _ in matched], dtype=np.int64)
    return np.array(found, dtype=np.bytes_).astype(np.int64), ranks


def iteration_lines(lines: list[bytes]) -> list[int]:
    """Indices of the lines holding ``iteration`` and ``|`` (tests run in C through ``map``)."""
    named = list(compress(range(len(lines)), map(contains, lines, repeat(b"iteration"))))
    if not named:
        return []
    held = itemgetter(*named)(lines) if len(named) > 1 else (lines[named[0]],)
    return list(compress(named, map(contains, held, repeat(b"|"))))


def groups(lines: list[bytes], found: list[int]) -> list[list[int]]:
    """``found`` grouped by the number of '|' of each line, in order of first appearance."""
    counts = list(map(bytes.count, [lines[i] for i in found], repeat(b"|")))
    if not counts or min(counts) == max(counts):
        return [found] if found else []
    groups = defaultdict(list)
    for i, count in zip(found, counts, strict=True):
        groups[count].append(i)
    return list(groups.values())
