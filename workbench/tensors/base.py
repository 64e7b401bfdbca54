"""The interfaces every checkpoint reader and writer implements.

Tensors travel as numpy arrays plus a dtype name. numpy has no bfloat16: a bf16 tensor is a
``np.uint16`` array of its raw bits with dtype ``"bf16"`` in its :class:`TensorMeta`. Layout
transforms (reshape, concat, split, transpose, pad) are bit-exact on those raw bits; only a
dtype cast needs to know (see :func:`cast`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Protocol

if TYPE_CHECKING:
    import numpy as np

# dtype name -> numpy storage type name (bf16: raw bits), and bytes per element
STORAGE_TYPE_NAMES = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "uint16", "int64": "int64",
                  "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool_"}
ITEM_SIZE = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
             "bool": 1}


class _Storage(Mapping):
    """dtype name -> numpy storage type (``np.float32``, ...). numpy is imported at the first value
    looked up, not with this module: a conversion that only copies byte ranges never needs it (and
    importing it is a good part of such a run's start-up). Names, ``in`` and iteration need no numpy."""

    def __getitem__(self, name: str) -> type:
        import numpy as np

        return getattr(np, STORAGE_TYPE_NAMES[name])

    def __contains__(self, name: object) -> bool:
        return name in STORAGE_TYPE_NAMES

    def __iter__(self) -> Iterator[str]:
        return iter(STORAGE_TYPE_NAMES)

    def __len__(self) -> int:
        return len(STORAGE_TYPE_NAMES)


STORAGE: Mapping[str, type] = _Storage()


@dataclass(frozen=True)
class TensorMeta:
    """One stored tensor's header: its name, shape and storage dtype (no data)."""

    name: str
    shape: tuple[int, ...]
    dtype: str                      # a key of STORAGE

    @property
    def nbytes(self) -> int:
        return math.prod(int(dim) for dim in self.shape) * ITEM_SIZE[self.dtype]   # Python ints: never wraps


class TensorSource(Protocol):
    """A checkpoint opened for reading: metadata from headers, one tensor at a time on demand.

    Every implementation derives from :class:`SourceBase`, so it is a context manager.
    """

    path: Path

    def metas(self) -> dict[str, TensorMeta]:
        """Every tensor's name, shape and dtype, without reading tensor data."""

    def read(self, name: str) -> np.ndarray:
        """One tensor (memory-mapped where the format allows), in its STORAGE dtype."""

    def close(self) -> None: ...

    def __enter__(self) -> "TensorSource": ...

    def __exit__(self, *exc: object) -> None: ...


class SourceBase:
    """What every reader inherits: ``with open_source(path) as source:`` closes its mmaps and files."""

    def close(self) -> None:
        """Release memory maps and file handles; the base holds none."""

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TensorSink(Protocol):
    """A checkpoint being written: the full list of tensors is known first (from the plan), then
    tensors arrive one at a time in that order; ``finish`` makes the output appear atomically."""

    def write(self, name: str, array: np.ndarray) -> None: ...

    def finish(self) -> list[Path]: ...

    def abort(self) -> None: ...


def to_storage(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` viewed/converted as the STORAGE dtype of ``dtype`` (no value change)."""
    storage = STORAGE[dtype]
    return array if array.dtype == storage else array.astype(storage)


def cast(array: np.ndarray, source: str, target: str) -> np.ndarray:
    """Value-preserving dtype cast between fp32/fp16/bf16/fp64 (bf16 as raw bits; round to nearest even)."""
    if source == target:
        return array
    import numpy as np

    values = bf16_bits_to_fp32(array) if source == "bf16" else array.astype(np.float32 if target == "bf16" else None)
    if target == "bf16":
        return fp32_to_bf16_bits(np.asarray(values, dtype=np.float32))
    return np.asarray(values).astype(STORAGE[target])


def bf16_bits_to_fp32(bits: np.ndarray) -> np.ndarray:
    import numpy as np

    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def fp32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even, NaN kept quiet (what torch and MindSpore do)."""
    import numpy as np

    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded = np.where(nan, ((bits >> 16) | 0x0040).astype(np.uint16), rounded)
    return rounded


def total_bytes(metas: Iterable[TensorMeta]) -> int:
    return sum(meta.nbytes for meta in metas)
