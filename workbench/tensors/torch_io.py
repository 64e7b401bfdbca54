"""torch ``state_dict`` files (``pytorch_model.bin``, sharded with an index, any ``torch.save`` zip).

Files are opened with ``torch.load(map_location="cpu", mmap=True, weights_only=True)``: the
pickle is read, tensor storages stay memory-mapped until a tensor is read, and nothing but
tensors, containers and an explicit allow-list (``safe_globals``: classes only, checked by
:func:`workbench.safe_pickle.torch_safe_globals`) can be unpickled; a refusal names the global. A tensor
comes back as a numpy view of the mapped storage (bf16 as its raw ``uint16`` bits).
"""
from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from ..safe_pickle import torch_safe_globals
from .base import SourceBase, TensorMeta
from .common import missing_tensor

INDEX_FILE = "pytorch_model.bin.index.json"
SINGLE_FILE = "pytorch_model.bin"
TORCH_DTYPES = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int64": "int64",
                "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool"}


def dtype_name(torch_dtype: Any) -> str | None:
    """``torch.float32`` -> ``"fp32"``; None for dtypes the workbench does not carry."""
    return TORCH_DTYPES.get(str(torch_dtype).removeprefix("torch."))


def tensor_to_numpy(tensor: Any) -> np.ndarray:
    """A numpy view sharing ``tensor``'s storage; bf16 becomes its raw bits as ``uint16``."""
    import numpy as np

    import torch

    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


