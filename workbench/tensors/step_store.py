"""A step-store kind folder (``ROOT/step_{N}/{kind}/``) as a tensor source: gradients, weights and
optimizer states go through the same spec plans, ``workbench convert`` and ``weights diff`` as checkpoints.
A kind folder of rank folders (``rank_dir``, written on TP / PP ranks) is read as one state dict,
merged by :mod:`.megatron_ranks` exactly as a Megatron checkpoint (:func:`open_step_store`).

Opening reads the manifest only (a folder without one is an incomplete step and is refused) and
lists the folder once (a ``.npy`` the manifest does not list is refused). Each tensor is read on
demand: its ``.npy`` header is checked against the file size and against the manifest, the
file's sha256 against the manifest's (once per tensor), then the data is memory-mapped.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from .base import STORAGE_TYPE_NAMES, SourceBase, TensorMeta
from .bytecopy import FileSpan
from .common import mapped_array, missing_tensor, unsupported_dtype
from .folder_kinds import is_step_store_folder  # noqa: F401
from .megatron_ranks import RankFile, RankMergedSource
from .megatron_rules import ParallelRule, megatron_parallel_rules

# numpy dtype of a stored .npy -> the STORAGE name it travels as (bf16 is stored as fp32 by the writer)
NUMPY_NAMES = {type_name.rstrip("_"): name for name, type_name in STORAGE_TYPE_NAMES.items() if name != "bf16"}
FRAMEWORKS = ("megatron", "mindformers")
_REWRITE = "the file changed after it was written: write this step again"


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
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


# ----------------------------------------------------------------------------- rank folders, merged

def open_step_store(path: Path | str) -> SourceBase:
    """A kind folder as a source: its own manifest (one shard), or its rank folders merged."""
    from ..replay.step_kinds import load_step_layout

    path, layout = Path(path), load_step_layout()
    if not os.path.lexists(path / layout.manifest) and _rank_folders(path, layout):
        return StepStoreRanksSource(path)
    return StepStoreSource(path)


def _rank_folders(path: Path, layout) -> dict[tuple[int, int], Path]:
    with os.scandir(path) as entries:
        names = [entry.name for entry in entries if entry.is_dir()]
    return {rank: path / name for name in sorted(names) if (rank := layout.parse_rank(name)) is not None}


def _agreed(shards: dict, key: str, where: Path) -> object:
    values = {repr(source.meta.get(key)): source.meta.get(key) for source in shards.values()}
    if len(values) != 1:
        raise InputError(str(where), f"rank folders disagree on meta.{key}: {sorted(values)[:4]}",
                         "every rank folder must come from the same capture: capture this step again")
    return next(iter(values.values()))


class StepStoreRanksSource(RankMergedSource):
    """A kind folder of ``rank_dir`` shards (one per TP rank and pipeline stage) as one state dict with
    global names, merged by ``converters/megatron_parallel.yaml`` exactly as a Megatron checkpoint is."""

    def __init__(self, path: Path | str, rules: list[ParallelRule] | None = None):
        from ..replay.step_kinds import load_step_layout

        path, layout = Path(path), load_step_layout()
        self.shards = {rank: StepStoreSource(folder) for rank, folder in _rank_folders(path, layout).items()}
        first = self.shards[min(self.shards)]
        self.step, self.kind, self.framework = first.step, first.kind, first.framework
        self.meta = {key: value for key, value in first.meta.items() if key not in ("tp_rank", "pp_rank")}
        sizes = [_agreed(self.shards, key, path) for key in ("tp_size", "pp_size")]
        _agreed(self.shards, "swiglu", path)
        if len({source.step for source in self.shards.values()}) != 1:
            raise InputError(str(path), "rank folders hold different steps", "capture this step again")
        missing = [layout.rank_dir.format(tp=t, pp=p) for t in range(sizes[0]) for p in range(sizes[1])
                   if (t, p) not in self.shards]
        if missing:
            raise InputError(str(path / missing[0]), f"missing: {len(missing)} of the tp {sizes[0]} x pp {sizes[1]} "
                             f"rank folders are absent", "copy every rank folder of this step and kind, or capture again")
        if sizes[0] > 1 and not isinstance(first.meta.get("swiglu"), bool):
            raise InputError(str(first.manifest.path), "meta.swiglu is missing: the tensor-parallel merge of "
                             "linear_fc1 depends on Megatron's --swiglu", "capture again with swiglu= or args=")
        args = argparse.Namespace(tensor_model_parallel_size=sizes[0], pipeline_model_parallel_size=sizes[1],
                                  swiglu=first.meta.get("swiglu", False))
        files = [RankFile(source.path, tp, pp, 0, source.metas(), dict(source.skipped))
                 for (tp, pp), source in self.shards.items()]
        super().__init__(path, files, args, str(first.manifest.path),
                         rules if rules is not None else megatron_parallel_rules())

    def _shard_meta(self, rank: RankFile, local: str) -> tuple[tuple[int, ...], str | None]:
        meta = rank.tensors[local]
        return meta.shape, meta.dtype

    def _shard_array(self, rank: RankFile, local: str) -> np.ndarray:
        return self.shards[(rank.tp, rank.pp)].read(local)

    def close(self) -> None:
        for source in self.shards.values():
            source.close()
        super().close()
