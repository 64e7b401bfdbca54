"""Reading a training log as bytes, chunk by chunk: memory does not follow the file's size.

    for first_line, data in chunks(path, notes):    # data: whole lines, b"\\n"-separated, no final one
        lines = data.split(b"\\n")

A line longer than ``MAX_LINE`` bytes is skipped (said in ``notes``, with its line number), never
held in memory whole. Bytes that are not UTF-8 are decoded with U+FFFD where a reader needs text
(``text``); the count of such lines is said once. Timestamps, rank and logger prefixes are left to
the format readers, which key on the message, never on the prefix.
"""
from __future__ import annotations

import os
import re
from pathlib import Path


CHUNK = 8 << 20                 # bytes read at a time
MAX_LINE = 4 << 20              # a longer line is skipped with a note
SNIFF = 256 << 10               # bytes looked at to detect the format
SLACK = 64 << 10                # room in the read buffer for the part line a chunk carries over
RANK_PREFIX = re.compile(rb"^\s*(?:\[default(\d{1,18})\]:|(\d{1,18}):\s)")   # int64 ranks only


def head(path: Path, size: int = SNIFF) -> bytes:
    """The first ``size`` bytes (for format detection)."""
    with open(path, "rb") as handle:
        return handle.read(size)


def chunks(path: Path, notes: list[str], max_line: int = MAX_LINE):
    """``(number of the first line, bytes of whole lines)`` for consecutive chunks of the file; a
    skipped line is left as an empty line so that line numbers stay right."""
    for number, buffer, size in spans(path, notes, max_line):
        with memoryview(buffer) as view:
            data = bytes(view[:size])
        yield number, data


def spans(path: Path, notes: list[str], max_line: int = MAX_LINE, count=None, exact: bool = False,
          chunk: int | None = None, boundary: bytes | None = None, ahead=None):
    """The chunks of ``chunks`` without copying them: ``(number of the first line, buffer, size)``,
    the chunk being ``buffer[:size]`` (a ``bytearray`` the next step reuses: read it before asking for
    the next, and hold no view of it then); ``exact``: the buffer is cut to the chunk (``size`` long).
    ``count(buffer, size)``, called once the chunk is read, says how many line ends it holds (counted
    in C unless given: a scanner that has counted them already). The buffer is the file's size (up to
    ``chunk``, default ``CHUNK``) and the room for a line carried over: a small file faults in no more
    than itself. ``boundary``: a chunk ends before the last line holding it, where that leaves a chunk
    (a record that starts with such a line, a MindFormers local-norm block, then stays in one chunk).
    ``ahead`` (an ``ahead.Ahead``): a file it finds ``worth`` it is read on a second thread into a ring of
    buffers while the caller reads the chunk before (the line ends then counted there: ``count`` unused)."""
    chunk = chunk or CHUNK
    if ahead is not None and ahead.worth(os.stat(path).st_size, chunk):
        said: list[str] = []
        yield from ahead.read(lambda take: _spans(path, said, max_line, None, exact, chunk, boundary, take))
        notes += said                                 # when the caller has read every chunk, as below
        return
    yield from _spans(path, notes, max_line, count, exact, chunk, boundary, None)


def _spans(path: Path, notes: list[str], max_line: int, count, exact: bool, chunk: int, boundary: bytes | None,
           take):
    """``spans``; ``take(buffer, size)``: the buffer of the next chunk (``None``: the same one)."""
    if count is None:
        from .logscan import count_lines as count
    number, carry, skipping, skipped, read = 1, 0, False, [], 0
    with open(path, "rb", buffering=0) as handle:
        expected = os.fstat(handle.fileno()).st_size
        room = min(chunk, expected) + SLACK
        buffer = (take or _same)(None, room)
        while True:
            want = min(chunk, max(expected - read, 1))     # a file that grows is read on, a window at a time
            if len(buffer) < carry + want:
                buffer.extend(bytes(carry + want - len(buffer)))
            with memoryview(buffer) as view:
                got = handle.readinto(view[carry:carry + chunk])
            if not got:
                break
            read += got
            filled = carry + got
            cut = buffer.rfind(b"\n", carry, filled)
            if cut < 0:                                   # no line end in the whole block
                skipping = skipping or filled > max_line
                carry = 0 if skipping else filled
                continue
            if boundary is not None and not skipping:
                cut = _before_last(buffer, boundary, cut, filled - max_line)
            start = 0
            if skipping:                                  # the rest of an over-long line
                skipped.append(number)
                start = buffer.find(b"\n", 0, cut)
                start = cut if start < 0 else start
                skipping = False
            with memoryview(buffer) as view:
                rest = bytes(view[cut + 1:filled])
            size = _chunk(buffer, start, cut, number, max_line, skipped)
            if exact:
                del buffer[size:]
            yield number, buffer, size
            number += count(buffer, size) + 1
            buffer = buffer if take is None else take(buffer, room)
            buffer[:len(rest)] = rest
            carry = len(rest)
            if carry > max_line:
                skipping, carry = True, 0
        if skipping:
            skipped.append(number)
        elif carry:
            size = _chunk(buffer, 0, carry, number, max_line, skipped)
            if exact:
                del buffer[size:]
            yield number, buffer, size
    if skipped:
        shown = ", ".join(str(n) for n in skipped[:5])
        notes.append(f"{len(skipped)} line(s) longer than {max_line >> 20} MiB skipped (line {shown}"
                     f"{', ...' if len(skipped) > 5 else ''})")


