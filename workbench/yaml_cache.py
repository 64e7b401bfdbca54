"""Parsed knowledge YAML kept as JSON between runs, so a command does not parse checklists/keys.yaml and
every converter spec again (PyYAML's composer and constructor, the bounds scan and the line map cost about
40 ms a command; reading the cached JSON about 1 ms).

Only the knowledge bases (``checklists/``, ``converters/``, ``datasets/``, wherever they are found) are
cached, never a user's config. An entry is keyed by the SHA-256 of the file's text (and
:data:`CACHE_VERSION`), so an edited file is simply parsed again; it holds the data and every dotted
path's line (the same answers the parsed document's line map gives). It is used only when it is JSON
that round-trips the data exactly (a file holding dates, binary, sets or non-string keys is not cached),
it belongs to this user, and it has the expected shape; anything else is parsed afresh. What the cache
holds is data, checked by the same validators as freshly parsed YAML: nothing in it is executed.

Where: ``$WORKBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/workbench``, else ``~/.cache/workbench`` (folders
created 0700). ``WORKBENCH_CACHE_DIR=off`` turns it off. A cache that cannot be written is skipped silently.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path

try:        # the interpreter's own SHA-256 (hashlib's import loads OpenSSL first: ~4 ms of every command)
    from _sha256 import sha256            # Python 3.11
except ImportError:                       # pragma: no cover - other versions
    try:
        from _sha2 import sha256          # Python >= 3.12
    except ImportError:
        from hashlib import sha256

CACHE_VERSION = 1
"""Bump when what an entry holds, or how YAML becomes data, changes."""

MAX_ENTRY_BYTES = 64 << 20
"""A bigger entry is not read (a knowledge file's entry is under 1 MB; this one is not ours)."""

MAX_ENTRIES = 256
"""Entries kept; past this the oldest are removed (each edit of a knowledge file adds one)."""


def cache_folder() -> Path | None:
    """The folder of YAML entries, or None when caching is off."""
    chosen = os.environ.get("WORKBENCH_CACHE_DIR")
    if chosen is not None:
        return None if chosen in ("", "off", "0") else Path(chosen) / "yaml"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "workbench" / "yaml"


def cached_parse(text: str, path: Path, parse: Callable):
    """``parse(text, path)``'s document, from the cache when an entry for exactly this text exists."""
    from .yamlio import YamlDoc

    folder = cache_folder()
    if folder is None:
        return parse(text, path)
    entry = folder / f"{_key(text)}.json"
    found = _read(entry)
    if found is not None:
        return YamlDoc(Path(path), found[0], found[1])
    doc = parse(text, path)
    try:
        data = _encode(doc.data)
    except _NotCacheable:
        return doc
    _write(folder, entry, {"data": data, "lines": {dotted: doc.lines[dotted] for dotted in doc.lines}})
    return doc


def _key(text: str) -> str:
    digest = sha256(f"workbench-yaml/{CACHE_VERSION}\0".encode())
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _read(entry: Path) -> tuple[object, dict[str, int]] | None:
    try:
        found = entry.stat()
        if found.st_uid != os.getuid() or found.st_size > MAX_ENTRY_BYTES:
            return None
        found = json.loads(entry.read_bytes(), object_hook=_decode_mapping)
    except (OSError, ValueError, TypeError, RecursionError):
        return None
    if not (isinstance(found, dict) and set(found) == {"data", "lines"} and isinstance(found["lines"], dict)):
        return None
    lines = found["lines"]
    if not all(type(line) is int for line in lines.values()):
        return None
    return found["data"], lines


def _write(folder: Path, entry: Path, content: dict) -> None:
    from .errors import InputError
    from .fileio import write_text

    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_text(entry, json.dumps(content, separators=(",", ":")))
        _prune(folder)
    except (OSError, InputError):
        pass                                  # a read-only or full disk: parse next time, as without a cache


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.json"), key=lambda file: file.stat().st_mtime)
    for stale in entries[:max(0, len(entries) - MAX_ENTRIES)]:
        stale.unlink(missing_ok=True)


PAIRS = "\u0000pairs"
"""A mapping whose keys are not all strings (YAML's ``map: {0: a, true: b}``) is stored as
``{PAIRS: [[key, value], ...]}``: JSON object keys are strings only."""


class _NotCacheable(Exception):
    """The data holds something JSON does not give back unchanged (dates, binary, sets, NaN)."""


def _encode(value: object) -> object:
    """``value`` as JSON data that :func:`_decode_mapping` turns back into an equal value (recursion is
    bounded: parsed YAML nests at most ``yaml_scan.DEPTH_LIMIT`` levels)."""
    kind = type(value)
    if kind is dict:
        if PAIRS in value:
            raise _NotCacheable
        if all(type(key) is str for key in value):
            return {key: _encode(item) for key, item in value.items()}
        if not all(key is None or type(key) in (str, int, bool, float) for key in value):
            raise _NotCacheable
        return {PAIRS: [[key, _encode(item)] for key, item in value.items()]}
    if kind is list:
        return [_encode(item) for item in value]
    if kind is float and math.isnan(value):        # NaN != NaN: a cached document would not equal a parsed one
        raise _NotCacheable
    if value is None or kind in (str, int, bool, float):
        return value
    raise _NotCacheable


def _decode_mapping(mapping: dict) -> dict:
    if PAIRS in mapping:
        pairs = mapping[PAIRS]
        if len(mapping) != 1 or not isinstance(pairs, list) or not all(
                isinstance(pair, list) and len(pair) == 2 and not isinstance(pair[0], (list, dict)) for pair in pairs):
            raise ValueError("a damaged cache entry")
        return dict(pairs)
    return mapping
