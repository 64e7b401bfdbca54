"""Reading user inputs: once, bounded, with one-line errors for every way a path can be wrong.

Every reader of a user-supplied file goes through here, so the same input gets the same
message everywhere:

* a missing path, a folder, a broken or looping symlink, a permission problem, a FIFO where
  a regular file is needed (``mmap`` needs one) each get their own message;
* a file is read ONCE (``workbench checklist meg.sh <(cat mf.yaml)`` hands over a pipe that
  can be read only once), and never more than ``limit`` bytes: the size is checked against
  ``stat`` before anything is allocated, and a stream is cut at ``limit + 1`` bytes;
* text must be UTF-8: the error names the line and byte;
* JSON nesting is bounded before ``json.loads`` would recurse; decoded values are checked
  for type with :func:`expect` (a number where a list is expected is an error, not a default).
"""
from __future__ import annotations

import errno
import json
import math
import mmap
import os
import stat
from pathlib import Path
from typing import Any

from .errors import InputError

TEXT_LIMIT = 256 * 1024 * 1024
"""The largest config / log / JSON file read whole into memory (256 MiB)."""

JSON_DEPTH_LIMIT = 200
"""Deepest JSON nesting accepted: real headers and indexes nest 3 levels."""


def describe_size(count: int) -> str:
    """Bytes in the unit people read (``1.5 MiB``)."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} bytes"  # pragma: no cover - the loop always returns


def input_stat(path: Path | str, *, regular: bool = False) -> os.stat_result:
    """``stat`` of an input, or one InputError saying what is wrong with the path.

    ``regular=True`` refuses pipes and devices (readers that memory-map or seek need a file).
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except OSError as error:
        raise _open_error(path, error) from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(str(path), "is a folder, expected a file", "pass the file itself")
    if regular and not stat.S_ISREG(info.st_mode):
        kind = "a pipe (FIFO)" if stat.S_ISFIFO(info.st_mode) else "not a regular file"
        raise InputError(str(path), f"is {kind}; this reader needs a regular file it can seek in",
                         "copy the data into a file first")
    return info


def read_bytes(path: Path | str, *, limit: int = TEXT_LIMIT, what: str = "file") -> bytes:
    """The whole content of ``path``, read once, at most ``limit`` bytes (else InputError)."""
    path = Path(path)
    info = input_stat(path)
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise InputError(str(path), f"{what} is {describe_size(info.st_size)}, more than the "
                         f"{describe_size(limit)} this reader accepts", f"pass the {what} itself, not a larger file")
    wanted = min(info.st_size, limit) + 1 if stat.S_ISREG(info.st_mode) else limit + 1  # no 256 MiB buffer per read
    try:
        with open(path, "rb") as handle:
            data = handle.read(wanted)
    except OSError as error:
        raise _open_error(path, error) from None
    if len(data) > limit:
        raise InputError(str(path), f"{what} is longer than the {describe_size(limit)} this reader accepts",
                         f"pass the {what} itself, not a larger stream")
    return data


def mapped_bytes(path: Path | str, *, limit: int = TEXT_LIMIT, what: str = "file"):
    """The content of a regular file as :func:`read_bytes` bounds it, as a read-only private memory map whose
    pages are mapped at once (``MAP_POPULATE``): the file's cached pages themselves, where ``read`` copies them
    into a fresh buffer and takes a page fault per 4 KiB of it (a 67 MB dump.json: 43-47 → 6-7 ms of CPU).
    Slices of the map are ``bytes``; it has no ``decode`` (``str(data, "utf-8")`` takes it). A pipe, an empty
    file or a file system that cannot map gets ``read_bytes``. As for the tensor readers' maps, the file must
    not be cut short while it is mapped (reading a page past the new end is SIGBUS)."""
    path = Path(path)
    info = input_stat(path)
    if not (stat.S_ISREG(info.st_mode) and 0 < info.st_size <= limit and hasattr(mmap, "PROT_READ")):
        return read_bytes(path, limit=limit, what=what)
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise _open_error(path, error) from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if 0 < size <= limit:
            try:
                return mmap.mmap(handle.fileno(), size, flags=mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0),
                                 prot=mmap.PROT_READ)
            except (OSError, ValueError):
                pass                                    # a file system without mmap: read as any file
    return read_bytes(path, limit=limit, what=what)


