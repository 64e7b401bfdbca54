"""safetensors written by hand, streamed: headers built here (padded so that copied bytes keep their page
residue), tensors appended one at a time, sharded folders with their index written last. The layout is in
:mod:`.safetensors_io`, which reads it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from ..fileio import PREALLOCATE_FROM
from .base import TensorMeta
from .bytecopy import ALIGN_FROM, page_padding
from .common import PartialFile, StreamingSink
from .safetensors_io import CODES, INDEX_FILE


def build_header(metas: Iterable[TensorMeta], metadata: dict | None = None,
                 aligned_to: Mapping[str, int] | None = None) -> bytes:
    """Length prefix + JSON header (space padded) for tensors laid out in ``metas`` order.

    The data start is a multiple of 8, as the reference writer keeps it. ``aligned_to`` (tensor name
    -> the file offset its bytes are copied from) lengthens the padding, by less than a page, so
    that the most bytes of tensors of at least ``ALIGN_FROM`` bytes land at their source offset's
    page residue (a faster copy). The format
    allows nothing else: trailing spaces may pad the header, but the byte buffer may have no holes
    (huggingface/safetensors README.md "Format"; safetensors/src/tensor.rs ``Metadata::validate``).
    """
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(key): str(value) for key, value in metadata.items()}
    offset, starts = 0, []
    for meta in metas:
        header[meta.name] = {"dtype": CODES[meta.dtype], "shape": list(meta.shape),
                             "data_offsets": [offset, offset + meta.nbytes]}
        starts.append((meta, offset))
        offset += meta.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    text += b" " * _alignment_padding(8 + len(text), starts, aligned_to or {})
    return len(text).to_bytes(8, "little") + text


def _alignment_padding(data_start: int, starts: list[tuple[TensorMeta, int]], aligned_to: Mapping[str, int]) -> int:
    """Spaces (a multiple of 8) after the header so the most bytes keep their source page residue."""
    votes: dict[int, int] = {}
    for meta, relative in starts:
        if meta.name in aligned_to and meta.nbytes >= ALIGN_FROM:
            residue = page_padding(relative, aligned_to[meta.name])      # the data start this tensor wants
            if residue % 8 == 0:
                votes[residue] = votes.get(residue, 0) + meta.nbytes
    if not votes:
        return 0
    best = max(votes, key=lambda residue: (votes[residue], -page_padding(data_start, residue)))
    return page_padding(data_start, best)


def plan_shards(metas: list[TensorMeta], shard_bytes: int | None) -> list[list[TensorMeta]]:
    """Consecutive groups of at most ``shard_bytes`` (a larger tensor gets a shard of its own)."""
    if shard_bytes is None:
        return [list(metas)]
    if shard_bytes <= 0:
        raise InputError("shard_bytes", f"{shard_bytes} is not a positive size", "pass a size in bytes")
    groups: list[list[TensorMeta]] = [[]]
    size = 0
    for meta in metas:
        if groups[-1] and size + meta.nbytes > shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(meta)
        size += meta.nbytes
    return groups


def shard_name(index: int, count: int) -> str:
    return f"model-{index + 1:05d}-of-{count:05d}.safetensors"


class SafetensorsSink(StreamingSink):
    """Streams tensors into ``path`` (one file) or, with ``shard_bytes``, into the folder ``path``
    as ``model-0000K-of-0000N.safetensors`` + ``model.safetensors.index.json`` (written last)."""

    def __init__(self, path: Path | str, metas: list[TensorMeta], shard_bytes: int | None = None,
                 metadata: dict | None = None, aligned_to: Mapping[str, int] | None = None):
        super().__init__(path, metas)
        self.metadata = metadata
        self.aligned_to = dict(aligned_to or {})     # name -> source offset of a byte-copied tensor
        self.sharded = shard_bytes is not None
        groups = plan_shards(self.metas, shard_bytes)
        if self.sharded:
            if not self.path.parent.is_dir():
                raise InputError(str(self.path), f"folder {self.path.parent} does not exist", "create it first")
            if self.path.exists() and not self.path.is_dir():
                raise InputError(str(self.path), "exists and is not a folder; sharded output needs a folder",
                                 "choose a folder path, or name the output .safetensors for a single file")
            self._made_dir = not self.path.exists()
            self.path.mkdir(exist_ok=True)
            targets = [self.path / shard_name(i, len(groups)) for i in range(len(groups))]
        else:
            targets = [self.path]
        self._plan = list(zip(targets, groups, strict=True))
        self._done: list[PartialFile] = []
        self._committed: list[Path] = []
        self._current: PartialFile | None = None
        self._left = 0                      # tensors still due in the current shard
        if not self.metas:
            self._open_next()

    def _open_next(self) -> None:
        if self._current is not None:
            self._current.close()
        target, group = self._plan[len(self._done)]
        self._current = PartialFile(target)
        self._done.append(self._current)
        header = build_header(group, self.metadata, self.aligned_to)
        if sum(meta.nbytes for meta in group if meta.name in self.aligned_to) >= PREALLOCATE_FROM:
            self._current.reserve(len(header) + sum(meta.nbytes for meta in group))   # the file's exact size
        self._current.handle.write(header)
        self._left = len(group)

    def _emit(self, meta: TensorMeta, array: np.ndarray) -> None:
        while self._left == 0:
            self._open_next()
        self._current.write_array(array)
        self._left -= 1

    def _commit(self) -> list[Path]:
        while len(self._done) < len(self._plan):       # trailing empty shards (none in practice)
            self._open_next()
        files = self._committed
        for partial in self._done:
            files.append(partial.commit())
        if self.sharded:
            weight_map = {meta.name: target.name for target, group in self._plan for meta in group}
            index = {"metadata": {"total_size": sum(meta.nbytes for meta in self.metas)}, "weight_map": weight_map}
            partial = PartialFile(self.path / INDEX_FILE)
            self._done.append(partial)
            partial.handle.write(json.dumps(index, indent=2).encode("utf-8"))
            files.append(partial.commit())
        return list(files)

    def _discard(self) -> None:
        for partial in self._done:
            partial.discard()
        for path in self._committed:          # a commit that failed half way: remove what it renamed
            path.unlink(missing_ok=True)
        if self.sharded and getattr(self, "_made_dir", False) and not any(self.path.iterdir()):
            self.path.rmdir()

