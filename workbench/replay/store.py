"""``CaptureStore``: a lazy, verified view of a capture folder (any layout in ``datasets/``).

The constructor lists the root folder and the first step's folder (``os.scandir``) and nothing
else: no ``.npy`` and no manifest is opened, so an index over 100k steps x 8 ranks builds in well
under a second. Everything else is read on demand and checked as it is read: a missing step or
rank folder, a step without its manifest (a killed capture), a truncated ``.npy``, a file that
disagrees with ``manifest.json``, a non-integer token dtype or a shape that changes between
steps raise a one-line :class:`CaptureError` naming the file.

Global-batch order (Megatron ``MegatronPretrainingSampler``): the sampler walks the samples in
chunks of ``mbs * D`` and DP rank ``r`` takes ``chunk[r*mbs:(r+1)*mbs]``; consecutive chunks are
consecutive micro-batches. The global batch of a step is therefore micro-batch 0 of ranks
0..D-1, then micro-batch 1 of ranks 0..D-1, ... (:meth:`CaptureStore.global_order`).
"""
from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..input_files import expect_count
from .layout import CaptureKnowledge, load_knowledge
from .manifest import capture_json, check_manifest
from .npy_files import CaptureError, describe_numbers, load_npy, npy_header

__all__ = ["CaptureError", "CaptureStore", "describe_numbers"]


def _subdirs(folder: Path) -> list[str]:
    with os.scandir(folder) as entries:
        return [entry.name for entry in entries if entry.is_dir()]


def _names(folder: Path) -> list[str]:
    with os.scandir(folder) as entries:
        return [entry.name for entry in entries]


