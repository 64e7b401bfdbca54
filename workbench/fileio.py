"""The one way the workbench writes files: atomically, with the umask's mode, one-line errors.

- :func:`~workbench.output_checks.check_output` runs before any work (what may be written, and the
  one-line errors: :mod:`workbench.output_checks`).
- :class:`AtomicFile` (and :func:`atomic_file`, :func:`atomic_path`, :func:`write_text`,
  :func:`write_bytes`) writes a regular file as ``.NAME.XXXX.part`` beside the target and
  renames it into place on success; any exception (a signal included, see
  :mod:`workbench.interrupts`) removes the temporary file. The renamed file gets mode
  ``0o666 & ~umask`` (0644 under umask 022), like any file a shell command creates.
- A **symlink** is followed: the file it points to is replaced atomically, the link stays.
- A **character device or FIFO** (``/dev/null``, a terminal, a named pipe) is written into
  directly: nothing is renamed over it, so the device node survives. ``/dev/stdout``,
  ``/dev/stderr`` and ``/dev/fd/N`` write into that open descriptor, whatever it is (a shell
  redirect ``> file`` or ``>> file`` decides), like the shell itself.
- :meth:`AtomicFile.reserve` asks the file system for the blocks of a large output before it is
  written (Linux ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``): the kernel then copies into blocks it
  has already allocated, as fast as ``cp`` (see :func:`reserve_blocks`). The size stays what was
  written: :meth:`AtomicFile.commit` cuts blocks reserved past the end.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from .blocks import free_past_end, reserve_blocks
from .output_checks import from_writing, open_descriptor, os_error, output_kind
from .temporaries import forget, new_temporary

# ----------------------------------------------------------------------------- writing

def file_mode() -> int:
    """``0o666 & ~umask``: the mode ``open(path, "w")`` would give a new file."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """``0o777 & ~umask``: the mode ``mkdir`` would give a new folder."""
    return 0o777 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (os.umask is process-global)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


class AtomicFile:
    """One output file being written (see the module doc).

    ``handle`` is open (binary, or UTF-8 text with ``text``) unless ``open_handle`` is False;
    ``temporary`` is the path to write (the target itself for a device or FIFO). :meth:`commit`
    renames it into place, :meth:`discard` removes it; as a context manager an exception
    discards, a clean exit commits. ``fsync`` makes the data and the rename durable.
    """

    def __init__(self, target: Path | str, text: bool = False, fsync: bool = False, open_handle: bool = True,
                 suffix: str = ".part"):
        self.target = Path(target)
        self.fsync = fsync
        self.handle: IO | None = None
        self.done = False
        self.reserved = 0                   # bytes of blocks reserved from offset 0 (see reserve)
        try:
            self.streaming = output_kind(self.target) == "stream"
            if self.streaming:
                self.destination = self.temporary = self.target
                descriptor = _open_stream(self.target) if open_handle else None
            else:
                self.destination = Path(os.path.realpath(self.target))
                self.temporary, descriptor = new_temporary(self.destination, suffix)
                if not open_handle:
                    os.close(descriptor)
                    descriptor = None
        except OSError as error:
            raise os_error(self.target, error) from None
        if descriptor is not None:
            self.handle = open(descriptor, "w" if text else "wb", encoding="utf-8" if text else None)

    def reserve(self, size: int) -> bool:
        """Allocate ``size`` bytes of blocks for the file being written, its size unchanged (see
        :func:`reserve_blocks`); nothing for a device, FIFO or descriptor target. True when reserved."""
        if self.streaming or self.handle is None or self.handle.closed:
            return False
        if not reserve_blocks(self.handle.fileno(), size):
            return False
        self.reserved = max(self.reserved, size)
        return True

    def commit(self) -> Path:
        """Flush, close and rename into place; returns the target."""
        try:
            self._close(sync=self.fsync)
            if not self.streaming:
                if self.fsync and self.handle is None:
                    _fsync_path(self.temporary)
                os.chmod(self.temporary, file_mode())
                os.replace(self.temporary, self.destination)
                forget(self.temporary)
                if self.fsync:
                    _fsync_path(self.destination.parent)
        except BaseException as error:      # a signal during the final flush too: no .part stays behind
            self.discard()
            if isinstance(error, OSError) and from_writing(error, self.temporary, self.destination, self.target):
                raise os_error(self.target, error) from None
            raise
        self.done = True
        return self.target

    def discard(self) -> None:
        """Close and remove the temporary file (a device or FIFO keeps what it received)."""
        try:
            self._close(sync=False, trim=False)
        except OSError:
            pass                            # the data is being thrown away: a failed flush does not matter
        if not self.streaming and not self.done:
            try:
                os.unlink(self.temporary)
            except FileNotFoundError:
                pass
            forget(self.temporary)
        self.done = True

    def close(self) -> None:
        """Close the handle only (the file is committed or discarded later)."""
        self._close(sync=False)

    def _close(self, sync: bool, trim: bool = True) -> None:
        """Flush and close the handle; blocks reserved past the end are freed first, so that a file closed
        before its commit (a finished shard) holds no more blocks than its size needs."""
        if self.handle is not None and not self.handle.closed:
            try:
                self.handle.flush()
                if trim and self.reserved:
                    free_past_end(self.handle.fileno(), self.reserved)
                if sync and not self.streaming:
                    os.fsync(self.handle.fileno())
            finally:
                self.handle.close()

    def __enter__(self) -> "AtomicFile":
        return self

    def __exit__(self, kind, error, trace) -> None:
        if kind is None:
            self.commit()
            return
        self.discard()
        if isinstance(error, OSError) and from_writing(error, self.temporary, self.destination, self.target):
            raise os_error(self.target, error) from None


PREALLOCATE_FROM = 64 * 2**20
"""Outputs whose copied bytes reach this size reserve their blocks first (below it the gain is noise)."""

def _open_stream(path: Path) -> int:
    """A descriptor to write into: a copy of the open one ``path`` names, else ``path`` opened."""
    number = open_descriptor(path)
    if number is None:
        return os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    for stream in (sys.stdout, sys.stderr):       # what Python buffered for the same descriptor goes first
        if stream is not None:
            stream.flush()
    return os.dup(number)


def _fsync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextmanager
def atomic_file(path: Path | str, text: bool = False, fsync: bool = False) -> Iterator[IO]:
    """An open handle whose content becomes ``path`` when the block ends without an exception."""
    with AtomicFile(path, text=text, fsync=fsync) as output:
        yield output.handle


@contextmanager
def atomic_path(path: Path | str, fsync: bool = False, suffix: str = ".part") -> Iterator[Path]:
    """A path to hand to a library that writes by name (``torch.save``, ``savefig``); it becomes
    ``path`` when the block ends without an exception. ``suffix`` ends the temporary name."""
    with AtomicFile(path, fsync=fsync, open_handle=False, suffix=suffix) as output:
        yield output.temporary


def write_text(path: Path | str, text: str | list, fsync: bool = False) -> Path:
    """``text`` (or its pieces, one after the other) written in 1 MiB pieces: encoding a report of tens of MB at
    once would hold a second copy. A piece that is not a str is text already encoded in UTF-8 (a CSV's rows as
    the compiled writer made them): written as it is, after the text before it, also in 1 MiB pieces (one
    write of 52 MB took ~0.1 s more CPU than 52 writes of 1 MiB, the first time in a process)."""
    with atomic_file(path, text=True, fsync=fsync) as handle:
        for piece in [text] if isinstance(text, str) else text:
            if isinstance(piece, str):
                for start in range(0, len(piece), _TEXT_PIECE):
                    handle.write(piece[start:start + _TEXT_PIECE])
                continue
            handle.flush()
            data = memoryview(piece).cast("B")
            for start in range(0, len(data), _TEXT_PIECE):
                handle.buffer.write(data[start:start + _TEXT_PIECE])
    return Path(path)


_TEXT_PIECE = 1 << 20


def write_bytes(path: Path | str, data: bytes, fsync: bool = False) -> Path:
    with atomic_file(path, fsync=fsync) as handle:
        handle.write(data)
    return Path(path)


def link_into_place(existing: Path | str, target: Path | str) -> bool:
    """Hard-link ``existing`` as ``target`` atomically (replacing it); False where links fail."""
    target = Path(target)
    output = AtomicFile(target, open_handle=False)
    if output.streaming:
        return False
    try:
        os.unlink(output.temporary)
        os.link(existing, output.temporary)
        os.replace(output.temporary, output.destination)
    except BaseException as error:
        output.discard()
        if isinstance(error, OSError):
            return False
        raise
    output.done = True
    return True
