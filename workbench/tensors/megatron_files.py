"""What every Megatron checkpoint reader shares: the tracker file and typed access to ``args``.

``latest_checkpointed_iteration.txt`` (Megatron-LM ``megatron/training/checkpointing.py``,
``read_metadata``) holds the last saved iteration as a decimal number, or ``release``; the
iteration's folder is ``iter_{:07d}`` or ``release``. Anything else (``²``, non-UTF-8 bytes, a
path) is one InputError naming the tracker file; the text never becomes a path.

``args`` is the ``argparse.Namespace`` pickled in every rank file; :func:`arg` reads one value
and checks its type, naming the key when a damaged or hand-edited checkpoint holds ``'two'``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, location

TRACKER_FILE = "latest_checkpointed_iteration.txt"
_TRACKER_LIMIT = 4096
_DECIMAL = re.compile(r"[0-9]{1,12}")            # ASCII only: str.isdigit() accepts '²', int() does not
_MISSING = object()


@dataclass(frozen=True)
class Tracked:
    """What a tracker file names: an iteration, or the release checkpoint."""

    iteration: int | None                   # None: release

    @property
    def folder(self) -> str:
        return "release" if self.iteration is None else f"iter_{self.iteration:07d}"


def read_tracker(root: Path) -> Tracked | None:
    """The iteration named by ``root/latest_checkpointed_iteration.txt``; None when there is no tracker."""
    tracker = Path(root) / TRACKER_FILE
    if not tracker.is_file():
        return None
    try:
        with open(tracker, "rb") as handle:
            raw = handle.read(_TRACKER_LIMIT + 1)
    except OSError as error:
        raise InputError(location(tracker), f"cannot be read ({error.strerror or error})",
                         "check its permissions") from None
    where = location(tracker, 1)
    fix = "write the iteration number Megatron saved (or 'release'), or pass the iter_* folder"
    if len(raw) > _TRACKER_LIMIT:
        raise InputError(where, f"more than {_TRACKER_LIMIT} bytes: not a tracker file", fix)
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as error:
        raise InputError(where, f"not UTF-8 text (byte {raw[error.start]:#04x} at offset {error.start})",
                         fix) from None
    if text == "release":
        return Tracked(None)
    if not _DECIMAL.fullmatch(text):
        raise InputError(where, f"expected an iteration number or 'release', found {text[:40]!r}", fix)
    return Tracked(int(text))


_KINDS = {int: "an integer", str: "a string", bool: "true/false", float: "a number"}


def arg(args: Any, key: str, kind: type, default: Any = _MISSING, where: str = "") -> Any:
    """``args.key`` checked to be ``kind`` (int, str, bool or float); ``default`` when absent or None.

    bool is not accepted as an int; an int is accepted as a float. Without a default, an absent
    key is an InputError too.
    """
    value = getattr(args, key, None) if args is not None else None
    if value is None:
        if default is _MISSING:
            raise InputError(f"{where} [args.{key}]", "missing from the checkpoint's args",
                             "pass a checkpoint saved by Megatron with its args")
        return default
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise InputError(f"{where} [args.{key}]", f"expected {_KINDS.get(kind, kind.__name__)}, found "
                         f"{type(value).__name__} {str(value)[:40]!r}", "the checkpoint's args are damaged: "
                         "re-save the checkpoint or pass the training log instead")
    return value