def load_torch_file(path: Path, safe_globals: Iterable[Any] = ()) -> Any:
    """``torch.load`` with weights_only and mmap; every failure becomes one InputError naming ``path``."""
    if not path.is_file():
        raise InputError(str(path), "file not found", "check the path")
    try:
        return torch_load(path, safe_globals)
    except pickle.UnpicklingError as error:
        raise InputError(str(path), _unpickling_reason(error),
                         "nothing was executed: only tensors, containers and allow-listed classes are unpickled; "
                         "re-save a plain state dict") from None
    except (RuntimeError, EOFError, OSError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(str(path), f"not a readable torch zip checkpoint ({first})",
                         "the file is truncated, or was saved by torch < 1.6 (re-save it with torch.save)") from None


_REFUSED = "refusing to unpickle global {}: not on the allow-list"
_TORCH_GLOBAL = re.compile(r"\bGLOBAL ([\w.]+)")
_ADVICE = ("weights_only", "Weights only load failed", "Check the documentation", "do those steps only")


def refused_global(problem: str) -> str | None:
    """The global named by a refusal from :func:`load_torch_file`, or None."""
    match = re.match(_REFUSED.format(r"([\w.]+)"), problem)
    return match.group(1) if match else None


def _unpickling_reason(error: Exception) -> str:
    """What torch's weights-only unpickler refused, without its advice to turn the check off."""
    text = str(error)
    refused = _TORCH_GLOBAL.search(text)
    if refused:
        return _REFUSED.format(refused.group(1))
    reasons = [line.strip().removeprefix("WeightsUnpickler error:").strip() for line in text.splitlines()
               if line.strip() and not any(advice in line for advice in _ADVICE)]
    reason = re.sub(r" Please use .*", "", reasons[0]) if reasons else type(error).__name__
    return f"refused by the weights-only unpickler ({reason})"


def torch_load(path: Path, safe_globals: Iterable[Any] = ()) -> Any:
    """The raw ``torch.load(map_location="cpu", mmap=True, weights_only=True)`` (torch errors propagate)."""
    import torch

    with torch.serialization.safe_globals(torch_safe_globals(safe_globals)):
        return torch.load(path, map_location="cpu", mmap=True, weights_only=True)


def select(tree: Any, key_path: str | Sequence[str] | None, path: Path) -> Any:
    """The sub-tree at ``key_path`` (``"model"`` or ``"model.language_model"``)."""
    if not key_path:
        return tree
    parts = key_path.split(".") if isinstance(key_path, str) else list(key_path)
    node = tree
    for depth, part in enumerate(parts):
        if not isinstance(node, Mapping) or part not in node:
            here = ".".join(parts[:depth]) or "top level"
            keys = list(node)[:8] if isinstance(node, Mapping) else type(node).__name__
            raise InputError(f"{path} [{'.'.join(parts)}]", f"no key {part!r} under {here} (found {keys})",
                             "pass key_path naming the state dict inside the file")
        node = node[part]
    return node


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings flattened to dotted names (a flat state dict comes back as is)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def split_tensors(flat: dict[str, Any], path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """(tensors with a carried dtype, {name: why skipped} for everything else)."""
    import torch

    tensors, skipped = {}, {}
    for name, value in flat.items():
        if not isinstance(value, torch.Tensor):
            skipped[name] = f"not a tensor ({type(value).__name__})"
        elif dtype_name(value.dtype) is None:
            skipped[name] = f"dtype {value.dtype} is not supported"
        else:
            tensors[name] = value
    return tensors, skipped


def bin_files(path: Path) -> list[Path]:
    """The files behind ``path``: one file, an index ``.json``, or a folder holding either."""
    if path.is_dir():
        if (path / INDEX_FILE).is_file():
            path = path / INDEX_FILE
        elif (path / SINGLE_FILE).is_file():
            return [path / SINGLE_FILE]
        else:
            raise InputError(str(path), f"neither {SINGLE_FILE} nor {INDEX_FILE} in this folder",
                             "pass the checkpoint file itself")
    if not path.name.endswith(".json"):
        return [path]
    from ..input_files import expect, read_json

    fix = "pass the index beside the shards"
    index = expect(read_json(path, what="checkpoint index"), dict, str(path), "the index", fix)
    weight_map = expect(index.get("weight_map"), dict, str(path), "weight_map", fix)
    shards = [expect(name, str, str(path), "a weight_map file name", fix) for name in weight_map.values()]
    if any("/" in name or name in ("", ".", "..") for name in shards):
        raise InputError(str(path), "weight_map names a file outside the index's folder", fix)
    return [path.parent / name for name in dict.fromkeys(shards)]


class TorchFileSource(SourceBase):
    """One or more torch state-dict files read lazily as one state dict.

    ``key_path`` selects a nested dict (``"model"`` for ``{"model": {...}, "args": ...}``);
    ``safe_globals`` are extra classes allowed by the weights-only unpickler.
    Non-tensor values are left out of :meth:`metas` and listed in ``skipped``.
    """

    def __init__(self, path: Path | str, key_path: str | Sequence[str] | None = None,
                 safe_globals: Iterable[Any] = ()):
        self.path = Path(path)
        self.files = bin_files(self.path)
        self.skipped: dict[str, str] = {}
        self._tensors: dict[str, Any] = {}
        self._metas: dict[str, TensorMeta] = {}
        for file in self.files:
            tree = select(load_torch_file(file, safe_globals), key_path, file)
            if not isinstance(tree, Mapping):
                raise InputError(str(file), f"holds a {type(tree).__name__}, not a state dict",
                                 "pass key_path to the dict of tensors")
            tensors, skipped = split_tensors(flatten(tree), file)
            self.skipped.update(skipped)
            for name, tensor in tensors.items():
                if name in self._tensors:
                    raise InputError(f"{file} [{name}]", "tensor appears in two shards", "remove the duplicate shard")
                self._tensors[name] = tensor
                self._metas[name] = TensorMeta(name, tuple(tensor.shape), dtype_name(tensor.dtype))

    def metas(self) -> dict[str, TensorMeta]:
        return dict(self._metas)

    def read(self, name: str) -> np.ndarray:
        if name not in self._tensors:
            raise missing_tensor(self.path, name, self._tensors)
        return tensor_to_numpy(self._tensors[name])

    def close(self) -> None:
        self._tensors.clear()
