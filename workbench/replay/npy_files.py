"""Reading captured ``.npy`` files: one-line :class:`CaptureError`s naming the file, header-only shapes
(checked against the file size before any array is allocated)."""
from __future__ import annotations

import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..input_files import input_stat
from ..tensors.sizes import check_claim, tensor_bytes


@dataclass
class CaptureError(InputError):
    """An :class:`InputError` from a capture, with the check that failed (for ``verify``)."""

    check: str = "input"


def describe_numbers(numbers: list[int]) -> str:
    """``[0, 1, 2, 5, 6]`` → ``0-2, 5-6``."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def load_npy(path: Path, verify_sha256: str | None = None) -> np.ndarray:
    """``np.load`` without pickles, after :func:`npy_header` checked the header against the file.

    A truncated, corrupt or lying file raises a CaptureError naming it; nothing is allocated
    for a header that claims more data than the file holds.
    """
    npy_header(path)
    try:
        if verify_sha256 is not None:
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest != verify_sha256:
                raise CaptureError(str(path), f"sha256 {digest[:12]}… differs from manifest.json's "
                                   f"{verify_sha256[:12]}…", "the file changed after capture: re-capture this step",
                                   check="manifest")
            return np.load(io.BytesIO(data), allow_pickle=False)
        return np.load(path, allow_pickle=False)
    except CaptureError:
        raise
    except FileNotFoundError:
        raise CaptureError(str(path), "file not found", "re-capture this step", check="missing") from None
    except _BAD_NPY as error:
        raise _corrupt(path, error) from None


def npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a ``.npy`` header (reads a few hundred bytes), checked against the file size."""
    shape, dtype, _ = npy_layout(path)
    return shape, dtype


def npy_layout(path: Path, c_order: bool = False) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, data offset) of a ``.npy``, the header checked against the file size
    (``c_order``: a Fortran-order file is refused, for readers that memory-map the data)."""
    if not os.path.lexists(path):
        raise CaptureError(str(path), "file not found", "re-capture this step", check="missing")
    try:
        size = input_stat(path, regular=True).st_size
        with open(path, "rb") as handle:
            shape, dtype, offset = _header(handle, c_order)
        _check_claim(shape, dtype, size - offset, str(path))
        return shape, dtype, offset
    except CaptureError:
        raise
    except InputError as error:
        raise CaptureError(error.where, error.problem, error.fix, check="corrupt") from None
    except _BAD_NPY as error:
        raise _corrupt(path, error) from None


_BAD_NPY = (ValueError, EOFError, OSError, SyntaxError, RecursionError, MemoryError)


def _header(handle, c_order: bool = False) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, offset of the data) of the ``.npy`` stream at ``handle``'s position."""
    version = np.lib.format.read_magic(handle)
    reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = reader(handle)
    if c_order and fortran_order and len(shape) > 1:
        raise ValueError("Fortran-order array (the memory map reads C order; save with np.ascontiguousarray)")
    return tuple(shape), dtype, handle.tell()


def _check_claim(shape, dtype: np.dtype, available: int, where: str) -> None:
    needed = tensor_bytes(shape, dtype.itemsize, where)
    check_claim(needed, available, where, f"truncated or corrupt .npy: its header ({dtype} {list(shape)})")


def load_npz(path: Path, keys: tuple[str, ...], fix: str) -> dict[str, np.ndarray]:
    """Arrays ``keys`` of an ``.npz``, each member's header checked against its size before loading.

    Errors are InputErrors naming the file and the array (``path [tokens]``).
    """
    input_stat(path, regular=True)
    try:
        with zipfile.ZipFile(path) as archive:
            for key in keys:
                where = f"{path} [{key}]"
                try:
                    info = archive.getinfo(f"{key}.npy")
                except KeyError:
                    raise InputError(str(path), f"missing array {key!r} (it holds "
                                     f"{', '.join(n[:-4] for n in archive.namelist()) or 'nothing'})", fix) from None
                with archive.open(info) as member:
                    shape, dtype, offset = _header(member)
                _check_claim(shape, dtype, info.file_size - offset, where)
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in keys}
    except InputError:
        raise
    except (zipfile.BadZipFile, *_BAD_NPY) as error:
        text = (str(error).splitlines() or [type(error).__name__])[0][:120]
        raise InputError(str(path), f"not a readable .npz ({text})", fix) from None


def _corrupt(path: Path, error: BaseException) -> CaptureError:
    text = (str(error).splitlines() or [type(error).__name__])[0][:120]
    return CaptureError(str(path), f"truncated or corrupt .npy ({text})", "re-capture this step or remove it",
                        check="corrupt")
