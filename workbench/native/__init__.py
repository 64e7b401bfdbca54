"""Optional compiled scanners, loaded with ``ctypes``; every caller keeps an exact Python path.

A library is ``workbench/native/_<name>.so``, built from ``<name>.c`` by ``build.py`` (the wheel's
build hook runs it; so does ``scripts/env.sh``). ``library(name)`` returns it only when it exists and
was built from the source beside it (its exported ``workbench_source_hash`` equals the source's
SHA-256), otherwise ``None``. ``WORKBENCH_NATIVE=0`` turns every library off, which the tests use to
check that both paths give identical results.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent


def enabled() -> bool:
    return os.environ.get("WORKBENCH_NATIVE", "1") != "0"


def library(name: str):
    """The loaded ``ctypes.CDLL`` for ``name``, or ``None`` (off, not built, stale or unloadable)."""
    return load(name) if enabled() else None


def function(name: str, symbol: str, argtypes: tuple, restype):
    """The function ``symbol`` of library ``name`` with its C types set, or ``None`` (as ``library``)."""
    loaded = library(name)
    return None if loaded is None else _typed(loaded, symbol, argtypes, restype)


def scanned_bytes(name: str, path, what: str):
    """The bytes of a file that library ``name`` scans: mapped where it is loaded
    (:func:`workbench.input_files.mapped_bytes`: the file's cached pages, not a copy in a fresh buffer), else
    read. A map is no ``bytes``: ``bytes(raw)`` where json or the Python path takes it."""
    from ..input_files import mapped_bytes, read_bytes

    return (read_bytes if library(name) is None else mapped_bytes)(path, what=what)


def address(data):
    """A ``c_char_p`` to the bytes of ``data``: ``bytes``, or a read-only memory map
    (:func:`workbench.input_files.mapped_bytes`; ctypes gives no pointer into a read-only buffer, numpy does).
    The caller keeps ``data`` alive while the pointer is used."""
    import ctypes

    if isinstance(data, bytes):
        return ctypes.c_char_p(data)
    import numpy as np

    return ctypes.c_char_p(np.frombuffer(data, np.uint8).ctypes.data)


@functools.lru_cache(maxsize=None)
def _typed(loaded, symbol: str, argtypes: tuple, restype):
    typed = getattr(loaded, symbol)
    typed.argtypes, typed.restype = list(argtypes), restype
    return typed


@functools.lru_cache(maxsize=None)
def load(name: str, directory: Path = HERE):
    import ctypes

    source, built = directory / f"{name}.c", directory / f"_{name}.so"
    if not (source.is_file() and built.is_file()):
        return None
    try:
        loaded = ctypes.CDLL(str(built))
        stamp = loaded.workbench_source_hash
    except (OSError, AttributeError):
        return None
    stamp.restype = ctypes.c_char_p
    from .build import source_hash

    try:
        current = source_hash(source)                   # the source and the headers it includes
    except OSError:
        return None
    if stamp() != current.encode():
        return None
    return loaded
