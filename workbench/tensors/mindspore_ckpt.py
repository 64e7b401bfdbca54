"""MindSpore ``.ckpt`` read and written without mindspore or protobuf.

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

from ..errors import InputError
from ..fileio import PREALLOCATE_FROM
from ..input_files import input_stat
from .base import ITEM_SIZE, STORAGE, SourceBase, TensorMeta
from .bytecopy import ALIGN_FROM, PAGE, FileSpan, byte_view, page_padding
from .common import PartialFile, StreamingSink, mapped_array, missing_tensor, numel, unsupported_dtype
from .sizes import check_shape

TYPE_NAMES = {"fp64": "Float64", "fp32": "Float32", "fp16": "Float16", "bf16": "BFloat16", "int64": "Int64",
              "int32": "Int32", "int16": "Int16", "int8": "Int8", "uint8": "UInt8", "bool": "Bool"}
DTYPES = {type_name: dtype for dtype, type_name in TYPE_NAMES.items()}
SLICE_BYTES = 512 * 1024 * 1024          # serialization.SLICE_SIZE (KiB) * 1024
CRC_TRAILER = 17                         # b"crc_num" + 10 bytes
_FIX = "the file is truncated, encrypted or not a MindSpore .ckpt: re-save it with mindspore.save_checkpoint"
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
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
    return _key(field, _BYTES) + varint(len(payload)) + payload


def padding_record(size: int) -> bytes:
    """A top-level ``PAD_FIELD`` record of exactly ``size`` bytes (3..130 or 132..16386)."""
    key = _key(PAD_FIELD, _BYTES)
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
    tensor_head = b"".join(_key(1, _VARINT) + varint(dim) for dim in meta.shape)
    tensor_head += _bytes_field(2, TYPE_NAMES[meta.dtype].encode()) + _key(3, _BYTES) + varint(content_length)
    tensor_length = len(tensor_head) + content_length
    value_head = _bytes_field(1, meta.name.encode("utf-8")) + _key(2, _BYTES) + varint(tensor_length) + tensor_head
    return _key(1, _BYTES) + varint(len(value_head) + content_length) + value_head


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


# ----------------------------------------------------------------------------- reading

class _Cursor:
    """Reads protobuf primitives from a file between ``position`` and ``end``."""

    def __init__(self, handle, path: Path, position: int, end: int):
        self.handle, self.path, self.position, self.end = handle, path, position, end

    def _fail(self, problem: str) -> InputError:
        return InputError(str(self.path), f"{problem} at byte {self.position}", _FIX)

    def varint(self) -> int:
        self.handle.seek(self.position)
        chunk = self.handle.read(min(10, max(self.end - self.position, 0)))
        value = 0
        for index, byte in enumerate(chunk):
            value |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                self.position += index + 1
                return value
        raise self._fail("truncated or malformed varint")

    def span(self) -> tuple[int, int]:
        """(start, length) of a length-delimited payload, skipped over."""
        length = self.varint()
        start = self.position
        if start + length > self.end:
            raise self._fail(f"record of {length} bytes runs past its end ({self.end})")
        self.position += length
        return start, length

    def text(self) -> str:
        start, length = self.span()
        self.handle.seek(start)
        return self.handle.read(length).decode("utf-8", errors="replace")

    def skip(self, wire: int) -> None:
        if wire == _VARINT:
            self.varint()
        elif wire == _BYTES:
            self.span()
        elif wire in (_FIXED64, _FIXED32):
            self.position += 8 if wire == _FIXED64 else 4
        else:
            raise self._fail(f"unknown protobuf wire type {wire}")

    def fields(self):
        while self.position < self.end:
            key = self.varint()
            yield key >> 3, key & 7


def _int64(value: int) -> int:
    """A varint read as protobuf's signed int64 (a negative dim is stored as 2**64 - |dim|)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _parse_tensor(cursor: _Cursor, record: dict) -> None:
    for field, wire in cursor.fields():
        if field == 1 and wire == _VARINT:
            record["dims"].append(_int64(cursor.varint()))
        elif field == 1 and wire == _BYTES:                 # packed dims
            start, length = cursor.span()
            packed = _Cursor(cursor.handle, cursor.path, start, start + length)
            while packed.position < packed.end:
                record["dims"].append(_int64(packed.varint()))
        elif field == 2 and wire == _BYTES:
            record["type"] = cursor.text()
        elif field == 3 and wire == _BYTES:
            record["parts"].append(cursor.span())
        else:
            cursor.skip(wire)


