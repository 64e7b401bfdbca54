"""Megatron ``torch_dist`` checkpoints, read one tensor at a time with torch.distributed.checkpoint.

::

    root/latest_checkpointed_iteration.txt
    root/iter_0000010/metadata.json      {"sharded_backend": "torch_dist", ..}
                      .metadata          pickled torch.distributed.checkpoint Metadata: global shape,
                                         dtype and saved chunks (offsets, sizes) per key
                      __R_K.distcp       each chunk stored as a small torch.save archive
                      common.pt          args and other non-sharded state

Tensors are *global* (tensor-parallel shards already joined; SwiGLU fc1 is the full
``[gate; up]``), and every transformer layer shares one key with a leading layer axis::

    decoder.layers.self_attention.linear_qkv.weight         [L, rows, h]
    decoder.layers.mlp.experts.experts.linear_fc1.weight    [L, E, 2F, h]   (SequentialMLP)

which this reader unstacks into ``decoder.layers.{i}.self_attention.linear_qkv.weight`` and
``decoder.layers.{i}.mlp.experts.local_experts.{e}.linear_fc1.weight``. ``read`` asks torch's
``FileSystemReader`` for exactly the chunks overlapping that layer (and expert), so memory
follows one layer's tensor. No process group is needed. ``.metadata`` is a plain pickle: it
is loaded by :class:`_MetadataUnpickler` (:mod:`workbench.safe_pickle`), which allows only the
checkpoint metadata classes, by (module, name), never a dotted name.
Optimizer state (``optimizer.*``), RNG state and byte objects (``_extra_state``) are skipped.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from .. import safe_pickle
from ..errors import InputError
from ..safe_pickle import SafeUnpickler, read_limited
from .base import SourceBase, TensorMeta
from .common import missing_tensor, numel
from .folder_kinds import METADATA_FILE, is_torch_dist  # noqa: F401
from .megatron_files import read_tracker
from .sizes import check_shape
from .torch_io import dtype_name, tensor_to_numpy

_STACKED = re.compile(r"^((?:.*\.)?(?:decoder|encoder)\.layers\.)(?!\d)(.+)$")
_EXPERTS = re.compile(r"^(.*\.experts\.)experts\.(?!\d)(.+)$")
_SINGLETON_EXPERT = re.compile(r"^(.*\.experts\.)experts\.(\d+\..+)$")
_SKIPPED_PREFIXES = ("optimizer.", "rng_state", "rerun_state_machine_state")
_FIX = "the checkpoint is damaged or not a torch_dist checkpoint: pass the iter_* folder Megatron wrote"


_DCP = "torch.distributed.checkpoint"
_METADATA_CLASSES = frozenset(
    [(f"{_DCP}.metadata", name) for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata",
                                             "ChunkStorageMetadata", "TensorProperties", "MetadataIndex",
                                             "StorageMeta", "_MEM_FORMAT_ENCODING")]
    + [(f"{_DCP}.filesystem", name) for name in ("_StorageInfo", "_StoragePrefix", "SerializationFormat")]
    + [(f"{_DCP}.planner", "WriteItemType"), (f"{_DCP}.planner", "LoadItemType"), (f"{_DCP}.storage", "WriteResult")]
    + [("torch", "Size"), ("collections", "OrderedDict"), ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"),
       ("pathlib", "PureWindowsPath"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice")])
"""The classes torch.distributed.checkpoint pickles into ``.metadata`` (torch 2.x ``metadata.py``,
``filesystem.py``), and nothing else: no reader, writer or planner class (``FileSystemWriter``
creates folders when built)."""
_METADATA_CALLABLES = frozenset({("torch.serialization", "_get_layout")})


class _MetadataUnpickler(SafeUnpickler):
    """Unpickles ``.metadata`` allowing only what torch.distributed.checkpoint writes there."""

    def __init__(self, file, where: str):
        super().__init__(file, where, classes=_METADATA_CLASSES, callables=_METADATA_CALLABLES)

    def resolve_family(self, module: str, name: str) -> Any | None:
        """``torch.float32``, ``torch.strided``, ``torch.contiguous_format``: dtype/layout objects."""
        import torch

        found = getattr(torch, name, None) if module == "torch" else None
        return found if isinstance(found, (torch.dtype, torch.layout, torch.memory_format)) else None


def iteration_dir(path: Path) -> Path:
    """The folder holding ``.metadata`` for a save root (tracker file) or an ``iter_*`` folder."""
    if not (path / METADATA_FILE).is_file():
        tracked = read_tracker(path)
        if tracked is not None:
            path = path / tracked.folder
    if not (path / METADATA_FILE).is_file():
        raise InputError(str(path), f"no {METADATA_FILE}: not a torch_dist checkpoint folder", _FIX)
    return path


def _load_metadata(folder: Path) -> Any:
    path = folder / METADATA_FILE
    try:
        with open(path, "rb") as handle:
            data = read_limited(handle, str(path))
    except OSError as error:
        raise InputError(str(path), f"cannot be read ({error.strerror or error})", "check its permissions") from None
    metadata = safe_pickle.unpickle_allowed(data, _MetadataUnpickler, str(path), _FIX)
    if not hasattr(metadata, "state_dict_metadata") or not hasattr(metadata, "storage_data"):
        raise InputError(str(path), f"holds a {type(metadata).__name__}, not torch.distributed.checkpoint Metadata",
                         _FIX)
    return metadata


def unstack(key: str, shape: tuple[int, ...]) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """(name, leading indices, per-name shape) for each tensor packed in global ``key``."""
    stacked = _STACKED.match(key)
    if not stacked:
        return [(key, (), shape)]
    head, rest = stacked.groups()
    out = []
    for layer in range(shape[0]):
        experts = _EXPERTS.match(rest)
        if experts:
            out += [(f"{head}{layer}.{experts.group(1)}local_experts.{e}.{experts.group(2)}", (layer, e), shape[2:])
                    for e in range(shape[1])]
            continue
        singleton = _SINGLETON_EXPERT.match(rest)
        inner = f"{singleton.group(1)}local_experts.{singleton.group(2)}" if singleton else rest
        out.append((f"{head}{layer}.{inner}", (layer,), shape[1:]))
    return out


class _OneTensorPlanner:
    """The three planner calls ``FileSystemReader.read_data`` makes, aimed at one target tensor."""

    def __init__(self, target: Any):
        self.target = target
        self.copied = 0

    def resolve_tensor(self, item: Any) -> Any:
        view = self.target
        for dim, (offset, length) in enumerate(zip(item.dest_offsets, item.lengths, strict=True)):
            view = view.narrow(dim, offset, length)
        return view

    def commit_tensor(self, item: Any, tensor: Any) -> None:
        import numpy as np

        self.copied += int(np.prod(tuple(item.lengths), dtype=np.int64))

    def load_bytes(self, item: Any, value: Any) -> None:  # pragma: no cover - only tensors are requested
        raise AssertionError("bytes requested")


class TorchDistSource(SourceBase):
    """A Megatron ``torch_dist`` checkpoint (save root or ``iter_*`` folder) with per-layer names."""

    def __init__(self, path: Path | str):
        from torch.distributed.checkpoint import FileSystemReader

        self.path = Path(path)
        self.folder = iteration_dir(self.path)
        self.metadata = _load_metadata(self.folder)
        self._reader = FileSystemReader(str(self.folder))
        self._reader.set_up_storage_reader(self.metadata, True)
        self.skipped: dict[str, str] = {}
        self._metas: dict[str, TensorMeta] = {}
        self._where: dict[str, tuple[str, tuple[int, ...]]] = {}
        for key, item in self.metadata.state_dict_metadata.items():
            self._add(key, item)

    def _add(self, key: str, item: Any) -> None:
        if key.startswith(_SKIPPED_PREFIXES):
            self.skipped[key] = "optimizer / RNG state"
            return
        if not hasattr(item, "chunks"):
            self.skipped[key] = "not a tensor (bytes object)"
            return
        dtype = dtype_name(item.properties.dtype)
        if dtype is None:
            self.skipped[key] = f"dtype {item.properties.dtype} is not supported"
            return
        size = check_shape(list(item.size), f"{self.folder} [{key}]", "size")   # absurd dims refused (tensors/sizes)
        for name, prefix, shape in unstack(key, size):
            if name in self._metas:
                raise InputError(f"{self.folder} [{name}]", f"produced by two keys ({key})", _FIX)
            self._metas[name] = TensorMeta(name, shape, dtype)
            self._where[name] = (key, prefix)

    def metas(self) -> dict[str, TensorMeta]:
        return dict(self._metas)

    def read(self, name: str) -> np.ndarray:
        import torch
        from torch.distributed.checkpoint.metadata import ChunkStorageMetadata
        from torch.distributed.checkpoint.planner import LoadPlan
        from torch.distributed.checkpoint.planner_helpers import create_read_items_for_chunk_list

        if name not in self._metas:
            raise missing_tensor(self.folder, name, self._metas)
        meta, (key, prefix) = self._metas[name], self._where[name]
        sizes = (1,) * len(prefix) + meta.shape
        chunk = ChunkStorageMetadata(torch.Size(prefix + (0,) * len(meta.shape)), torch.Size(sizes))
        items = create_read_items_for_chunk_list(key, self.metadata.state_dict_metadata[key], [chunk])
        target = torch.empty(sizes, dtype=self.metadata.state_dict_metadata[key].properties.dtype)
        planner = _OneTensorPlanner(target)
        try:
            self._reader.read_data(LoadPlan(items), planner).wait()
        except (OSError, RuntimeError, KeyError, EOFError) as error:
            raise InputError(f"{self.folder} [{name}]", f"cannot read its chunks ({type(error).__name__}: {error})",
                             _FIX) from None
        if planner.copied != numel(sizes):
            raise InputError(f"{self.folder} [{name}]", f"saved chunks cover {planner.copied} of {numel(sizes)} "
                             "elements", _FIX)
        return tensor_to_numpy(target.reshape(meta.shape))

    def close(self) -> None:
        """Nothing is held open between reads."""