def decode_utf8(data: bytes, where: str) -> str:
    """``data`` as UTF-8 text; the error names the line and the byte offset of the bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError(f"{where}:{line}", f"not UTF-8 text (byte {error.start}: 0x{data[error.start]:02x})",
                         "pass a UTF-8 text file, not a binary or differently encoded one") from None


def read_text(path: Path | str, *, limit: int = TEXT_LIMIT, what: str = "file") -> str:
    """UTF-8 text of ``path``, read once and bounded (see :func:`read_bytes`)."""
    return decode_utf8(read_bytes(path, limit=limit, what=what), str(path))


_JSON_MARKS = bytes(c for c in range(256) if c not in b'"[]{}')   # bytes json_depth drops


def json_depth(text: str | bytes) -> int:
    """Deepest ``[``/``{`` nesting in JSON text, counted without recursion (strings skipped).

    Escaped backslashes and quotes are dropped, then every byte but quotes and brackets (C-speed bytes
    operations), and the brackets outside strings are counted with numpy: a 67 MB msprobe dump.json in
    0.3 s (a per-character loop took 10 s, two regex passes 3 s). An unterminated string counts its brackets.
    Up to :data:`_FEW_MARKS` quotes and brackets (a config.json, a safetensors header) are counted in Python:
    importing numpy would take longer than the file."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    compiled = _native_depth(data)
    if compiled is not None:
        return compiled
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _JSON_MARKS)
    if len(data) <= _FEW_MARKS:
        return _marks_depth(data)
    import numpy as np

    marks = np.frombuffer(data, np.uint8)
    quote = marks == ord('"')
    inside = (np.cumsum(quote, dtype=np.uint8) & 1).astype(bool)       # after an opening quote
    if inside[-1:].any():                                               # unterminated: its brackets count
        inside[np.flatnonzero(quote)[-1]:] = False
    brackets = marks[~inside & ~quote]
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1).astype(np.int64)
    return max(int(np.cumsum(steps).max(initial=0)), 0)


_FEW_MARKS = 50_000


def _native_depth(data: bytes) -> int | None:
    """:func:`json_depth` in one compiled pass (``workbench/native/jsondepth.h``, the same rules: 4 ms for a
    7 MB construct.json against 21 ms), or None without the library or for short text (loading it costs more)."""
    if len(data) <= _FEW_MARKS:
        return None
    from .native import library

    scanner = library("dumpscan")
    if scanner is None:
        return None
    import ctypes

    scanner.dumpscan_json_depth.restype = ctypes.c_int64
    found = scanner.dumpscan_json_depth(ctypes.c_char_p(data), ctypes.c_int64(len(data)))
    return found if found >= 0 else None


def _marks_depth(marks: bytes) -> int:
    """:func:`json_depth` of quotes and brackets only, one by one (the same rules as its numpy count)."""
    last_quote = marks.rfind(b'"')
    unterminated = marks.count(b'"') % 2 == 1         # then the brackets after the last quote count
    depth = deepest = 0
    inside = False
    for index, mark in enumerate(marks):
        if mark == 34:                                   # "
            inside = not inside
        elif not inside or (unterminated and index > last_quote):
            depth += 1 if mark in (91, 123) else -1      # [ {  against ] }
            deepest = max(deepest, depth)
    return deepest


