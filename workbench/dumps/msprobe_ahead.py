"""Scans of msprobe ``dump.json`` files started before their reader asks for them.

A comparison knows its first unit's files long before it reads them: between the two it imports what matching
needs (pandas alone takes ~0.2 s of one core), and with the compiled scanner each file's scan runs in a thread
that lets go of the GIL (:class:`.msprobe_native.PendingScan`). So :func:`scans_ahead` starts those scans
first, each followed in its thread by the reading of the file's side files (:class:`.msprobe_side.Beside`);
:func:`.readers_msprobe.read_dump_json` takes a started scan of its path (:func:`take`) instead of starting one.

Nothing changes what is read: a scan is taken only by a reader of the same path with the same formats, and only
while the file's identity (device, inode, size, modification time) is the one it had when the scan started;
otherwise the scan is dropped and the reader starts its own. Errors are not raised here: opening or scanning
fails again in the reader, which reports it as without a scan ahead. Leaving the block (or :func:`settle`,
before a process pool forks: a thread does not survive a fork) waits for every scan still running.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from .formats import DumpFormats

_AHEAD: dict[str, tuple] = {}           # path -> (formats, file identity, PendingScan, Beside)


def _identity(path: str) -> tuple | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns


def start(paths, fmt: DumpFormats) -> None:
    """Start the compiled scan of each dump.json path (none where the scanner does not take this format)."""
    from ..native import scanned_bytes
    from .msprobe_entries import entry_infos
    from .msprobe_scan import PendingScan, scan_plan
    from .msprobe_side import Beside

    plan = scan_plan(fmt)
    for path in map(os.fspath, paths):
        identity = _identity(path)
        if plan is None or identity is None or path in _AHEAD:
            continue
        try:
            raw = scanned_bytes("dumpscan", path, "msprobe dump.json")
        except Exception:                          # noqa: BLE001 - the reader opens it again and reports it
            continue
        beside = Beside(Path(path).parent, fmt, entry_infos)
        _AHEAD[path] = (fmt, identity, PendingScan(raw, plan, then=beside.load), beside)


def take(path: Path | str, fmt: DumpFormats):
    """(the started scan of ``path``: a :class:`.msprobe_native.PendingScan`, its bytes in ``.raw``; its side
    files), or None."""
    path = os.fspath(path)
    started = _AHEAD.pop(path, None)
    if started is None:
        return None
    started_fmt, identity, pending, beside = started
    if started_fmt is not fmt or _identity(path) != identity:
        _drop(pending)
        return None
    return pending, beside


def settle() -> None:
    """Wait for every started scan (before a fork); they stay to be taken."""
    for *_started, pending, _beside in _AHEAD.values():
        pending.thread.join()


@contextmanager
def scans_ahead(paths, fmt: DumpFormats):
    """The scans of ``paths`` started now, taken by the readers inside the block; the rest dropped at its end."""
    start(paths, fmt)
    try:
        yield
    finally:
        while _AHEAD:
            _drop(_AHEAD.popitem()[1][2])


def _drop(pending) -> None:
    pending.thread.join()                  # its arrays and map go with it; its error, if any, is the reader's
