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
from typing import Iterable, Protocol

import numpy as np

# dtype name -> numpy storage dtype (bf16: raw bits)
STORAGE = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16, "bf16": np.uint16,
           "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8,
           "bool": np.bool_}
ITEM_SIZE = {name: np.dtype(storage).itemsize for name, storage in STORAGE.items()}


@dataclass(frozen=True)
class TensorMeta:
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
    values = bf16_bits_to_fp32(array) if source == "bf16" else array.astype(np.float32 if target == "bf16" else None)
    if target == "bf16":
        return fp32_to_bf16_bits(np.asarray(values, dtype=np.float32))
    return np.asarray(values).astype(STORAGE[target])


def bf16_bits_to_fp32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def fp32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even, NaN kept quiet (what torch and MindSpore do)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded = np.where(nan, ((bits >> 16) | 0x0040).astype(np.uint16), rounded)
    return rounded


def total_bytes(metas: Iterable[TensorMeta]) -> int:
    return sum(meta.nbytes for meta in metas)
