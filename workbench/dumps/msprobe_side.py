"""The side files of an msprobe dump.json: ``construct.json`` (row name -> the module/cell it ran in) and
``stack.json`` (stack id -> [[row names], [lines]]), read once per dump.json.

stack.json's usual form (every value ``[[names], [lines]]``) is read by a compiled scanner (``dumpside`` in
``workbench/native/dumpside.h``) into spans of the bytes, so no line of a stack is decoded, and so is
construct.json's (every value a string or null: ``dumpconstruct``); the compiled reader then joins both to the
entry names by their bytes (:mod:`.msprobe_join`). Anything else (escapes in ids, names or parents, other forms,
repeated stack ids, invalid JSON or UTF-8) is read through ``json`` (:func:`workbench.input_files.parse_json`),
which gives the result or the one-line error (``tests/test_dump_read_fast.py`` and ``tests/test_dump_join.py``
hold both paths to the same result).
"""
from __future__ import annotations

import ctypes
from itertools import repeat
from pathlib import Path

from ..errors import InputError
from ..input_files import parse_json
from ..native import address, library, scanned_bytes
from .formats import DumpFormats
from .msprobe_join import Construct, entry_parents, join, scan_construct
from .msprobe_lines import as_list, spans
from .msprobe_native import is_utf8, texts
from .msprobe_scan import FULL, OK, START
from .msprobe_sink import FIX

_INT64_P = ctypes.POINTER(ctypes.c_int64)
CONSTRUCT = "msprobe construct.json"


class Beside:
    """construct.json and stack.json of a dump.json's folder, read once: :meth:`load` may read them early (while
    the compiled scan runs in another thread); an error is kept and raised where the reader asks for the file,
    so errors come in the order of a reader that reads them when it needs them. ``entry_infos(names, parents,
    fmt, stems)``: the reader's parsing of entry names (:meth:`infos`)."""

    def __init__(self, folder: Path, fmt: DumpFormats, entry_infos):
        import threading

        self.fmt, self.entry_infos = fmt, entry_infos
        self.paths = {"parents": folder / fmt.msprobe["construct_file"], "stacks": folder / fmt.msprobe["stack_file"]}
        self.found: dict = {}
        # a scan started ahead loads them in its thread while the reader may ask: one reads a file, the other waits
        self.lock = threading.Lock()

    def load(self) -> None:
        for key in self.paths:
            try:
                self._get(key)
            except InputError:
                pass                                            # kept: raised when asked for

    def parents(self) -> dict:
        return self._dict("parents")

    def stacks(self) -> dict[str, str]:
        return self._dict("stacks")

    def infos(self, names: list[str], stems=None, raw: bytes | None = None, entries=None):
        """Ops, module paths, passes of these entry names with construct.json's parents, and whether any is a
        parameter gradient (``stems``: the names' compiled stem numbering, when there is one; ``raw`` and
        ``entries``: dump.json's bytes and the names' spans, which construct.json's spans are joined to)."""
        construct = self._get("parents")
        if isinstance(construct, Construct) and stems is not None and entries is not None:
            joined = entry_parents(raw, entries, construct, _texts)
            if joined is not None:
                return self.entry_infos(names, None, self.fmt, stems, joined)
        return self.entry_infos(names, self.parents(), self.fmt, stems)

    def stack_ids(self, names: list[str], raw: bytes, entries):
        """Each entry's stack id ("" where none): stack.json's name spans joined to the entries' where both were
        scanned, else a lookup per name."""
        import numpy as np

        found = self._get("stacks")
        if isinstance(found, Stacks):
            member = join(raw, entries, found.raw, found.names[:, 1:], last=False)     # the first id naming it
            if member is not None:
                ids = np.array([*found.keys, ""], dtype=object)
                return ids[np.where(member >= 0, found.names[np.maximum(member, 0), 0], -1)]
        return list(map(self.stacks().get, as_list(names), repeat("", len(names))))

    def _dict(self, key: str) -> dict:
        found = self._get(key)
        if isinstance(found, (Construct, Stacks)):                # the spans as json's dict, once
            found = _construct_dict(found.raw, self.paths[key]) if key == "parents" else found.as_dict()
            with self.lock:
                self.found[key] = found, None
        return found

    def _get(self, key: str):
        with self.lock:
            if key not in self.found:
                try:
                    self.found[key] = (load_construct if key == "parents" else load_stacks)(self.paths[key]), None
                except InputError as error:
                    self.found[key] = None, error
            value, error = self.found[key]
        if error is not None:
            raise error
        return value


