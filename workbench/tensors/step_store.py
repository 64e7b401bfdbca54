"""A step-store kind folder (``ROOT/step_{N}/{kind}/``) as a tensor source: gradients, weights and
optimizer states go through the same spec plans, ``workbench convert`` and ``weights diff`` as checkpoints.

Opening reads the manifest only (a folder without one is an incomplete step and is refused) and
lists the folder once (a ``.npy`` the manifest does not list is refused). Each tensor is read on
demand: its ``.npy`` header is checked against the file size and against the manifest, the
file's sha256 against the manifest's (once per tensor), then the data is memory-mapped.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ..errors import InputError
from .base import STORAGE, SourceBase, TensorMeta
from .bytecopy import FileSpan
from .common import mapped_array, missing_tensor, unsupported_dtype

# numpy dtype of a stored .npy -> the STORAGE name it travels as (bf16 is stored as fp32 by the writer)
NUMPY_NAMES = {str(np.dtype(storage)): name for name, storage in STORAGE.items() if name != "bf16"}
FRAMEWORKS = ("megatron", "mindformers")
_REWRITE = "the file changed after it was written: write this step again"


def is_step_store_folder(path: Path) -> bool:
    """A declared kind folder (``grads``, ...) inside a ``step_{N}`` folder (manifest present or not)."""
    from ..replay.step_kinds import load_step_layout

    layout = load_step_layout()
    names = {layout.kind_dir.format(kind=kind) for kind in layout.kinds}
    return path.name in names and layout.parse_step(path.resolve().parent.name) is not None


class StepStoreSource(SourceBase):
    """One ``step_{N}/{kind}/`` folder of a step store, read lazily (see the module doc)."""

    def __init__(self, path: Path | str):
        from ..replay.step_kinds import load_step_layout
        from ..replay.step_store import read_step_manifest

        self.path = Path(path)
        self.layout = load_step_layout()
        self.manifest = read_step_manifest(self.path, self.layout)
        self.step, self.kind, self.meta = self.manifest.step, self.manifest.kind, self.manifest.meta
        # the framework whose names the tensors carry (the manifest's side): convert's format candidates
        self.framework = self.meta.get("side") if self.meta.get("side") in FRAMEWORKS else None
        self.skipped: dict[str, str] = {}
        self._metas: dict[str, TensorMeta] = {}
        for name, entry in self.manifest.tensors.items():
            dtype = NUMPY_NAMES.get(entry["dtype"])
            if dtype is None:
                self.skipped[name] = unsupported_dtype(entry["dtype"], NUMPY_NAMES)
                continue
            self._metas[name] = TensorMeta(name, tuple(entry["shape"]), dtype)
        self._check_listing()
        self.files = [self.path / self.layout.file(name) for name in self.manifest.tensors]
        self._verified: dict[str, int] = {}

    def _check_listing(self) -> None:
        listed = {self.layout.file(name) for name in self.manifest.tensors}
        with os.scandir(self.path) as entries:
            extra = sorted(e.name for e in entries if e.name.endswith(".npy") and e.name not in listed)
        if extra:
            raise InputError(str(self.path / extra[0]), f"not listed in {self.layout.manifest} "
                             f"({len(extra)} such file(s))", "write this step again, or remove files added later")

    def metas(self) -> dict[str, TensorMeta]:
        return dict(self._metas)

    def _checked(self, name: str) -> tuple[Path, int]:
        """(file, data offset) of a tensor whose header and sha256 agree with the manifest."""
        from ..replay.npy_files import npy_layout

        if name not in self._metas:
            raise missing_tensor(self.path, name, self._metas)
        path = self.path / self.layout.file(name)
        if name in self._verified:
            return path, self._verified[name]
        entry, meta = self.manifest.tensors[name], self._metas[name]
        try:
            shape, dtype, offset = npy_layout(path, c_order=True)
        except InputError as error:      # missing, truncated, corrupt: named with the parameter
            raise InputError(f"{path} [{name}]", error.problem, error.fix) from None
        if shape != meta.shape or str(dtype) != entry["dtype"]:
            raise InputError(f"{path} [{name}]", f"holds {dtype} {list(shape)}, {self.layout.manifest} says "
                             f"{entry['dtype']} {list(meta.shape)}", _REWRITE)
        size = path.stat().st_size
        if size != entry["bytes"]:
            raise InputError(f"{path} [{name}]", f"{size} bytes, {self.layout.manifest} says {entry['bytes']}",
                             _REWRITE)
        digest = _file_sha256(path)
        if digest != entry["sha256"]:
            raise InputError(f"{path} [{name}]", f"sha256 {digest[:12]}… differs from {self.layout.manifest}'s "
                             f"{entry['sha256'][:12]}…", _REWRITE)
        self._verified[name] = offset
        return path, offset

    def read(self, name: str) -> np.ndarray:
        path, offset = self._checked(name)
        meta = self._metas[name]
        return mapped_array(path, offset, meta.shape, meta.dtype)

    def span(self, name: str) -> FileSpan:
        """The tensor's stored bytes (C order), for a writer that copies them without decoding."""
        path, offset = self._checked(name)
        return FileSpan(path, offset, self._metas[name].nbytes)

    def close(self) -> None:
        """Nothing is held open: every ``read`` maps its own file."""


def _file_sha256(path: Path, chunk: int = 16 * 2**20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