def _parse_value(cursor: _Cursor) -> dict:
    record: dict = {"tag": None, "dims": [], "type": None, "parts": [], "map": False}
    for field, wire in cursor.fields():
        if field == 1 and wire == _BYTES:
            record["tag"] = cursor.text()
        elif field == 2 and wire == _BYTES:
            start, length = cursor.span()
            _parse_tensor(_Cursor(cursor.handle, cursor.path, start, start + length), record)
        elif field == 3 and wire == _BYTES:
            record["map"] = True
            cursor.skip(wire)
        else:
            cursor.skip(wire)
    return record


def parse_records(path: Path) -> list[dict]:
    """Every ``Value`` of the file (tag, dims, tensor_type, content spans), data left unread."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        end = size
        if size >= CRC_TRAILER:
            handle.seek(size - CRC_TRAILER)
            end = size - CRC_TRAILER if handle.read(7) == b"crc_num" else size
        cursor = _Cursor(handle, path, 0, end)
        records = []
        for field, wire in cursor.fields():
            if field == PAD_FIELD and wire == _BYTES:          # alignment padding (see the module docstring)
                cursor.span()
                continue
            if field != 1 or wire != _BYTES:
                raise cursor._fail(f"expected a Checkpoint.value record, found field {field} wire type {wire}")
            start, length = cursor.span()
            records.append(_parse_value(_Cursor(handle, path, start, start + length)))
    return records


def _merge_slices(path: Path, records: list[dict]) -> list[dict]:
    """Consecutive records with one tag are slices of one tensor (``_write_parameter_data``)."""
    merged: list[dict] = []
    for record in records:
        if record["tag"] is None:
            raise InputError(str(path), "a checkpoint record has no tag", _FIX)
        if merged and merged[-1]["tag"] == record["tag"] and not record["map"]:
            merged[-1]["parts"] += record["parts"]
        else:
            merged.append(record)
    return merged


class MindSporeCkptSource(SourceBase):
    """A MindSpore ``.ckpt`` read lazily: records indexed once, tensor bytes memory-mapped.

    Entries that are not tensors of a supported dtype (``append_dict`` strings, map tensors,
    unsigned 16/32/64-bit) are left out of :meth:`metas` and listed in ``skipped`` with a reason.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        if input_stat(self.path, regular=True).st_size == 0:     # mmap needs a regular file
            raise InputError(str(self.path), "empty file", _FIX)
        self._metas: dict[str, TensorMeta] = {}
        self._parts: dict[str, list[tuple[int, int]]] = {}
        self.skipped: dict[str, str] = {}
        for record in _merge_slices(self.path, parse_records(self.path)):
            self._add(record)

    def _add(self, record: dict) -> None:
        tag, type_name = record["tag"], record["type"]
        where = f"{self.path} [{tag}]"
        if tag in self._metas or tag in self.skipped:
            raise InputError(where, "tag appears twice, not as consecutive slices", _FIX)
        dims = check_shape(record["dims"], where, "dims")
        if record["map"] or type_name not in DTYPES:
            self.skipped[tag] = ("map tensor" if record["map"] else "tensor_type 'str' is not a weight dtype"
                                 if type_name == "str" else unsupported_dtype(type_name, DTYPES))
            return
        dtype = DTYPES[type_name]
        stored = sum(length for _, length in record["parts"])
        if dims == (0,) and stored == ITEM_SIZE[dtype]:          # load_checkpoint: dims [0] means a scalar
            dims = ()
        meta = TensorMeta(tag, dims, dtype)
        if stored != meta.nbytes:
            raise InputError(where, f"{type_name} {list(dims)} needs {meta.nbytes} bytes, the file holds {stored}",
                             _FIX)
        self._metas[tag] = meta
        self._parts[tag] = record["parts"]

    def metas(self) -> dict[str, TensorMeta]:
        return dict(self._metas)

    def read(self, name: str) -> np.ndarray:
        import numpy as np

        if name not in self._metas:
            raise missing_tensor(self.path, name, self._metas)
        meta, parts = self._metas[name], self._parts[name]
        if len(parts) <= 1:
            offset = parts[0][0] if parts else 0
            return mapped_array(self.path, offset, meta.shape, meta.dtype)
        out = np.empty(numel(meta.shape), dtype=STORAGE[meta.dtype])
        raw, position = out.view(np.uint8), 0
        for offset, length in parts:
            raw[position:position + length] = np.memmap(self.path, dtype=np.uint8, mode="r", offset=offset,
                                                        shape=(length,))
            position += length
        return out.reshape(meta.shape)

    def span(self, name: str) -> FileSpan | None:
        """Where a tensor stored in one record lies (a writer copies it as is); None for sliced tensors."""
        if name not in self._metas:
            raise missing_tensor(self.path, name, self._metas)
        parts = self._parts[name]
        return FileSpan(self.path, parts[0][0], self._metas[name].nbytes) if len(parts) == 1 else None

    def close(self) -> None:
        """Nothing is held open."""

