"""Tensor sizes from untrusted headers: Python integers, absurd dimensions refused, claims checked.

Every tensor reader (safetensors, MindSpore ``.ckpt``, torch_dist metadata, captured ``.npy``,
reference ``.npz`` batches) turns a header's shape into a byte count here, before anything is
allocated or memory-mapped:

* dimensions must be integers (not bools), at least 0; a dimension past 2**40 or a product past
  :data:`MAX_ELEMENTS` is refused (no real tensor comes near it, and a header that claims one is
  damaged or hostile); the product is a Python int, so it never wraps the way an int64 does;
* :func:`check_claim` compares the bytes a header claims with the bytes the file holds, so a
  128-byte file that claims 10**12 elements is refused instead of allocating terabytes.
"""
from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from ..input_files import describe_size, type_word

MAX_ELEMENTS = 2 ** 40
"""The most elements one tensor may claim (4 TiB at fp32): far above any real weight or batch."""

_FIX = "the header is damaged or not written by a framework: re-save or re-download the file"


def check_shape(shape: Any, where: str, key: str = "shape") -> tuple[int, ...]:
    """``shape`` as a tuple of Python ints, or one InputError naming ``key`` and the bad dimension."""
    if not isinstance(shape, (list, tuple)):
        raise InputError(where, f"{key} is {type_word(shape)}, expected a list of integers", _FIX)
    dims = []
    for index, dim in enumerate(shape):
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise InputError(where, f"{key}[{index}] is {type_word(dim)} ({str(dim)[:40]}), expected an integer", _FIX)
        if dim < 0 or dim > MAX_ELEMENTS:
            raise InputError(where, f"{key}[{index}] is {dim}, expected 0 to 2**40", _FIX)
        dims.append(int(dim))
    count = math.prod(dims)
    if count > MAX_ELEMENTS:
        raise InputError(where, f"{key} {dims} has {count} elements, more than the 2**40 any real tensor has", _FIX)
    return tuple(dims)


def numel(shape: Any) -> int:
    """Elements of ``shape`` as a Python int (never wraps)."""
    return math.prod(int(dim) for dim in shape)


def tensor_bytes(shape: Any, item_size: int, where: str, key: str = "shape") -> int:
    """Bytes of a ``shape`` x ``item_size`` tensor, the shape checked by :func:`check_shape`."""
    return numel(check_shape(shape, where, key)) * int(item_size)


def check_claim(needed: int, available: int, where: str, what: str = "the header") -> None:
    """Refuse a header that claims more bytes than the file holds (before anything is allocated)."""
    if needed > available:
        raise InputError(where, f"{what} claims {_bytes(needed)} of data, the file holds {_bytes(max(available, 0))}",
                         "the file is truncated or its header is damaged: re-save or re-copy it")


def _bytes(count: int) -> str:
    return f"{count} bytes" if count < 1024 else f"{describe_size(count)} ({count} bytes)"
