"""The step store: per-parameter tensors of one training step, by kind (``datasets/step_store.yaml``).

Layout (the yaml's templates)::

    ROOT/step_{N}/{kind}/{parameter name}.npy      grads | params_before | params_after | exp_avg | exp_avg_sq
    ROOT/step_{N}/{kind}/manifest.json             written last: shape, dtype, sha256, bytes per tensor + meta
    ROOT/step_{N}/{kind}/mp_rank_{tp:02d}_{pp:03d}/  on a TP/PP rank: that rank's shard, same files (rank_dir)

:func:`save_step_tensors` writes one step-and-kind folder through the same atomic, manifest-last
writer as the batch capture (:mod:`workbench.replay.npy_writer`); :func:`read_step_manifest`
reads and type-checks a manifest. :class:`workbench.tensors.step_store.StepStoreSource` opens a
kind folder as a checkpoint (``workbench convert``, ``workbench weights diff``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ..errors import InputError
from ..input_files import expect, expect_count
from ..tensors.sizes import check_shape
from .manifest import capture_json
from .npy_files import CaptureError
from .npy_writer import numpy_dtype, restart_folder, save_npy_atomic, to_numpy, write_manifest_last
from .step_kinds import META_TYPES, StepLayout, load_step_layout

MANIFEST_FORMAT = "workbench.step_store.manifest/1"
_REWRITE = "the manifest is damaged: write this step again"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class StepManifest:
    """A checked step-and-kind manifest: tensors in written order (name → entry)."""

    path: Path
    step: int
    kind: str
    meta: dict
    tensors: dict[str, dict]


def save_step_tensors(root: Path | str, step: int, kind: str, tensors: Mapping[str, object],
                      meta: Mapping[str, object] | None = None, layout: StepLayout | None = None,
                      rank: tuple[int, int] | None = None) -> Path:
    """Write ``tensors`` (name → numpy array or torch tensor) as ``ROOT/step_{step}/{kind}/``; returns the folder.

    ``rank`` (tp, pp) writes one rank's shard into the kind folder's ``rank_dir`` instead; ``meta``
    must then carry ``tp_rank``/``tp_size``/``pp_rank``/``pp_size`` (the readers merge by them).

    ``tensors`` may be any mapping, lazy ones included: each tensor is converted and written alone, so
    memory follows the largest tensor (a capture hook never holds a second copy of the model).
    Each ``.npy`` is atomic; the manifest is written after the last one (a folder written before is
    emptied, its manifest first), so an interrupted call leaves an incomplete step that readers refuse.
    """
    layout = layout or load_step_layout()
    spec = layout.kind(kind, "save_step_tensors")
    step = expect_count(step, "save_step_tensors", "step")
    meta = {key: _scalar(value) for key, value in (meta or {}).items()}
    check_meta(meta, spec.meta, f"save_step_tensors({kind!r})")
    for name in tensors:                         # names and dtypes first: nothing written for a bad one
        layout.check_name(name, f"save_step_tensors({kind!r})")
        dtype = numpy_dtype(tensors[name])       # (a lazy mapping's value is dropped at once)
        if not spec.dtype_ok(dtype):
            raise InputError(f"save_step_tensors({kind!r}) [{name}]", f"dtype {dtype} is not "
                             f"{' or '.join(spec.dtypes)}", f"datasets/step_store.yaml declares {kind}'s dtypes")
    json.dumps(meta)  # not JSON (a TypeError): refused before anything is written
    folder = layout.folder(Path(root), step, kind)
    if rank is not None:
        _check_rank_meta(meta, rank, f"save_step_tensors({kind!r})")
        folder = layout.rank_folder(folder, *rank)
    restart_folder(folder, layout.manifest)
    entries = {name: {"file": layout.file(name), **save_npy_atomic(folder / layout.file(name), to_numpy(tensors[name]))}
               for name in tensors}                # one tensor converted and held at a time
    write_manifest_last(folder, layout.manifest, {"format": MANIFEST_FORMAT, "step": step, "kind": kind,
                                                  "meta": meta, "tensors": entries})
    return folder


def _scalar(value):
    """numpy scalars and one-element torch tensors (``lr``, ``grad_norm`` as trainers hold them) → Python."""
    if isinstance(value, (bool, int, float, str)) or not hasattr(value, "item"):
        return value
    return value.item()


RANK_META = ("tp_rank", "tp_size", "pp_rank", "pp_size")


def _check_rank_meta(meta: Mapping, rank: tuple[int, int], where: str) -> None:
    """A rank shard's metadata names its rank and sizes, and the rank lies inside the sizes."""
    missing = [key for key in RANK_META if not isinstance(meta.get(key), int) or isinstance(meta.get(key), bool)]
    if missing:
        raise InputError(where, f"a rank shard needs integer meta {', '.join(missing)}",
                         "pass tp_rank/tp_size/pp_rank/pp_size (or args=) to the capture")
    if (meta["tp_rank"], meta["pp_rank"]) != tuple(rank) or not (0 <= rank[0] < meta["tp_size"]) \
            or not (0 <= rank[1] < meta["pp_size"]):
        raise InputError(where, f"rank (tp, pp) {tuple(rank)} does not fit meta tp {meta['tp_rank']}/"
                         f"{meta['tp_size']}, pp {meta['pp_rank']}/{meta['pp_size']}",
                         "pass ranks in 0..size-1")


