"""Atomic output files: write beside the target, then rename; never clobber without --force."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import InputError


def check_writable(path: Path | str, force: bool) -> Path:
    """Fail early (before any work) when ``path`` exists and ``force`` is off."""
    path = Path(path)
    if path.exists() and not force:
        raise InputError(str(path), "output file already exists", "pass --force to overwrite it, or choose another path")
    if not path.parent.exists():
        raise InputError(str(path), f"folder {path.parent} does not exist", "create it first")
    return path


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it over ``path`` on success."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(handle)
    try:
        yield Path(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_text_atomic(path: Path | str, text: str) -> None:
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
