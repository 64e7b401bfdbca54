"""The one way the workbench writes files: atomically, with the umask's mode, one-line errors.

- :func:`check_output` runs before any work: an existing file needs ``force``; a folder, a
  block device or a socket is refused; the parent folder must exist and be writable.
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
- :func:`os_error` turns an ``OSError`` (permission denied, read-only file system, disk full,
  a path under a file, ...) into the one-line :class:`~workbench.errors.InputError`.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from .blocks import free_past_end, reserve_blocks
from .errors import InputError
from .temporaries import forget, new_temporary

# ----------------------------------------------------------------------------- errors

_ERRNO_TEXT = {
    errno.EACCES: ("permission denied", "choose a folder you can write to, or fix its permissions"),
    errno.EPERM: ("operation not permitted", "choose a folder you can write to, or fix its permissions"),
    errno.EROFS: ("read-only file system", "write to a writable file system"),
    errno.ENOSPC: ("no space left on the device", "free some space or write to another file system"),
    errno.EDQUOT: ("disk quota exceeded", "free some space or write to another file system"),
    errno.EFBIG: ("file too large for this file system", "write to another file system"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "choose a path whose folders exist"),
    errno.EISDIR: ("is a folder", "name a file inside it, or another path"),
    errno.ENOENT: ("its folder does not exist", "create the folder first"),
    errno.ENAMETOOLONG: ("file name too long", "choose a shorter name"),
    errno.EPIPE: ("the reader of this pipe went away", "keep the reading side open until the end"),
    errno.ELOOP: ("too many levels of symbolic links", "fix the link, or write to another path"),
}


def os_error(path: Path | str, error: OSError) -> InputError:
    """The one-line error for a failed write to ``path`` (errno mapped here, and only here)."""
    problem, fix = _ERRNO_TEXT.get(error.errno, (f"cannot write ({error.strerror or error})",
                                                 "check the path and the file system"))
    if error.errno == errno.ENOTDIR:
        blocking = _file_in_the_way(Path(path))
        if blocking is not None:
            problem = f"{blocking} is a file, not a folder"
    elif error.errno == errno.ENOENT:
        problem = f"folder {Path(path).parent} does not exist"
    return InputError(str(path), problem, fix)


def _file_in_the_way(path: Path) -> Path | None:
    """The first ancestor of ``path`` that exists and is not a folder."""
    for ancestor in reversed(path.parents):
        if os.path.exists(ancestor) and not os.path.isdir(ancestor):
            return ancestor
    return None


def from_writing(error: OSError, *paths: Path | str | None) -> bool:
    """Whether ``error`` came from writing ``paths`` (no file name: a write to an open handle)."""
    return error.filename is None or os.fsdecode(error.filename) in {os.fsdecode(p) for p in paths if p is not None}


# ----------------------------------------------------------------------------- checks

_DESCRIPTOR_PATH = re.compile(r"/(?:dev|proc/self)/fd/(\d+)")
_STANDARD = {"/dev/stdout": 1, "/dev/stderr": 2}


def open_descriptor(path: Path | str) -> int | None:
    """The descriptor a path such as ``/dev/stdout`` or ``/dev/fd/3`` names, when it is open."""
    text = os.fspath(path)
    match = _DESCRIPTOR_PATH.fullmatch(text)
    number = _STANDARD.get(text, int(match.group(1)) if match else None)
    if number is None:
        return None
    try:
        os.fstat(number)
    except OSError:
        return None
    return number


def output_kind(path: Path | str) -> str:
    """What is at ``path`` (symlinks followed): missing, file, folder, stream (character device,
    FIFO or an open descriptor: written into directly), or block device / socket / other (refused)."""
    if open_descriptor(path) is not None:
        return "stream"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "stream"
    return "block device" if stat.S_ISBLK(mode) else "socket" if stat.S_ISSOCK(mode) else "special file"


def check_output(path: Path | str, force: bool, allow_folder: bool = False) -> Path:
    """Fail early, before any work, when ``path`` cannot or must not be written; returns it.

    An existing file (or, with ``allow_folder``, folder) needs ``force``; devices and FIFOs are
    streamed into and need no ``force`` (nothing is replaced).
    """
    path = Path(path)
    try:
        kind = output_kind(path)
        if kind == "stream":
            if not os.access(path, os.W_OK):
                raise OSError(errno.EACCES, "not writable", str(path))
            return path
        if kind == "folder" and not allow_folder:
            raise InputError(str(path), "is a folder", f"name a file inside it, e.g. {path / 'out'}")
        if kind not in ("missing", "file", "folder"):
            raise InputError(str(path), f"is a {kind}", "write to a regular file, a character device or a FIFO")
        if kind != "missing" and not force:
            raise InputError(str(path), f"output {kind} already exists",
                             "pass --force to overwrite it, or choose another path")
        _check_folder(Path(os.path.realpath(path)).parent, path)
    except OSError as error:
        raise os_error(path, error) from None
    return path


def _check_folder(folder: Path, path: Path) -> None:
    """The folder that will receive the temporary file exists and takes new files."""
    if not folder.is_dir():
        raise OSError(errno.ENOTDIR if _file_in_the_way(path) else errno.ENOENT, "no folder", str(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        read_only = os.statvfs(folder).f_flag & os.ST_RDONLY
        raise OSError(errno.EROFS if read_only else errno.EACCES, "not writable", str(path))


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


def write_text(path: Path | str, text: str, fsync: bool = False) -> Path:
    """``text`` written in 1 MiB pieces: encoding a report of tens of MB at once would hold a second copy."""
    with atomic_file(path, text=True, fsync=fsync) as handle:
        for start in range(0, len(text), _TEXT_PIECE):
            handle.write(text[start:start + _TEXT_PIECE])
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