class Stacks:
    """stack.json's usual form as spans: ``raw``, the ids decoded (``keys``, distinct), and ``names`` (member
    index, offset, length per name)."""

    def __init__(self, raw: bytes, keys: list[str], names):
        self.raw, self.keys, self.names = raw, keys, names

    def as_dict(self) -> dict[str, str]:
        """name → the first id naming it: the items reversed, so that the first is the one kept."""
        names = self.names
        return {name: self.keys[member] for member, name in zip(reversed(names[:, 0].tolist()),
                                                                reversed(_texts(self.raw, names[:, 1:])), strict=True)}


def read_construct(path: Path) -> dict:
    """construct.json: row name → the module/cell it ran in (absent file: no parents)."""
    found = load_construct(path)
    return _construct_dict(found.raw, path) if isinstance(found, Construct) else found


def load_construct(path: Path):
    """construct.json as :class:`.msprobe_join.Construct` spans where its usual form was scanned, else as
    :func:`read_construct`'s dict (through ``json``, which gives the result or the one-line error)."""
    if not path.is_file():
        return {}
    raw = scanned_bytes("dumpscan", path, CONSTRUCT)
    pairs = scan_construct(raw) if is_utf8(raw) else None
    return Construct(raw, pairs) if pairs is not None else _construct_dict(raw, path)


def _construct_dict(raw: bytes, path: Path) -> dict:
    data = parse_json(bytes(raw), str(path), what=CONSTRUCT)          # json takes bytes, not a map
    if not isinstance(data, dict):
        raise InputError(str(path), f"is {type(data).__name__}, expected a mapping of names to parents", FIX)
    return data


def read_stacks(path: Path) -> dict[str, str]:
    """stack.json: row name → stack id (``{"0": [[names], [lines]]}``; older: ``{name: [lines]}``); the first id
    naming a row is kept."""
    found = load_stacks(path)
    return found.as_dict() if isinstance(found, Stacks) else found


def load_stacks(path: Path):
    """stack.json as :class:`Stacks` spans where its usual form was scanned, else :func:`read_stacks`'s dict."""
    if not path.is_file():
        return {}
    what = "msprobe stack.json"
    raw = scanned_bytes("dumpscan", path, what)
    found = _scan(raw)
    if found is not None:
        members, names = found
        keys = _texts(raw, members[:, :2])
        if len(set(keys)) == len(keys):                        # json keeps a repeated id's last value, first place
            return Stacks(raw, keys, names)
    data = parse_json(bytes(raw), str(path), what=what)
    if not isinstance(data, dict):
        raise InputError(str(path), f"is {type(data).__name__}, expected a mapping", FIX)
    # {name: the first key naming it}: the items reversed, so that the first key is the one kept; a value of
    # another form names its own key
    return {name: key for key, value in reversed(data.items())
            for name in (value[0] if type(value) is list and len(value) == 2 and type(value[0]) is list else (key,))
            if type(name) is str}


def _texts(raw: bytes, found) -> list[str]:
    """The strings at (offset, length) rows: lines of one buffer where the library is built, else slices of the
    text decoded once (ASCII) or of the bytes."""
    lines = spans(raw, found)
    if lines is not None:
        return lines
    raw = bytes(raw)
    return texts(raw, found, raw.decode("ascii") if raw.isascii() else None)


def _scan(raw: bytes):
    """(members, names) arrays of the compiled scan of a stack.json, or None where ``json`` must decide."""
    import numpy as np

    scanner = library("dumpscan")
    if scanner is None:
        return None
    if not is_utf8(raw):
        return None                                             # parse_json names the byte
    scanner.dumpside.restype = ctypes.c_int
    # a member takes at least 9 bytes ("":[[],[]]), a name 3 ("",); at most START of each first, 4 times more
    # when a scan fills them
    member_cap, name_cap = min(len(raw) // 9 + 1, START), min(len(raw) // 3 + 1, START)
    while True:
        members = np.empty((member_cap, 2), np.int64)
        names = np.empty((name_cap, 3), np.int64)
        counts = np.zeros(2, np.int64)
        code = scanner.dumpside(address(raw), ctypes.c_int64(len(raw)), members.ctypes.data_as(_INT64_P), ctypes.c_int64(member_cap),
                                names.ctypes.data_as(_INT64_P), ctypes.c_int64(name_cap), counts.ctypes.data_as(_INT64_P))
        if code == FULL:
            grown = counts[0] >= member_cap, counts[1] >= name_cap
            member_cap, name_cap = member_cap * (4 if grown[0] else 1), name_cap * (4 if grown[1] else 1)
            if any(grown):
                continue
        if code != OK:
            return None
        return members[:counts[0]], names[:counts[1]]
