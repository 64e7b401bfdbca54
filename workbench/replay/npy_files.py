"""Reading captured ``.npy`` files: one-line :class:`CaptureError`s naming the file, header-only shapes."""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError


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
    """``np.load`` without pickles; a truncated or corrupt file raises a CaptureError naming it."""
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
    except (ValueError, EOFError, OSError) as error:
        raise CaptureError(str(path), f"truncated or corrupt .npy ({str(error).splitlines()[0][:120]})",
                           "re-capture this step or remove it", check="corrupt") from None


def npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a ``.npy`` header (reads a few hundred bytes)."""
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = reader(handle)
            return tuple(shape), dtype
    except FileNotFoundError:
        raise CaptureError(str(path), "file not found", "re-capture this step", check="missing") from None
    except (ValueError, EOFError, OSError) as error:
        raise CaptureError(str(path), f"truncated or corrupt .npy ({str(error).splitlines()[0][:120]})",
                           "re-capture this step or remove it", check="corrupt") from None
