"""safetensors read by hand: headers parsed here, tensor bytes memory-mapped (written: :mod:`.safetensors_write`).

File layout (https://github.com/huggingface/safetensors)::

    [ u64 little-endian N ][ N bytes of JSON header, space padded ][ tensor bytes ... ]
    header = {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..],
              "data_offsets": [begin, end]}, ...}        offsets relative to byte 8 + N

A sharded checkpoint is ``model-0000K-of-0000N.safetensors`` files plus
``model.safetensors.index.json`` = ``{"metadata": {"total_size": ..}, "weight_map": {name: file}}``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from ..input_files import expect, expect_count, input_stat, parse_json, read_json
from .base import ITEM_SIZE, SourceBase, TensorMeta
from .bytecopy import FileSpan
from .common import mapped_array, missing_tensor, unsupported_dtype
from .sizes import check_shape, tensor_bytes

DTYPES = {"F64": "fp64", "F32": "fp32", "F16": "fp16", "BF16": "bf16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
CODES = {name: code for code, name in DTYPES.items()}
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_HEADER = 100 * 1024 * 1024
_FIX = "the file is truncated or not safetensors: re-download or re-convert it"


def read_header(path: Path) -> tuple[dict, int]:
    """(parsed JSON header, offset of the first tensor byte) of one ``.safetensors`` file."""
    size = input_stat(path, regular=True).st_size           # mmap needs a regular file
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise InputError(str(path), f"{size} bytes: too short for the 8-byte header length", _FIX)
        length = int.from_bytes(prefix, "little")
        if length > MAX_HEADER or 8 + length > size:
            raise InputError(str(path), f"header length {length} does not fit the file's {size} bytes "
                             f"(at most {min(MAX_HEADER, size - 8)})", _FIX)
        raw = handle.read(length)
    header = parse_json(raw, str(path), what="safetensors header")
    expect(header, dict, str(path), "the header", _FIX)
    metadata = expect(header.get("__metadata__", {}), (dict, type(None)), str(path), "__metadata__", _FIX) or {}
    for key, value in metadata.items():
        expect(value, str, str(path), f"__metadata__.{key}", _FIX)
    return header, 8 + length


def _entry(path: Path, name: str, entry: object, data_start: int, size: int) -> tuple[TensorMeta, int] | str:
    """(meta, absolute byte offset) of one header entry, or the reason it is skipped."""
    where = f"{path} [{name}]"
    expect(entry, dict, where, "the entry", _FIX)
    missing = [key for key in ("dtype", "shape", "data_offsets") if key not in entry]
    if missing:
        raise InputError(where, f"header entry lacks {'/'.join(missing)}", _FIX)
    code = expect(entry["dtype"], str, where, "dtype", _FIX)
    offsets = expect(entry["data_offsets"], list, where, "data_offsets", _FIX)
    if len(offsets) != 2:
        raise InputError(where, f"data_offsets has {len(offsets)} items, expected [begin, end]", _FIX)
    begin = expect_count(offsets[0], where, "data_offsets[0]", fix=_FIX)
    end = expect_count(offsets[1], where, "data_offsets[1]", fix=_FIX)
    if end < begin:
        raise InputError(where, f"data_offsets {offsets} end before they begin", _FIX)
    if code not in DTYPES:
        check_shape(entry["shape"], where)
        return unsupported_dtype(code, DTYPES)
    nbytes = tensor_bytes(entry["shape"], ITEM_SIZE[DTYPES[code]], where)
    if end - begin != nbytes:
        raise InputError(where, f"data_offsets {offsets} span {end - begin} bytes, {code} {entry['shape']} needs "
                         f"{nbytes}", _FIX)
    if data_start + end > size:
        raise InputError(where, f"tensor ends at byte {data_start + end} (data_offsets {offsets}), past the "
                         f"file's end at {size} bytes", _FIX)
    return TensorMeta(name, tuple(entry["shape"]), DTYPES[code]), data_start + begin


def _check_overlaps(path: Path, found: list[tuple[TensorMeta, int]]) -> None:
    """Tensors sorted by offset must not share bytes (a crafted header can alias two tensors)."""
    previous: tuple[TensorMeta, int] | None = None
    for meta, offset in found:
        if previous is not None and offset < previous[1] + previous[0].nbytes and meta.nbytes:
            raise InputError(f"{path} [{meta.name}]", f"data_offsets overlap those of {previous[0].name} (bytes "
                             f"{offset} to {offset + meta.nbytes} against {previous[1]} to "
                             f"{previous[1] + previous[0].nbytes})", _FIX)
        if meta.nbytes:
            previous = (meta, offset)


def _index_files(index: Path) -> list[Path]:
    where = str(index)
    input_stat(index, regular=True)
    data = expect(read_json(index, limit=MAX_HEADER, what="safetensors index"), dict, where, "the index",
                  "pass the index written beside the shards")
    if "weight_map" not in data:
        raise InputError(where, "no weight_map: not a safetensors index", "pass the index written beside the shards")
    weight_map = expect(data["weight_map"], dict, where, "weight_map", "pass the index written beside the shards")
    for name, file in weight_map.items():
        expect(file, str, where, f"weight_map.{name}", "each tensor maps to a shard file name")
        if Path(file).name != file or file in ("", ".", ".."):
            raise InputError(where, f"weight_map.{name} is {file!r}, expected a file name beside the index",
                             "shards live in the index's own folder")
    files = list(dict.fromkeys(weight_map.values()))
    for name in files:
        if not os.path.lexists(index.parent / name):
            raise InputError(where, f"shard {name} listed in weight_map is missing", "copy every shard beside it")
    return [index.parent / name for name in files]


def shard_files(path: Path) -> list[Path]:
    """The ``.safetensors`` files behind ``path`` (a file, an index, or a folder)."""
    path = Path(path)
    if path.is_dir():
        if os.path.lexists(path / INDEX_FILE):
            return _index_files(path / INDEX_FILE)
        if os.path.lexists(path / SINGLE_FILE):
            return [path / SINGLE_FILE]
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise InputError(str(path), "no .safetensors files in this folder", "pass a checkpoint file or folder")
        return files
    input_stat(path, regular=True)
    return _index_files(path) if path.name.endswith(".json") else [path]


class SafetensorsSource(SourceBase):
    """One ``.safetensors`` file, or a folder / ``*.index.json`` of shards, read lazily."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.files = shard_files(self.path)
        self._metas: dict[str, TensorMeta] = {}
        self._where: dict[str, tuple[Path, int]] = {}
        self.skipped: dict[str, str] = {}
        self.metadata: dict = {}
        for file in self.files:
            self._scan(file)

    def _scan(self, file: Path) -> None:
        header, data_start = read_header(file)
        size = file.stat().st_size
        metadata = header.pop("__metadata__", None) or {}                 # type-checked by read_header
        self.metadata = self.metadata or dict(metadata)
        found = []
        for name, entry in header.items():
            result = _entry(file, name, entry, data_start, size)
            if isinstance(result, str):
                self.skipped[name] = result
                continue
            if name in self._metas:
                raise InputError(f"{file} [{name}]", f"tensor also in {self._where[name][0].name}",
                                 "remove the duplicate shard")
            found.append(result)
        found.sort(key=lambda item: item[1])
        _check_overlaps(file, found)
        for meta, offset in found:   # file order: sequential reads
            self._metas[meta.name] = meta
            self._where[meta.name] = (file, offset)

    def metas(self) -> dict[str, TensorMeta]:
        return dict(self._metas)

    def read(self, name: str) -> np.ndarray:
        if name not in self._metas:
            raise missing_tensor(self.path, name, self._metas)
        meta = self._metas[name]
        file, offset = self._where[name]
        return mapped_array(file, offset, meta.shape, meta.dtype)

    def span(self, name: str) -> FileSpan:
        """Where the tensor's bytes lie (C order, as stored): a writer copies them without decoding."""
        if name not in self._metas:
            raise missing_tensor(self.path, name, self._metas)
        file, offset = self._where[name]
        return FileSpan(file, offset, self._metas[name].nbytes)

    def close(self) -> None:
        """Nothing is held open: every ``read`` maps its own byte range."""