def _same(buffer: bytearray | None, size: int) -> bytearray:
    return bytearray(size) if buffer is None else buffer


def _before_last(buffer: bytearray, boundary: bytes, cut: int, least: int) -> int:
    """The line end before the last line (ending at or before ``cut``) that holds ``boundary``, when it
    is past both the buffer's start and ``least``; else ``cut``."""
    mark = buffer.rfind(boundary, 0, cut)
    end = buffer.rfind(b"\n", 0, mark) if mark > 0 else -1
    return end if end > max(least, 0) else cut


def _chunk(buffer: bytearray, start: int, end: int, number: int, max_line: int, skipped: list[int]) -> int:
    """Moves the chunk ``buffer[start:end]`` to the buffer's start, its over-long lines emptied; its size."""
    if end - start > max_line and not _no_long_line(buffer, max_line, start, end):
        data = _blank_long_lines(bytes(buffer[start:end]), number, max_line, skipped)
        buffer[:len(data)] = data
        return len(data)
    if start:
        _move(buffer, start, end)
    return end - start


def _move(buffer: bytearray, start: int, end: int) -> None:
    """``buffer[start:end]`` to the buffer's start, in place (the ranges may overlap)."""
    import ctypes

    holder = (ctypes.c_char * len(buffer)).from_buffer(buffer)
    try:
        ctypes.memmove(ctypes.addressof(holder), ctypes.addressof(holder) + start, end - start)
    finally:
        del holder


def _blank_long_lines(data: bytes, number: int, max_line: int, skipped: list[int]) -> bytes:
    lines = data.split(b"\n")
    for index, line in enumerate(lines):
        if len(line) > max_line:
            skipped.append(number + index)
            lines[index] = b""
    return b"\n".join(lines)


def _no_long_line(data: bytearray, max_line: int, begin: int, end: int) -> bool:
    """True when every line of ``data[begin:end]`` is at most ``max_line`` bytes: a longer line would
    hold a whole aligned stretch of ``max_line // 2`` bytes without a line end, so one ``find`` per
    such stretch tells (each stops at its first line end)."""
    half = max(max_line // 2, 1)
    return all(data.find(b"\n", start, start + half) >= 0 for start in range(begin, end - half + 1, half))


def text(line: bytes, bad: list[int] | None = None, number: int = 0) -> str:
    """``line`` as text; undecodable bytes become U+FFFD and the line number goes to ``bad``."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        if bad is not None:
            bad.append(number)
        return line.decode("utf-8", errors="replace")


def bad_lines(data: bytes, first: int, bad: list[int]) -> None:
    """Appends to ``bad`` the number of each line of ``data`` (its first line numbered ``first``) that holds
    bytes that are not UTF-8: each line, not only a chunk's first (the note's count must not depend on
    the chunk size, which differs between the readers' paths). Pure ASCII is one test."""
    if data.isascii():
        return
    start, number = 0, first
    while True:
        try:
            str(memoryview(data)[start:], "utf-8")
            return
        except UnicodeDecodeError as error:
            at = start + error.start
            number += data.count(b"\n", start, at)
            bad.append(number)
            start = data.find(b"\n", at) + 1
            if start == 0:
                return
            number += 1


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