def check_meta(meta, declared: Mapping[str, str], where: str) -> dict:
    """Declared metadata keys have their declared type (an integer is a number; NaN and inf are numbers:
    a diverged step's grad norm is worth keeping)."""
    expect(meta, dict, where, "meta", _REWRITE)
    for key, word in declared.items():
        if key in meta:
            expect(meta[key], META_TYPES[word], where, f"meta.{key}", _REWRITE)
    return meta


def read_step_manifest(folder: Path, layout: StepLayout | None = None) -> StepManifest:
    """The manifest of a kind folder, every field type-checked; a missing one is an incomplete step."""
    layout = layout or load_step_layout()
    path = folder / layout.manifest
    if not path.exists() and not path.is_symlink():
        parts = sorted(p.name for p in folder.glob(".*.part"))
        extra = f"; half-written {parts[0]} left behind" if parts else ""
        raise CaptureError(str(path), f"incomplete step: no manifest (the writer stopped before the step's "
                           f"last tensor was written{extra})", "write this step again or leave it out", check="incomplete")
    data = capture_json(path, "manifest")
    where = str(path)
    try:
        if data.get("format") != MANIFEST_FORMAT:
            raise InputError(where, f"format is {str(data.get('format'))[:60]!r}, expected {MANIFEST_FORMAT!r}",
                             "pass a step-store kind folder (step_N/KIND/)")
        step = expect_count(data.get("step"), where, "step", fix=_REWRITE)
        kind = expect(data.get("kind"), str, where, "kind", _REWRITE)
        spec = layout.kind(kind, where)
        meta = check_meta(data.get("meta", {}), spec.meta, where)
        tensors = expect(data.get("tensors"), dict, where, "tensors", _REWRITE)
        for name, entry in tensors.items():
            _check_entry(layout, name, entry, where, spec)
    except CaptureError:
        raise
    except InputError as error:
        raise CaptureError(error.where, error.problem, error.fix, check="manifest") from None
    _check_place(layout, folder, step, kind, where, meta)
    return StepManifest(path, step, kind, meta, tensors)


def _check_entry(layout: StepLayout, name: str, entry, where: str, spec) -> None:
    key = f"tensors.{name[:80]}"
    layout.check_name(name, where, key)
    expect(entry, dict, where, key, _REWRITE)
    if entry.get("file") != layout.file(name):
        raise InputError(where, f"{key}.file is {str(entry.get('file'))[:80]!r}, expected {layout.file(name)!r}",
                         _REWRITE)
    check_shape(entry.get("shape"), where, f"{key}.shape")
    text = expect(entry.get("dtype"), str, where, f"{key}.dtype", _REWRITE)
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError):
        raise InputError(where, f"{key}.dtype {text[:40]!r} is not a numpy dtype", _REWRITE) from None
    if not spec.dtype_ok(dtype):
        raise InputError(where, f"{key}.dtype {dtype} is not {' or '.join(spec.dtypes)}", _REWRITE)
    digest = expect(entry.get("sha256"), str, where, f"{key}.sha256", _REWRITE)
    if not _SHA256.match(digest):
        raise InputError(where, f"{key}.sha256 is not 64 lowercase hex digits", _REWRITE)
    expect_count(entry.get("bytes"), where, f"{key}.bytes", fix=_REWRITE)


def _check_place(layout: StepLayout, folder: Path, step: int, kind: str, where: str, meta: dict) -> None:
    """The manifest belongs to this folder: its kind is the folder's name, its step the parent's number
    (a rank folder: its rank is the manifest's, and its parent is the kind folder)."""
    rank = layout.parse_rank(folder.name)
    if rank is not None:
        try:
            _check_rank_meta(meta, rank, where)
        except InputError as error:
            raise CaptureError(where, f"{error.problem} (folder {folder.name}/)", "keep each rank's shard in its "
                               "own folder (a manifest copied from elsewhere?)", check="manifest") from None
        folder = folder.resolve().parent
    if folder.name != layout.kind_dir.format(kind=kind):
        raise CaptureError(where, f"kind is {kind!r} but the folder is {folder.name}/", "keep each kind in its "
                           "own folder (a manifest copied from elsewhere?)", check="manifest")
    parent = layout.parse_step(folder.resolve().parent.name)
    if parent is not None and parent != step:
        raise CaptureError(where, f"step is {step} but the folder is {folder.resolve().parent.name}/",
                           "keep each step in its own folder", check="manifest")
