"""MindSpore ``.ckpt`` written without mindspore or protobuf (read by :mod:`.mindspore_ckpt_read`).

A ``.ckpt`` is one protobuf ``Checkpoint`` message (mindspore/ccsrc/utils/checkpoint.proto,
confirmed against ``mindspore.train.checkpoint_pb2`` of MindSpore 2.10)::

    message Checkpoint { repeated Value value = 1; }
    message Value      { string tag = 1; TensorProto tensor = 2; MapTensorProto maptensor = 3; }
    message TensorProto { repeated int64 dims = 1; string tensor_type = 2; bytes tensor_content = 3; }

so on disk it is a run of ``0x0A <varint len> Value`` records. ``save_checkpoint`` writes each
Value as its own ``Checkpoint`` (concatenated messages merge), dims unpacked (``0x08 <varint>``),
``tensor_type`` as ``"Float32"``/``"BFloat16"``/..., and splits a tensor over 512 MiB into
consecutive Values with the same tag and full dims (``load_checkpoint`` joins them). With
``crc_check=True`` the file ends in ``b"crc_num"`` + 10 big-endian bytes. ``append_dict``
strings are ``tensor_type "str"`` (UCS-4 bytes, dims [0]); numbers are 0-d tensors.

A tensor copied byte for byte from another file (a rename) may be preceded by a padding record,
a top-level field :data:`PAD_FIELD` (bytes) that the schema does not have: protobuf parsers skip
unknown fields, so ``load_checkpoint`` reads the file unchanged (a test loads it with MindSpore),
and the tensor's bytes then start at their source offset's page residue, which copies faster
(see :mod:`workbench.tensors.bytecopy`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..fileio import PREALLOCATE_FROM
from .base import TensorMeta
from .bytecopy import ALIGN_FROM, PAGE, FileSpan, byte_view, page_padding
from .common import PartialFile, StreamingSink

TYPE_NAMES = {"fp64": "Float64", "fp32": "Float32", "fp16": "Float16", "bf16": "BFloat16", "int64": "Int64",
              "int32": "Int32", "int16": "Int16", "int8": "Int8", "uint8": "UInt8", "bool": "Bool"}
DTYPES = {type_name: dtype for dtype, type_name in TYPE_NAMES.items()}
SLICE_BYTES = 512 * 1024 * 1024          # serialization.SLICE_SIZE (KiB) * 1024
CRC_TRAILER = 17                         # b"crc_num" + 10 bytes
FIX_CKPT = "the file is truncated, encrypted or not a MindSpore .ckpt: re-save it with mindspore.save_checkpoint"
WIRE_VARINT, WIRE_FIXED64, WIRE_BYTES, WIRE_FIXED32 = 0, 1, 2, 5     # protobuf wire types
PAD_FIELD = 2047              # not in checkpoint.proto (Checkpoint has field 1 only): skipped by every reader


# ----------------------------------------------------------------------------- protobuf wire format

def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _bytes_field(field: int, payload: bytes) -> bytes:
    return _key(field, WIRE_BYTES) + varint(len(payload)) + payload


def padding_record(size: int) -> bytes:
    """A top-level ``PAD_FIELD`` record of exactly ``size`` bytes (3..130 or 132..16386)."""
    key = _key(PAD_FIELD, WIRE_BYTES)
    length = size - len(key) - 1 if size - len(key) - 1 < 128 else size - len(key) - 2
    record = key + varint(length) + bytes(length) if length >= 0 else b""
    if len(record) != size:
        raise ValueError(f"no padding record is {size} bytes long")
    return record


def _padding_for(position: int, prefix: int, source_offset: int) -> bytes:
    """The padding record that puts content written after it (and a ``prefix``) at ``source_offset``'s residue."""
    size = page_padding(position + prefix, source_offset)
    if size == 0:
        return b""
    return padding_record(size + PAGE if size < 3 or size == 131 else size)


def value_prefix(meta: TensorMeta, content_length: int) -> bytes:
    """Everything of one ``Checkpoint.value`` record up to its ``tensor_content`` bytes."""
    tensor_head = b"".join(_key(1, WIRE_VARINT) + varint(dim) for dim in meta.shape)
    tensor_head += _bytes_field(2, TYPE_NAMES[meta.dtype].encode()) + _key(3, WIRE_BYTES) + varint(content_length)
    tensor_length = len(tensor_head) + content_length
    value_head = _bytes_field(1, meta.name.encode("utf-8")) + _key(2, WIRE_BYTES) + varint(tensor_length) + tensor_head
    return _key(1, WIRE_BYTES) + varint(len(value_head) + content_length) + value_head


# ----------------------------------------------------------------------------- writing

class MindSporeCkptWriter(StreamingSink):
    """Streams tensors into a ``.ckpt`` that ``mindspore.load_checkpoint`` reads (same slicing).

    ``copied``: names of the tensors that will arrive as byte ranges (:class:`FileSpan`); when they
    are large, the file's blocks are reserved before the first byte (see ``AtomicFile.reserve``).
    """

    def __init__(self, path: Path | str, metas: list[TensorMeta], copied: Iterable[str] = ()):
        super().__init__(path, metas)
        self._partial = PartialFile(self.path)
        copied = set(copied)
        if sum(meta.nbytes for meta in self.metas if meta.name in copied) >= PREALLOCATE_FROM:
            try:
                self._partial.reserve(_size_bound(self.metas, copied))
            except BaseException:
                self._partial.discard()
                raise

    def _emit(self, meta: TensorMeta, array: np.ndarray) -> None:
        flat = byte_view(array)            # a FileSpan (a rename) is sliced and copied file to file
        if flat.size == 0:
            self._partial.handle.write(value_prefix(meta, 0))
            return
        for start in range(0, flat.size, SLICE_BYTES):
            piece = flat[start:start + SLICE_BYTES]
            prefix = value_prefix(meta, piece.size)
            self._partial.handle.write(self._padding(piece, len(prefix)) + prefix)
            self._partial.write_array(piece)

    def _padding(self, piece, prefix: int) -> bytes:
        """A padding record when ``piece`` is a large byte range copied from a file (and the output has a position)."""
        handle = self._partial.handle
        if not isinstance(piece, FileSpan) or piece.length < ALIGN_FROM or not handle.seekable():
            return b""
        return _padding_for(handle.tell(), prefix, piece.offset)

    def _commit(self) -> list[Path]:
        return [self._partial.commit()]

    def _discard(self) -> None:
        self._partial.discard()


def _size_bound(metas: list[TensorMeta], copied: set[str]) -> int:
    """The most bytes :class:`MindSporeCkptWriter` writes for ``metas``: every record, and the longest
    padding record before each copied slice (the file is cut to what was written at commit)."""
    total = 0
    for meta in metas:
        for start in range(0, meta.nbytes, SLICE_BYTES) if meta.nbytes else (0,):
            piece = min(SLICE_BYTES, meta.nbytes - start)
            total += len(value_prefix(meta, piece)) + piece
            total += PAGE + 131 if meta.name in copied and piece >= ALIGN_FROM else 0
    return total
