"""Plumbing shared by the readers and writers: memory-mapped views, partial output files and
the ordered-arrival contract of every :class:`~workbench.tensors.base.TensorSink`.

A sink knows every tensor (name, shape, dtype) before the first byte arrives, so it can write
headers first and stream each tensor's bytes straight from the caller's buffer. Output goes
to ``.<name>.*.part`` files beside the target (:class:`workbench.fileio.AtomicFile`; a
device or FIFO is written into directly) and is renamed into place by ``finish``; any
error inside ``write`` or ``finish`` discards the partial files before it propagates.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from ..fileio import AtomicFile
from ..output_checks import from_writing, os_error
from .base import STORAGE, TensorMeta
from .bytecopy import FileSpan, copy_span
from .sizes import numel


# ----------------------------------------------------------------------------- reading

def mapped_array(path: Path, offset: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A read-only ``np.memmap`` of exactly ``shape`` x ``dtype`` bytes at ``offset`` of ``path``."""
    import numpy as np

    storage = STORAGE[dtype]
    count = numel(shape)
    if count == 0:                      # mmap cannot map zero bytes
        return np.empty(shape, dtype=storage)
    view = np.memmap(path, dtype=storage, mode="r", offset=offset, shape=(count,))
    return view.reshape(shape)


def missing_tensor(where: Path | str, name: str, known: Iterable[str]) -> InputError:
    """The error every source raises for an unknown tensor name."""
    import difflib

    known = list(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.8)
    hint = f"similar: {', '.join(close)}" if close else f"it holds {len(known)} tensors; list them with metas()"
    return InputError(str(where), f"no tensor named {name!r}", hint)


UNSUPPORTED = "is not supported"
"""The words every reader's ``skipped`` reason uses for a dtype it cannot convert."""


def unsupported_dtype(code: str, supported: Iterable[str]) -> str:
    """The one wording for a dtype no reader converts (kept in ``skipped``; named when conversion fails)."""
    return f"dtype {code} {UNSUPPORTED}; supported: {', '.join(supported)}"


def explain_skipped_dtype(source, error: InputError) -> InputError:
    """``error``, or the error naming a tensor ``source`` skipped for its dtype when that explains it.

    It does when ``error`` names that tensor as missing, or when no spec fits the names that remain.
    """
    reasons = {name: reason for name, reason in (getattr(source, "skipped", None) or {}).items()
               if UNSUPPORTED in reason}
    name = error.where if error.where in reasons else next(iter(reasons), None)
    if name is None or (name != error.where and not error.where.endswith("tensor names")):
        return error
    return InputError(f"{source.path} [{name}]", reasons[name],
                      "convert those tensors to a supported dtype first (or pass --allow-unmapped to leave them out)")


# ----------------------------------------------------------------------------- writing

class PartialFile(AtomicFile):
    """A binary :class:`~workbench.fileio.AtomicFile` beside ``target`` that takes numpy arrays."""

    def __init__(self, target: Path):
        super().__init__(target)

    def write_array(self, array: np.ndarray | FileSpan) -> None:
        """The array's bytes in C order, without a copy when it is already contiguous (a span: copied file to file)."""
        if isinstance(array, FileSpan):
            copy_span(array, self.handle)
            return
        import numpy as np

        flat = np.ascontiguousarray(array).reshape(-1)
        self.handle.write(flat.view(np.uint8).data if flat.size else b"")


class StreamingSink:
    """Base of the writers: checks that tensors arrive in the planned order with planned shapes.

    Subclasses implement ``_emit(meta, array)``, ``_commit() -> list[Path]`` and ``_discard()``.
    Usable as a context manager: an exception aborts, a clean exit finishes.
    """

    def __init__(self, path: Path | str, metas: Iterable[TensorMeta]):
        self.path = Path(path)
        self.metas = list(metas)
        self._next = 0
        self._state = "open"
        seen: set[str] = set()
        for meta in self.metas:
            if meta.dtype not in STORAGE:
                raise InputError(f"{self.path} [{meta.name}]", f"unknown dtype {meta.dtype!r}",
                                 f"use one of {', '.join(STORAGE)}")
            if meta.name in seen:
                raise InputError(f"{self.path} [{meta.name}]", "tensor planned twice", "give each tensor one name")
            seen.add(meta.name)

    # -- the TensorSink interface
    def write(self, name: str, array: np.ndarray) -> None:
        try:
            meta = self._expect(name, array)
            self._emit(meta, array)
        except OSError as error:            # disk full, ... while streaming into a partial file
            self.abort()
            if from_writing(error):
                raise os_error(self.path, error) from None
            raise
        except BaseException:
            self.abort()
            raise

    def finish(self) -> list[Path]:
        if self._state != "open":
            raise InputError(str(self.path), f"sink already {self._state}", "open a new sink")
        try:
            if self._next != len(self.metas):
                missing = self.metas[self._next].name
                raise InputError(str(self.path), f"only {self._next} of {len(self.metas)} planned tensors were "
                                 f"written (next missing: {missing!r})", "write every planned tensor before finish()")
            files = self._commit()
        except BaseException:
            self.abort()
            raise
        self._state = "finished"
        return files

    def abort(self) -> None:
        if self._state == "open":
            self._state = "aborted"
            self._discard()

    def __enter__(self) -> "StreamingSink":
        return self

    def __exit__(self, kind, error, trace) -> None:
        if kind is not None:
            self.abort()
        elif self._state == "open":
            self.finish()

    # -- helpers for subclasses
    def _expect(self, name: str, array: np.ndarray) -> TensorMeta:
        where = f"{self.path} [{name}]"
        if self._state != "open":
            raise InputError(where, f"sink already {self._state}", "open a new sink")
        if self._next >= len(self.metas):
            raise InputError(where, f"unexpected tensor: all {len(self.metas)} planned tensors were already written",
                             "pass every tensor to the sink's metas")
        meta = self.metas[self._next]
        if name != meta.name:
            raise InputError(where, f"arrived out of order: expected {meta.name!r} "
                             f"(tensor {self._next + 1} of {len(self.metas)})",
                             "write tensors in the order of the metas")
        if isinstance(array, FileSpan):            # a stored byte range, copied as is (a rename)
            if array.length != meta.nbytes:
                raise InputError(where, f"a byte range of {array.length} bytes for {meta.dtype} {list(meta.shape)} "
                                 f"({meta.nbytes} bytes)", "pass the tensor's whole stored byte range")
            self._next += 1
            return meta
        import numpy as np

        if not isinstance(array, np.ndarray):
            raise InputError(where, f"expected a numpy array, got {type(array).__name__}", "convert it with .numpy()")
        storage = np.dtype(STORAGE[meta.dtype])
        if array.dtype != storage or tuple(array.shape) != tuple(meta.shape):
            raise InputError(where, f"expected {meta.dtype} (numpy {storage}) {list(meta.shape)}, "
                             f"got numpy {array.dtype} {list(array.shape)}",
                             "bf16 travels as uint16 raw bits; cast or reshape before writing")
        self._next += 1
        return meta

    def _emit(self, meta: TensorMeta, array: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _commit(self) -> list[Path]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _discard(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError
