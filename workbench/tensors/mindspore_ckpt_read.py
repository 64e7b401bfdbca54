"""MindSpore ``.ckpt`` read without mindspore or protobuf: the records parsed with checked sizes, slices of one
tensor joined, each tensor memory-mapped from its bytes. The format and the writer:
:mod:`workbench.tensors.mindspore_ckpt`."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..input_files import input_stat
from .base import ITEM_SIZE, STORAGE, SourceBase, TensorMeta
from .bytecopy import FileSpan
from .common import mapped_array, missing_tensor, numel, unsupported_dtype
from .mindspore_ckpt import (CRC_TRAILER, DTYPES, FIX_CKPT, PAD_FIELD, WIRE_BYTES, WIRE_FIXED32, WIRE_FIXED64,
                             WIRE_VARINT)
from .sizes import check_shape

if TYPE_CHECKING:
    import numpy as np

# ----------------------------------------------------------------------------- reading

class _Cursor:
    """Reads protobuf primitives from a file between ``position`` and ``end``."""

    def __init__(self, handle, path: Path, position: int, end: int):
        self.handle, self.path, self.position, self.end = handle, path, position, end

    def _fail(self, problem: str) -> InputError:
        return InputError(str(self.path), f"{problem} at byte {self.position}", FIX_CKPT)

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
        if wire == WIRE_VARINT:
            self.varint()
        elif wire == WIRE_BYTES:
            self.span()
        elif wire in (WIRE_FIXED64, WIRE_FIXED32):
            self.position += 8 if wire == WIRE_FIXED64 else 4
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
        if field == 1 and wire == WIRE_VARINT:
            record["dims"].append(_int64(cursor.varint()))
        elif field == 1 and wire == WIRE_BYTES:                 # packed dims
            start, length = cursor.span()
            packed = _Cursor(cursor.handle, cursor.path, start, start + length)
            while packed.position < packed.end:
                record["dims"].append(_int64(packed.varint()))
        elif field == 2 and wire == WIRE_BYTES:
            record["type"] = cursor.text()
        elif field == 3 and wire == WIRE_BYTES:
            record["parts"].append(cursor.span())
        else:
            cursor.skip(wire)


def _parse_value(cursor: _Cursor) -> dict:
    record: dict = {"tag": None, "dims": [], "type": None, "parts": [], "map": False}
    for field, wire in cursor.fields():
        if field == 1 and wire == WIRE_BYTES:
            record["tag"] = cursor.text()
        elif field == 2 and wire == WIRE_BYTES:
            start, length = cursor.span()
            _parse_tensor(_Cursor(cursor.handle, cursor.path, start, start + length), record)
        elif field == 3 and wire == WIRE_BYTES:
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
            if field == PAD_FIELD and wire == WIRE_BYTES:          # alignment padding (see the module docstring)
                cursor.span()
                continue
            if field != 1 or wire != WIRE_BYTES:
                raise cursor._fail(f"expected a Checkpoint.value record, found field {field} wire type {wire}")
            start, length = cursor.span()
            records.append(_parse_value(_Cursor(handle, path, start, start + length)))
    return records


def _merge_slices(path: Path, records: list[dict]) -> list[dict]:
    """Consecutive records with one tag are slices of one tensor (``_write_parameter_data``)."""
    merged: list[dict] = []
    for record in records:
        if record["tag"] is None:
            raise InputError(str(path), "a checkpoint record has no tag", FIX_CKPT)
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
            raise InputError(str(self.path), "empty file", FIX_CKPT)
        self._metas: dict[str, TensorMeta] = {}
        self._parts: dict[str, list[tuple[int, int]]] = {}
        self.skipped: dict[str, str] = {}
        for record in _merge_slices(self.path, parse_records(self.path)):
            self._add(record)

    def _add(self, record: dict) -> None:
        tag, type_name = record["tag"], record["type"]
        where = f"{self.path} [{tag}]"
        if tag in self._metas or tag in self.skipped:
            raise InputError(where, "tag appears twice, not as consecutive slices", FIX_CKPT)
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
                             FIX_CKPT)
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