def parse_json(text: str | bytes, where: str, *, max_depth: int = JSON_DEPTH_LIMIT, what: str = "JSON") -> Any:
    """``json.loads`` with nesting bounded first and one-line errors naming the line and column."""
    if isinstance(text, bytes):                    # the depth of the bytes: the text's, without encoding it again
        depth = json_depth(text)
        text = decode_utf8(text, where)
    else:
        depth = json_depth(text)
    if depth > max_depth:
        raise InputError(where, f"{what} nests {depth} levels deep, more than the {max_depth} accepted",
                         "this is not a file the tool wrote; pass the real one")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}:{error.lineno}:{error.colno}", f"invalid {what}: {error.msg}",
                         f"fix or regenerate the {what}") from None
    except (ValueError, RecursionError) as error:
        raise InputError(where, f"invalid {what}: {error}", f"fix or regenerate the {what}") from None


def read_json(path: Path | str, *, limit: int = TEXT_LIMIT, what: str = "JSON file") -> Any:
    """A JSON file read once, bounded in size and nesting."""
    return parse_json(read_bytes(path, limit=limit, what=what), str(path), what=what)


_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true/false",
               list: "a list", dict: "a mapping", type(None): "null"}


def type_word(value: Any) -> str:
    """How a decoded value's type is named in messages (``a string``, ``a list``, ...)."""
    return _TYPE_WORDS.get(type(value), type(value).__name__)


def expect(value: Any, types: type | tuple[type, ...], where: str, key: str, fix: str = "") -> Any:
    """``value`` when it is one of ``types`` (bool is never an int), else one InputError naming ``key``."""
    wanted = types if isinstance(types, tuple) else (types,)
    is_bool = isinstance(value, bool)
    accepted = isinstance(value, wanted) and (not is_bool or bool in wanted)
    if float in wanted and not accepted and isinstance(value, int) and not is_bool:
        accepted = True  # an integer is a number
    if not accepted:
        words = " or ".join(_TYPE_WORDS.get(kind, kind.__name__) for kind in wanted)
        raise InputError(where, f"{key} is {type_word(value)} ({_short(value)}), expected {words}",
                         fix or f"fix {key}")
    return value


def expect_count(value: Any, where: str, key: str, *, minimum: int = 0, maximum: int | None = None,
                 fix: str = "") -> int:
    """An integer (not bool) in ``[minimum, maximum]``: sizes, counts, offsets."""
    expect(value, int, where, key, fix)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise InputError(where, f"{key} is {value}, expected an integer {bound}", fix or f"fix {key}")
    return value


def expect_in_range(value: Any, where: str, key: str, *, minimum: float | None = None,
                    maximum: float | None = None, fix: str = "") -> Any:
    """A finite number (int or float, not bool) in ``[minimum, maximum]`` (either bound optional)."""
    expect(value, float, where, key, fix)
    if not math.isfinite(value):
        raise InputError(where, f"{key} is {value}, expected a finite number", fix or f"fix {key}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bound = (f"between {minimum:g} and {maximum:g}" if minimum is not None and maximum is not None
                 else f"at least {minimum:g}" if minimum is not None else f"at most {maximum:g}")
        raise InputError(where, f"{key} is {value}, expected {bound}", fix or f"fix {key}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _open_error(path: Path, error: OSError) -> InputError:
    if error.errno == errno.ENOENT:
        if os.path.islink(path):
            return InputError(str(path), f"is a broken symlink (to {os.readlink(path)})", "point it at an existing file")
        return InputError(str(path), "file not found", "check the path")
    if error.errno == errno.ELOOP:
        return InputError(str(path), "is a symlink that loops (points back at itself)", "point it at a real file")
    if error.errno == errno.EACCES:
        return InputError(str(path), "permission denied", "make it readable, or copy it somewhere you can read")
    if error.errno == errno.ENOTDIR:
        return InputError(str(path), "a part of this path is a file, not a folder", "check the path")
    if error.errno == errno.EISDIR:
        return InputError(str(path), "is a folder, expected a file", "pass the file itself")
    return InputError(str(path), f"cannot read it ({os.strerror(error.errno or 0) or error})", "check the path")