class CaptureStore:
    """Per-step batches of a capture folder, read lazily (see the module doc).

    ``fixed_shapes``: every step's fields must have the shapes of the first step (Megatron
    pretraining); turn it off for variable-length captures.
    """

    def __init__(self, path: Path | str, knowledge: CaptureKnowledge | None = None, fixed_shapes: bool = True) -> None:
        self.root = self.path = Path(path)
        if not self.root.is_dir():
            raise CaptureError(str(self.root), "capture folder not found" if not self.root.exists() else
                               "not a folder", "pass the folder that holds step_*/ folders", check="missing")
        self.knowledge = knowledge or load_knowledge()
        self.fixed_shapes = fixed_shapes
        names = set(_names(self.root))
        layout = self.knowledge.match(names)
        if layout is None:
            raise CaptureError(str(self.root), "no capture layout matches (expected step folders such as "
                               f"{self.knowledge.writer_layout().step_name(0)}/)",
                               "pass a capture folder, or declare its layout in datasets/", check="layout")
        self._layout = layout
        self._step_names: dict[int, str] = {}
        for name in names:
            step = layout.parse_step(name)
            if step is not None:
                if step in self._step_names:
                    raise CaptureError(str(self.root / name), f"step {step} also in {self._step_names[step]}/",
                                       "keep one folder per step", check="layout")
                self._step_names[step] = name
        if not self._step_names:
            raise CaptureError(str(self.root), "no step folders", "the capture recorded no training step",
                               check="missing")
        self.steps: list[int] = sorted(self._step_names)
        self._first_ranks = sorted(r for r in map(layout.parse_rank, _subdirs(self.root / self._step_names[self.steps[0]]))
                                   if r is not None)
        self._marker: dict | None = None
        self._listings: OrderedDict = OrderedDict()
        self._manifests: OrderedDict = OrderedDict()
        self._reference: dict | None = None

    # -- the index
    @property
    def layout(self) -> str:
        """Name of the ``datasets/`` layout that matched."""
        return self._layout.name

    @property
    def has_manifest(self) -> bool:
        """True for captures written by BatchCapture (per step-and-rank manifests)."""
        return self._layout.manifest is not None

    def _marker_data(self) -> dict:
        if self._marker is None:
            self._marker = {}
            if self._layout.marker and os.path.lexists(self.root / self._layout.marker):
                path = self.root / self._layout.marker
                self._marker = capture_json(path, "capture marker")
                if self._marker.get("dp_world") is not None:
                    expect_count(self._marker["dp_world"], str(path), "dp_world", minimum=1,
                                 fix="the marker is damaged: restore it or delete it (ranks are then counted)")
        return self._marker

    @property
    def dp_world(self) -> int:
        """Data-parallel size: the capture's marker, else the number of rank folders in the first step."""
        world = self._marker_data().get("dp_world")
        return int(world) if world else len(self._first_ranks)

    @property
    def ranks(self) -> list[int]:
        """0..dp_world-1 (marker), else the rank folders of the first step."""
        return list(range(self.dp_world)) if self._marker_data().get("dp_world") else list(self._first_ranks)

    @property
    def fields(self) -> list[str]:
        """Fields present in micro-batch 0 of the first step and rank, in ``datasets/`` order."""
        names = set(self._listing(*self._first()))
        return [f for f in self.knowledge.fields if self._layout.file(f, 0) in names]

    # -- paths and listings
    def _first(self) -> tuple[int, int]:
        """(first step, its first rank folder): the reference for fields and shapes."""
        if not self._first_ranks:
            raise CaptureError(str(self.step_path(self.steps[0])), "no rank folders in the first step",
                               f"expected {self._layout.rank_name(0)}/ and so on", check="missing")
        return self.steps[0], self._first_ranks[0]

    def step_path(self, step: int) -> Path:
        if step not in self._step_names:
            missing = [s for s in range(self.steps[0], self.steps[-1] + 1) if s not in self._step_names]
            gap = f"; missing: {describe_numbers(missing)}" if missing else ""
            raise CaptureError(str(self.root / self._layout.step_name(step)),
                               f"step {step} not captured (steps {describe_numbers(self.steps)}{gap})",
                               "re-capture the missing steps or pick a captured one", check="missing")
        return self.root / self._step_names[step]

    def rank_path(self, step: int, rank: int) -> Path:
        folder = self.step_path(step) / self._layout.rank_name(rank)
        if not folder.is_dir():
            found = sorted(r for r in map(self._layout.parse_rank, _subdirs(self.step_path(step))) if r is not None)
            raise CaptureError(str(folder), f"rank folder missing (this step has ranks {describe_numbers(found) or 'none'},"
                               f" expected {describe_numbers(self.ranks)})", "re-capture this step", check="missing")
        return folder

    def rank_numbers(self, step: int) -> list[int]:
        """Rank folders actually present in a step (one directory listing)."""
        return sorted(r for r in map(self._layout.parse_rank, _subdirs(self.step_path(step))) if r is not None)

    def _listing(self, step: int, rank: int) -> list[str]:
        key = (step, rank)
        if key not in self._listings:
            self._listings[key] = _names(self.rank_path(step, rank))
            if len(self._listings) > 256:
                self._listings.popitem(last=False)
        return self._listings[key]

    def manifest(self, step: int, rank: int) -> dict | None:
        """The step-and-rank manifest (None for layouts without one); missing = incomplete step."""
        if not self.has_manifest:
            return None
        key = (step, rank)
        if key in self._manifests:
            return self._manifests[key]
        folder = self.rank_path(step, rank)
        path = folder / self._layout.manifest
        if self._layout.manifest not in self._listing(step, rank):
            parts = [n for n in self._listing(step, rank) if n.endswith(".part")]
            extra = f"; half-written {parts[0]} left behind" if parts else ""
            raise CaptureError(str(path), "incomplete step: no manifest (the capture stopped before the step's last "
                               f"micro-batch was written{extra})", "re-capture this step or leave it out of the replay",
                               check="incomplete")
        data = capture_json(path, "manifest")
        try:
            check_manifest(data, str(path))
        except InputError as error:
            raise CaptureError(error.where, error.problem, error.fix, check="manifest") from None
        self._manifests[key] = data
        if len(self._manifests) > 256:
            self._manifests.popitem(last=False)
        return data

    def micro_batches(self, step: int, rank: int) -> int:
        """Micro-batches of a step on a rank (folders counted; the manifest must agree)."""
        names = self._listing(step, rank)
        indices = sorted({i for i in map(self._layout.parse_micro_batch, names) if i is not None})
        folder = self.rank_path(step, rank)
        if indices != list(range(1, len(indices) + 1)):
            missing = sorted(set(range(1, max(indices) + 1)) - set(indices))
            raise CaptureError(str(folder / self._layout.file("tokens", missing[0])),
                               f"micro-batch {missing[0]} missing (found {describe_numbers(indices)})",
                               "re-capture this step", check="missing")
        count = 1 + len(indices)
        manifest = self.manifest(step, rank)
        if manifest is not None and int(manifest["micro_batches"]) != count:
            raise CaptureError(str(folder / self._layout.manifest), f"says {manifest['micro_batches']} micro-batches, "
                               f"the folder holds {count}", "re-capture this step", check="manifest")
        return count

    def is_complete(self, step: int) -> bool:
        """Every expected rank present with a consistent micro-batch count (and manifest)."""
        try:
            return len({self.micro_batches(step, rank) for rank in self.ranks}) == 1
        except CaptureError:
            return False

    def global_order(self, step: int) -> list[tuple[int, int]]:
        """(rank, micro_batch) in Megatron's global-batch order: micro-batch-major, then rank."""
        counts = {rank: self.micro_batches(step, rank) for rank in self.ranks}
        if len(set(counts.values())) != 1:
            raise CaptureError(str(self.step_path(step)), "ranks hold different micro-batch counts "
                               f"({', '.join(f'rank {r}: {n}' for r, n in counts.items())})",
                               "re-capture this step", check="incomplete")
        return [(rank, m) for m in range(next(iter(counts.values()))) for rank in self.ranks]

    # -- reading
    def _check_array(self, path: Path, name: str, array_shape, dtype, bound: dict[str, tuple]) -> None:
        """dtype and rank from ``datasets/``; symbolic dims (b, s) must agree across a micro-batch's fields.

        ``bound`` maps a symbol to (size, field, shape) of the first field that fixed it.
        """
        spec = self.knowledge.fields[name]
        if not spec.dtype_ok(dtype):
            raise CaptureError(str(path), f"dtype {dtype} is not {' or '.join(spec.kinds)} "
                               f"(expected {spec.expected or spec.kinds[0]})", "capture the field as Megatron's get_batch "
                               "returns it", check="dtype")
        if spec.shape and len(spec.shape) != len(array_shape):
            raise CaptureError(str(path), f"shape {list(array_shape)} has {len(array_shape)} dims, expected "
                               f"[{', '.join(spec.shape)}]", "capture the field unchanged", check="shape")
        for dim, size in zip(spec.shape, array_shape, strict=False):  # an empty spec.shape declares nothing
            choices = dim.split("|")
            if any(c.isdigit() and int(c) == size for c in choices):
                continue
            symbols = [c for c in choices if not c.isdigit()]
            if symbols and (symbols[0] not in bound or bound[symbols[0]][0] == size):
                bound.setdefault(symbols[0], (size, name, tuple(array_shape)))
                continue
            if not symbols:
                raise CaptureError(str(path), f"shape {list(array_shape)} does not fit [{', '.join(spec.shape)}]",
                                   "capture the field unchanged", check="shape")
            other_size, other, other_shape = bound[symbols[0]]
            raise CaptureError(str(path), f"{name} shape {list(array_shape)} disagrees with {other} shape "
                               f"{list(other_shape)} ({symbols[0]} = {size} here, {other_size} there)",
                               "the fields of a micro-batch must agree: re-capture this step", check="shape")

    def reference_shapes(self) -> dict[str, tuple[int, ...]]:
        """Field shapes of the first step's first micro-batch (headers only)."""
        if self._reference is None:
            folder = self.rank_path(*self._first())
            self._reference = {name: npy_header(folder / self._layout.file(name, 0))[0] for name in self.fields}
        return self._reference

    def path_of(self, step: int, rank: int, micro_batch: int, field: str) -> Path:
        return self.rank_path(step, rank) / self._layout.file(field, micro_batch)

    def read(self, step: int, rank: int, micro_batch: int = 0, verify: bool = False) -> dict[str, np.ndarray]:
        """The fields of one micro-batch, checked (``verify=True`` also checks each file's sha256)."""
        count = self.micro_batches(step, rank)
        folder = self.rank_path(step, rank)
        if not 0 <= micro_batch < count:
            raise CaptureError(str(folder), f"micro-batch {micro_batch} not captured (this step has {count})",
                               f"pick 0..{count - 1}", check="missing")
        manifest = self.manifest(step, rank)
        listed = {rel: entry for rel, entry in (manifest or {}).get("files", {}).items()
                  if int(entry.get("micro_batch", 0)) == micro_batch}
        arrays: dict[str, np.ndarray] = {}
        bound: dict[str, tuple] = {}
        for name, spec in self.knowledge.fields.items():
            relative = self._layout.file(name, micro_batch)
            path = folder / relative
            entry = listed.pop(relative, None)
            if manifest is not None and entry is None:
                if os.path.lexists(path):
                    raise CaptureError(str(path), "file not listed in manifest.json", "re-capture this step",
                                       check="manifest")
                if not spec.required:
                    continue
            elif manifest is None and not spec.required and not os.path.lexists(path):
                continue
            if not os.path.lexists(path):
                where = "listed in manifest.json but missing" if entry else f"required field {name} missing"
                raise CaptureError(str(path), where, "re-capture this step", check="missing")
            array = load_npy(path, entry.get("sha256") if (verify and entry) else None)
            if entry is not None and (list(array.shape) != list(entry["shape"]) or str(array.dtype) != entry["dtype"]):
                raise CaptureError(str(path), f"holds {array.dtype} {list(array.shape)}, manifest.json says "
                                   f"{entry['dtype']} {list(entry['shape'])}", "re-capture this step", check="manifest")
            self._check_array(path, name, array.shape, array.dtype, bound)
            if self.fixed_shapes and name in self.reference_shapes() and array.shape != self.reference_shapes()[name]:
                raise CaptureError(str(path), f"shape {list(array.shape)} differs from step {self.steps[0]}'s "
                                   f"{list(self.reference_shapes()[name])}", "shapes must not change between steps; "
                                   "CaptureStore(fixed_shapes=False) reads variable-length data", check="shape")
            arrays[name] = array
        if listed:
            rel = next(iter(listed))
            raise CaptureError(str(folder / rel), "listed in manifest.json but not a known field file",
                               "re-capture this step", check="manifest")
        return arrays

    def __repr__(self) -> str:
        return (f"CaptureStore({str(self.root)!r}, layout={self.layout}, steps={describe_numbers(self.steps)}, "
                f"ranks={describe_numbers(self._first_ranks)})")
