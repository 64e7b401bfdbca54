"""Batch capture on the Megatron side: every micro-batch of every training step, per DP rank.

Call it in ``forward_step`` right after ``get_batch`` (``megatron_forward_step_snippet`` below).
It needs no process group and no torch import: tensors are converted with
``.detach().cpu().numpy()`` (bf16 via float32), numpy arrays are taken as they are. Capture with
PP = 1 (with pipeline parallelism tokens and labels live on different stages).

- **Steps**: the iteration passed in (Megatron: ``get_args().curr_iteration``, 0-based; step 0 is
  what the log prints as "iteration 1"). ``forward_step`` runs once per *micro-batch*, and also
  during evaluation, so a per-call counter is not a step counter: micro-batches are numbered
  within each iteration (the number resets when the iteration changes) and calls with
  ``training=False`` (``model.training`` is False during evaluation) are skipped.
- **Rank**: ``dp_rank`` when given, else the ``RANK`` environment variable (torchrun's global
  rank), else ``LOCAL_RANK``, else 0; ``dp_world`` when given, else ``WORLD_SIZE``, else 1. The
  environment equals the DP rank only when TP = PP = CP = 1: pass
  ``parallel_state.get_data_parallel_rank()`` otherwise (and capture on TP rank 0 only).
- **Layout** (``datasets/megatron_capture.yaml``, layout ``workbench``):
  ``step_{N}/rank_{R}/{tokens,labels,loss_mask,attention_mask,position_ids}.npy`` for
  micro-batch 0 (the field's layout), ``step_{N}/rank_{R}/mb_{M}/{field}.npy`` for micro-batch
  M >= 1, ``step_{N}/rank_{R}/manifest.json`` (shape, dtype, sha256 per file) and
  ``workbench_capture.json`` at the root. Fields that are None are not written.
- **Cheap**: a large array equal to the one the previous micro-batch wrote (Megatron's causal
  ``attention_mask`` [1, 1, s, s], 16 MiB at s = 4096) is hard-linked to that file, not rewritten;
  readers see an ordinary file (``benchmarks/capture_overhead.py`` measures the cost).
- **Atomic**: each file is written as ``.NAME.*.part`` and renamed. The manifest of a step is
  written last, when the step's ``micro_batches`` micro-batches are in (when given), when the next
  iteration starts, or at :meth:`BatchCapture.close`; a step started again has its old manifest
  removed first. A killed run therefore leaves its last step without a manifest: incomplete, and
  the store refuses to use it. Ranks never share a file (the root marker holds the same content
  for every rank and is replaced atomically).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..fileio import link_into_place
from .layout import Layout, load_knowledge
from .npy_writer import (drop_manifest, restart_folder, save_npy_atomic, to_numpy, write_json_atomic,
                         write_manifest_last)

__all__ = ["BatchCapture", "capture_batch", "save_npy_atomic", "to_numpy", "write_json_atomic"]

FIELDS = ("tokens", "labels", "loss_mask", "attention_mask", "position_ids")
MANIFEST_FORMAT = "workbench.capture.manifest/1"
MARKER_FORMAT = "workbench.capture/1"
REPEAT_BYTES = 1 << 20  # arrays this large that repeat unchanged are hard-linked, not rewritten

megatron_forward_step_snippet = '''\
# pretrain_gpt.py, at the top (os, get_args and parallel_state are usually imported already):
from megatron.core import parallel_state
from megatron.core.num_microbatches_calculator import get_num_microbatches
from workbench.replay.capture import capture_batch

# pretrain_gpt.py, forward_step(data_iterator, model), right after
#     tokens, labels, loss_mask, attention_mask, position_ids = get_batch(data_iterator)
    if parallel_state.get_tensor_model_parallel_rank() == 0:  # TP ranks hold the same batch
        capture_batch(os.environ["WORKBENCH_CAPTURE_DIR"], get_args().curr_iteration, tokens, labels, loss_mask,
                      attention_mask, position_ids, dp_rank=parallel_state.get_data_parallel_rank(),
                      dp_world=parallel_state.get_data_parallel_world_size(),
                      micro_batches=get_num_microbatches(), training=model.training)
'''


def _env_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        text = os.environ.get(name)
        if text not in (None, ""):
            return int(text)
    return default


class BatchCapture:
    """Records the micro-batches of training steps for one data-parallel rank (see module doc)."""

    def __init__(self, out_dir: Path | str, dp_rank: int | None = None, dp_world: int | None = None,
                 micro_batches: int | None = None, layout: Layout | None = None) -> None:
        self.root = Path(out_dir)
        self.dp_rank = _env_int(("RANK", "LOCAL_RANK"), 0) if dp_rank is None else int(dp_rank)
        self.dp_world = _env_int(("WORLD_SIZE",), 1) if dp_world is None else int(dp_world)
        if not 0 <= self.dp_rank < self.dp_world:
            raise ValueError(f"dp_rank {self.dp_rank} is outside dp_world {self.dp_world}")
        self.micro_batches = micro_batches
        self.layout = layout or load_knowledge().writer_layout()
        self.iteration: int | None = None
        self.micro_batch = 0  # the next micro-batch index within self.iteration
        self._entries: dict[str, dict] = {}
        self._finalized = True
        self._marker_written = False
        self._previous: dict[str, tuple[np.ndarray, Path, dict]] = {}

    # -- paths
    def rank_dir(self, iteration: int) -> Path:
        return self.root / self.layout.step_name(iteration) / self.layout.rank_name(self.dp_rank)

    def _write_marker(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.layout.marker:
            write_json_atomic(self.root / self.layout.marker, {
                "format": MARKER_FORMAT, "layout": self.layout.name, "dp_world": self.dp_world})
        self._marker_written = True

    def _start_step(self, iteration: int) -> None:
        self.finalize()
        self.iteration, self.micro_batch, self._entries, self._finalized = iteration, 0, {}, False
        restart_folder(self.rank_dir(iteration), self.layout.manifest)  # a resumed run: old manifest goes first

    def _link_repeat(self, name: str, array: np.ndarray, target: Path) -> dict | None:
        """A large array equal to the last one written (the causal mask): hard-link that file instead."""
        previous = self._previous.get(name)
        if previous is None or previous[0].shape != array.shape or previous[0].dtype != array.dtype \
                or not np.array_equal(previous[0], array):
            return None
        if not link_into_place(previous[1], target):  # no hard links here, or the first file was removed
            return None
        return previous[2]

    # -- the hook
    def record(self, iteration: int, tokens, labels, loss_mask, attention_mask=None, position_ids=None,
               training: bool = True) -> int | None:
        """Record one micro-batch of ``iteration``; returns its micro-batch index (None: skipped)."""
        if not training:
            return None
        iteration = int(iteration)
        if not self._marker_written:
            self._write_marker()
        if iteration != self.iteration:
            self._start_step(iteration)
        elif self._finalized:  # more micro-batches than announced: the manifest is stale until re-finalized
            drop_manifest(self.rank_dir(iteration), self.layout.manifest)
            self._finalized = False
        arrays = dict(zip(FIELDS, (tokens, labels, loss_mask, attention_mask, position_ids), strict=True))
        for name in FIELDS[:3]:
            if arrays[name] is None:
                raise ValueError(f"capture: {name} is None (with pipeline parallelism only the first stage has tokens "
                                 "and only the last has labels and loss_mask): capture with PP=1")
        micro_batch = self.micro_batch
        folder = self.rank_dir(iteration)
        for name, value in arrays.items():
            array = to_numpy(value)
            if array is None:
                continue
            relative = self.layout.file(name, micro_batch)
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            entry = self._link_repeat(name, array, target)
            if entry is None:
                entry = save_npy_atomic(target, array)
                if array.nbytes >= REPEAT_BYTES:
                    self._previous[name] = (array.copy(), target, entry)
            self._entries[relative] = {"micro_batch": micro_batch, "field": name, **entry}
        self.micro_batch += 1
        if self.micro_batches is not None and self.micro_batch >= self.micro_batches:
            self.finalize()
        return micro_batch

    def finalize(self) -> None:
        """Write the current step's manifest (once) unless it is known to be short of micro-batches."""
        if self._finalized or self.iteration is None:
            return
        self._finalized = True
        if self.micro_batches is not None and self.micro_batch < self.micro_batches:
            return  # fewer micro-batches than Megatron runs per step: leave the step incomplete
        if self.layout.manifest:
            write_manifest_last(self.rank_dir(self.iteration), self.layout.manifest, {
                "format": MANIFEST_FORMAT, "step": self.iteration, "rank": self.dp_rank,
                "dp_world": self.dp_world, "micro_batches": self.micro_batch, "files": self._entries})

    def close(self) -> None:
        """Finish the last step (its manifest); call at the end of training."""
        self.finalize()

    def __enter__(self) -> "BatchCapture":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()


_CAPTURES: dict[tuple[str, int | None], BatchCapture] = {}


def capture_batch(out_dir, iteration, tokens, labels, loss_mask, attention_mask=None, position_ids=None, *,
                  dp_rank: int | None = None, dp_world: int | None = None, micro_batches: int | None = None,
                  training: bool = True) -> int | None:
    """One-call hook for ``forward_step``: a :class:`BatchCapture` per (folder, rank), kept for the run."""
    key = (str(out_dir), dp_rank)
    capture = _CAPTURES.get(key)
    if capture is None:
        capture = _CAPTURES[key] = BatchCapture(out_dir, dp_rank, dp_world, micro_batches)
    capture.micro_batches = micro_batches  # Megatron's count may ramp up with the batch size
    return capture.record(iteration, tokens, labels, loss_mask, attention_mask, position_ids, training=training)
