"""The one writer of per-step ``.npy`` folders (batch capture and the step store): atomic, manifest last.

Every array is written as ``.NAME.*.part`` and renamed (:func:`save_npy_atomic`, which returns the
file's manifest entry: shape, dtype, sha256, bytes). A folder's manifest is written last
(:func:`write_manifest_last`) and removed first when the folder is started again
(:func:`restart_folder`), so a killed writer always leaves a folder without a manifest: incomplete,
and every reader refuses it.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from ..fileio import atomic_path, write_text


def to_numpy(value) -> np.ndarray | None:
    """A torch tensor (any device, bf16 included) or array-like → numpy; None stays None."""
    if value is None:
        return None
    if hasattr(value, "detach"):
        value = value.detach()
        if str(getattr(value, "dtype", "")) == "torch.bfloat16":
            value = value.float()
        return value.cpu().numpy()
    return np.asarray(value)


def numpy_dtype(value) -> np.dtype:
    """The dtype :func:`to_numpy` gives ``value``, without converting it (bf16 travels as fp32)."""
    dtype = getattr(value, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype
    if dtype is not None and str(dtype).startswith("torch."):
        name = str(dtype)[len("torch."):]
        return np.dtype("float32" if name == "bfloat16" else "bool" if name == "bool" else name)
    return np.asarray(value).dtype


def save_npy_atomic(path: Path, array: np.ndarray) -> dict:
    """``np.save`` to a ``.part`` file beside ``path``, then rename; returns its manifest entry.

    The sha256 is that of the file: the header bytes read back plus the array's memory (the
    bytes ``np.save`` wrote), so the data is not serialised twice.
    """
    array = np.require(array, requirements="C")
    with atomic_path(path) as temporary, open(temporary, "w+b") as out:
        np.lib.format.write_array(out, array, allow_pickle=False)
        size = out.tell()
        out.seek(0)
        digest = hashlib.sha256(out.read(size - array.nbytes))
        digest.update(memoryview(array.reshape(-1).view(np.uint8)) if array.size else b"")
    return {"shape": list(array.shape), "dtype": str(array.dtype), "sha256": digest.hexdigest(), "bytes": size}


def write_json_atomic(path: Path, data: dict) -> None:
    write_text(path, json.dumps(data, indent=1))


def restart_folder(folder: Path, manifest: str | None) -> None:
    """An empty ``folder``; one written before (a resumed run) loses its manifest first, then its files."""
    if folder.exists():
        if manifest and (folder / manifest).exists():
            (folder / manifest).unlink()
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def drop_manifest(folder: Path, manifest: str | None) -> None:
    """Mark a finished folder incomplete again (more data arrives for it)."""
    if manifest and (folder / manifest).exists():
        (folder / manifest).unlink()


def write_manifest_last(folder: Path, manifest: str, data: dict) -> Path:
    """The folder's manifest, written after every file it lists (atomically): the folder is now complete."""
    write_json_atomic(folder / manifest, data)
    return folder / manifest
