"""Hidden temporaries beside an output (``.NAME.XXXXXXXX.part``), tracked so none outlives the run.

A temporary is named before it is created and recorded before the ``open``/``mkdir``, so a signal
arriving at any bytecode — inside the creation, before the writer's ``with`` block is set up, or
during its clean-up — still leaves a record: the CLI removes every temporary that is still recorded
when it exits (:func:`remove_leftovers`). A writer that commits (renames) or discards one calls
:func:`forget`.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

_PENDING: set[Path] = set()


def new_temporary(destination: Path, suffix: str = ".part", folder: bool = False) -> tuple[Path, int | None]:
    """Create a new temporary beside ``destination``: (path, open read-write descriptor), or
    (path, None) for a folder. Mode 0600/0700 until the writer sets the final mode."""
    destination = Path(destination)
    for _ in range(100):
        path = destination.parent / f".{destination.name}.{os.urandom(4).hex()}{suffix}"   # = secrets.token_hex(4)
        _PENDING.add(path)
        try:
            if folder:
                os.mkdir(path, 0o700)
                return path, None
            return path, os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        except FileExistsError:
            _PENDING.discard(path)
        except OSError:
            _PENDING.discard(path)
            raise
    raise FileExistsError(f"no free temporary name beside {destination}")


def forget(path: Path | str) -> None:
    """The temporary was renamed into place or removed by its writer."""
    _PENDING.discard(Path(path))


def remove_leftovers() -> list[Path]:
    """Remove every temporary still recorded (an interrupted writer's); returns what was removed."""
    removed = []
    for path in list(_PENDING):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
            removed.append(path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        _PENDING.discard(path)
    return removed
