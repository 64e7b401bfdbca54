"""Where the workbench may write, and the one-line error when a write fails: the checks every output passes
before any work, and ``OSError`` → :class:`~workbench.errors.InputError` (errno mapped here, and only here).
:mod:`workbench.fileio` writes through them.

- :func:`check_output` runs before any work: an existing file needs ``force``; a folder, a
  block device or a socket is refused; the parent folder must exist and be writable.
- :func:`output_kind` says what a path is (character devices, FIFOs and ``/dev/stdout``, ``/dev/fd/N``
  are streams, written into directly).
- :func:`os_error` turns an ``OSError`` (permission denied, read-only file system, disk full,
  a path under a file, ...) into the one-line error.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from .errors import InputError

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
