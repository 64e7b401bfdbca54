"""Reading a training log as bytes, chunk by chunk: memory does not follow the file's size.

    for first_line, data in chunks(path, notes):    # data: whole lines, b"\\n"-separated, no final one
        lines = data.split(b"\\n")

A line longer than ``MAX_LINE`` bytes is skipped (said in ``notes``, with its line number), never
held in memory whole. Bytes that are not UTF-8 are decoded with U+FFFD where a reader needs text
(``text``); the count of such lines is said once. Timestamps, rank and logger prefixes are left to
the format readers, which key on the message, never on the prefix.
"""
from __future__ import annotations

import re
from pathlib import Path


CHUNK = 8 << 20                 # bytes read at a time
MAX_LINE = 4 << 20              # a longer line is skipped with a note
SNIFF = 256 << 10               # bytes looked at to detect the format
RANK_PREFIX = re.compile(rb"^\s*(?:\[default(\d+)\]:|(\d+):\s)")


def head(path: Path, size: int = SNIFF) -> bytes:
    """The first ``size`` bytes (for format detection)."""
    with open(path, "rb") as handle:
        return handle.read(size)


def chunks(path: Path, notes: list[str], max_line: int = MAX_LINE):
    """``(number of the first line, bytes of whole lines)`` for consecutive chunks of the file; a
    skipped line is left as an empty line so that line numbers stay right."""
    number, carry, skipping, skipped = 1, b"", False, []
    with open(path, "rb") as handle:
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            cut = block.rfind(b"\n")
            if cut < 0:                                   # no line end in the whole block
                if skipping or len(carry) + len(block) > max_line:
                    skipping = True
                    carry = b""
                else:
                    carry += block
                continue
            data = carry + block[:cut]
            carry = block[cut + 1:]
            if skipping:                                  # the rest of an over-long line
                skipped.append(number)
                data = data[data.find(b"\n"):] if b"\n" in data else b""
                skipping = False
            data = _blank_long_lines(data, number, max_line, skipped)
            yield number, data
            number += data.count(b"\n") + 1
            if len(carry) > max_line:
                skipping, carry = True, b""
        if skipping:
            skipped.append(number)
        elif carry:
            yield number, _blank_long_lines(carry, number, max_line, skipped)
    if skipped:
        shown = ", ".join(str(n) for n in skipped[:5])
        notes.append(f"{len(skipped)} line(s) longer than {max_line >> 20} MiB skipped (line {shown}"
                     f"{', ...' if len(skipped) > 5 else ''})")


def _blank_long_lines(data: bytes, number: int, max_line: int, skipped: list[int]) -> bytes:
    if len(data) <= max_line or _no_long_line(data, max_line):
        return data
    lines = data.split(b"\n")
    for index, line in enumerate(lines):
        if len(line) > max_line:
            skipped.append(number + index)
            lines[index] = b""
    return b"\n".join(lines)


def _no_long_line(data: bytes, max_line: int) -> bool:
    """True when every line of ``data`` is at most ``max_line`` bytes: a longer line would hold a
    whole aligned stretch of ``max_line // 2`` bytes without a line end, so one ``find`` per such
    stretch tells (each stops at its first line end)."""
    half = max(max_line // 2, 1)
    return all(data.find(b"\n", start, start + half) >= 0 for start in range(0, len(data) - half + 1, half))


def text(line: bytes, bad: list[int] | None = None, number: int = 0) -> str:
    """``line`` as text; undecodable bytes become U+FFFD and the line number goes to ``bad``."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        if bad is not None:
            bad.append(number)
        return line.decode("utf-8", errors="replace")


def bad_bytes_note(bad: list[int]) -> list[str]:
    if not bad:
        return []
    return [f"{len(bad)} line(s) with bytes that are not UTF-8 read with U+FFFD in their place "
            f"(first: line {bad[0]})"]


def rank_of(prefix: bytes) -> int:
    """The rank a launcher prefix names (torchrun ``[default3]:``, Slurm ``3: ``), else -1."""
    match = RANK_PREFIX.match(prefix)
    if match is None:
        return -1
    return int(match.group(1) or match.group(2))
