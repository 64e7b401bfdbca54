"""Tensor bytes copied file to file, without decoding them: the fast path of a rename.

A conversion step that only renames a tensor (same dtype, no transform; see
:func:`workbench.spec.plan.is_byte_copy`) hands the writer a :class:`FileSpan` — where the
tensor's bytes lie in the source file — instead of an array. The writer copies that range
in the kernel (``copy_file_range``, else ``sendfile``), so the bytes never enter this process:
no page faults on a memory map, no array copy, memory unchanged. Where neither call works
(another OS, an exotic file system) the range is read and written in 16 MiB chunks.

The kernel copies page-cache pages: when a range lands at an output offset with the same residue
modulo :data:`PAGE` as in its source, each source page fills exactly one destination page, which
costs less kernel time than a shifted range (10-40 % less CPU time measured). Writers that can choose where a tensor's bytes
start (safetensors header padding, a ``.ckpt`` padding field) take those source offsets as
``aligned_to`` and match their residues (see :func:`page_padding`). A long range is then copied in two
calls, its head up to the next :data:`FOLIO` boundary of the output and its bulk from there
(:func:`chunk_length`): the kernel fills the output's page cache with large pages only from such a
boundary on, and a range that starts between them costs ~20 % more kernel time throughout (Linux 6.18,
ext4: a 2 GiB ``.ckpt`` 0.94-1.12 s of system time in one call per tensor, 0.78-0.89 s in two).

A range whose residues differ (a safetensors output from a sharded source: one header, so only one
source shard's residue can be matched) is read into a :data:`BUFFER` of user memory and written from it
instead: the kernel's copy of a shifted range costs twice an aligned one, a read and a write through a
buffer that stays in the CPU's caches about 1.2 times (Linux 6.18, ext4, 512 MiB from a hot page cache:
copy_file_range 0.16 s aligned, 0.37 s shifted 8 bytes; pread + pwrite of 4 MiB pieces 0.19 s shifted).
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError

CHUNK = 16 * 2**20     # the pieces of a copy to a pipe or device (written in order)
BUFFER = 4 * 2**20     # the pieces of a shifted range: 1-4 MiB stay in the CPU's caches (16 MiB costs 15 % more)
PAGE = 4096            # the usual page size; a fixed value keeps the output bytes the same on every machine
ALIGN_FROM = 1 << 20   # ranges shorter than this are not worth padding for (the gain is per byte, the pad per range)
FOLIO = 2 << 20        # the largest page-cache page on x86-64 (a PMD): where a long copy's bulk starts in the output
# errors meaning "this call cannot copy between these two files": try the next way
_UNSUPPORTED = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}


@dataclass(frozen=True)
class FileSpan:
    """``length`` bytes at ``offset`` of ``path``: a stored tensor, or a slice of one (``span[a:b]``)."""

    path: Path
    offset: int
    length: int

    @property
    def size(self) -> int:
        return self.length

    def __getitem__(self, key: slice) -> "FileSpan":
        start, stop, stride = key.indices(self.length)
        if stride != 1:
            raise ValueError("a FileSpan slice must be contiguous")
        return FileSpan(self.path, self.offset + start, max(0, stop - start))


def byte_view(payload: np.ndarray | FileSpan) -> np.ndarray | FileSpan:
    """A writer's payload as flat bytes: a span stays a span, an array becomes a C-order uint8 view."""
    if isinstance(payload, FileSpan):
        return payload
    import numpy as np

    return np.ascontiguousarray(payload).reshape(-1).view(np.uint8)


def page_padding(position: int, wanted: int) -> int:
    """Bytes to skip from ``position`` so that the next byte lies at ``wanted`` modulo :data:`PAGE`."""
    return (wanted - position) % PAGE


def copy_span(span: FileSpan, handle) -> None:
    """Append ``span``'s bytes to the open binary file ``handle`` (buffered or not) at its position."""
    handle.flush()
    seekable = handle.seekable()                  # a device or pipe (written directly) has no position
    position = handle.tell() if seekable else 0
    with open(span.path, "rb") as source:
        copied = (_copy(source.fileno(), handle.fileno(), span.offset, position, span.length) if seekable
                  else _append(source.fileno(), handle, span.offset, span.length))
    if copied != span.length:
        raise InputError(str(span.path), f"{span.length} bytes expected at byte {span.offset}, only {copied} "
                         "could be read: the file shrank while it was being converted", "re-run the conversion")
    if seekable:
        handle.seek(position + span.length)


def _append(source: int, handle, offset: int, length: int) -> int:
    """Chunks read and written in order: for targets without a position (pipes, devices)."""
    done = 0
    while done < length:
        chunk = os.pread(source, min(CHUNK, length - done), offset + done)
        if not chunk:
            break
        handle.write(chunk)
        done += len(chunk)
    return done


def _copy(source: int, target: int, offset: int, position: int, length: int) -> int:
    """Bytes copied, each chunk by the first of copy_file_range / sendfile / pread+pwrite that works here."""
    if (offset - position) % PAGE:
        return _buffered(source, target, offset, position, length)
    ways = [_copy_file_range, _sendfile, _read_write]
    done = 0
    while done < length:
        try:
            count = ways[0](source, target, offset + done, position + done, chunk_length(position + done, length - done))
        except (OSError, AttributeError) as error:       # AttributeError: the call does not exist on this OS
            if len(ways) == 1 or (isinstance(error, OSError) and error.errno not in _UNSUPPORTED):
                raise
            ways.pop(0)
            continue
        if count == 0:                                     # end of the source file
            break
        done += count
    return done


def chunk_length(position: int, left: int) -> int:
    """The next copy call's length from output offset ``position``: up to 1 GiB, and a range of at least
    :data:`ALIGN_FROM` first copies its head up to the next multiple of :data:`FOLIO`, so that its bulk starts
    on a large-page boundary of the output::

        output  ...|--- head ---|-------------- bulk (1 GiB calls) ---------------|...
                   position     k * FOLIO
    """
    head = (-position) % FOLIO if left >= ALIGN_FROM else 0
    return head if 0 < head < left else min(left, 2**30)


def _copy_file_range(source: int, target: int, offset: int, position: int, length: int) -> int:
    return os.copy_file_range(source, target, length, offset, position)


def _sendfile(source: int, target: int, offset: int, position: int, length: int) -> int:
    os.lseek(target, position, os.SEEK_SET)
    return os.sendfile(target, source, offset, length)


def _read_write(source: int, target: int, offset: int, position: int, length: int) -> int:
    view = memoryview(os.pread(source, min(CHUNK, length), offset))
    written = 0
    while written < len(view):
        written += os.pwrite(target, view[written:], position + written)
    return written


def _buffered(source: int, target: int, offset: int, position: int, length: int) -> int:
    """Bytes copied through one reused :data:`BUFFER`: the way for a range whose page residues differ."""
    buffer = memoryview(bytearray(min(BUFFER, length)))
    done = 0
    while done < length:
        count = os.preadv(source, [buffer[:min(len(buffer), length - done)]], offset + done)
        if count == 0:                                     # end of the source file
            break
        written = 0
        while written < count:
            written += os.pwrite(target, buffer[written:count], position + done + written)
        done += count
    return done
