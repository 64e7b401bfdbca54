"""Pick the reader or writer for a path.

Readers (:func:`open_source`)::

    x.safetensors | *.safetensors.index.json | folder with model.safetensors[.index.json]  safetensors
    x.bin | pytorch_model.bin.index.json | folder with pytorch_model.bin[.index.json]      torch state dict
    x.pt / x.pth (a plain state dict, or {"model": {...}})                              torch state dict
    model_optim_rng.pt | iter_* folder with mp_rank_* | save root with the tracker file  Megatron legacy
    iter_* folder with .metadata + *.distcp | save root whose iteration has them          Megatron torch_dist
    x.ckpt | folder holding exactly one .ckpt                                            MindSpore
    step_N/KIND/ folder (KIND from datasets/step_store.yaml: grads, params_after, ...)    step store
    {save}/wgrads[/iter_*] of mp_rank_*.pth, or one such file (--save-wgrads-interval)   Megatron capture

Writers (:func:`open_sink`): ``.ckpt`` (MindSpore), ``.safetensors`` (one file), or a folder
(sharded safetensors with ``model.safetensors.index.json``).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import InputError
from ..input_files import input_stat
from .base import TensorMeta, TensorSink, TensorSource

DEFAULT_SHARD_BYTES = 5 * 1000 ** 3          # Hugging Face's default max_shard_size "5GB"
FORMATS = ("ckpt", "safetensors", "safetensors-dir")
_LOOKED_FOR = ("model.safetensors[.index.json], pytorch_model.bin[.index.json], *.safetensors, one *.ckpt, "
               "latest_checkpointed_iteration.txt, mp_rank_* folders, .metadata, a step_N/KIND/ step-store folder, "
               "wgrads/iter_*/mp_rank_*.pth")


def open_source(path: Path | str, config: Path | str | None = None) -> TensorSource:
    """The lazy reader for ``path``, chosen from its name and contents (never from its size).

    ``config`` (a Megatron training script, log or yaml) settles the Megatron args a capture without
    a checkpoint beside it needs to merge its tensor-parallel shards; other readers ignore it.
    """
    path = Path(path)
    if path.is_dir():
        return _open_folder(path, config)
    input_stat(path, regular=True)        # missing, looping symlink, FIFO: each named, never "not found"
    return _open_file(path)


def _open_file(path: Path) -> TensorSource:
    name = path.name
    if name.endswith((".safetensors", ".safetensors.index.json")):
        from .safetensors_io import SafetensorsSource
        return SafetensorsSource(path)
    if name.endswith(".ckpt"):
        from .mindspore_ckpt_read import MindSporeCkptSource
        return MindSporeCkptSource(path)
    if name.endswith((".bin", ".bin.index.json")):
        from .torch_io import TorchFileSource
        return TorchFileSource(path)
    if name == "model_optim_rng.pt" or name.startswith("model_optim_rng"):
        from .megatron_legacy import MegatronLegacySource
        return MegatronLegacySource(path)
    if name.endswith((".pt", ".pth")):
        return _open_torch_file(path)
    raise InputError(str(path), f"unknown checkpoint type {path.suffix or name!r}",
                     "expected .safetensors, .bin, .pt/.pth, .ckpt, an index .json or a checkpoint folder")


def _open_torch_file(path: Path) -> TensorSource:
    """A torch file: a Megatron rank file, ``{"model"|"state_dict": state dict, ..}``, or a flat state dict."""
    from collections.abc import Mapping

    from .megatron_legacy import load_rank_file
    from .torch_io import TorchFileSource

    top = load_rank_file(path)          # weights only; Namespace and Megatron enums in args allowed
    if isinstance(top, Mapping) and "model_chunk0" in top:
        from .megatron_wgrads import MegatronCaptureSource
        return MegatronCaptureSource(path)
    if isinstance(top, Mapping) and "args" in top and ("model" in top or "model0" in top):
        from .megatron_legacy import MegatronLegacySource
        return MegatronLegacySource(path)
    for key in ("model", "state_dict"):
        if isinstance(top, Mapping) and isinstance(top.get(key), Mapping):
            return TorchFileSource(path, key_path=key, safe_globals=[argparse.Namespace])
    return TorchFileSource(path, safe_globals=[argparse.Namespace])


def _open_folder(path: Path, config: Path | str | None = None) -> TensorSource:
    from .megatron_files import TRACKER_FILE
    from .folder_kinds import is_megatron_capture, is_step_store_folder, is_torch_dist

    if is_step_store_folder(path):
        from .step_store import open_step_store
        return open_step_store(path)
    if is_megatron_capture(path):
        from .megatron_wgrads import MegatronCaptureSource
        return MegatronCaptureSource(path, config=config)
    if is_torch_dist(path):
        from .torch_dist import TorchDistSource
        return TorchDistSource(path)
    if os.path.lexists(path / TRACKER_FILE) or any(child.name.startswith("mp_rank_") for child in path.iterdir()):
        from .megatron_legacy import MegatronLegacySource
        return MegatronLegacySource(path)
    if _present(path, "model.safetensors.index.json", "model.safetensors") or any(path.glob("*.safetensors")):
        from .safetensors_io import SafetensorsSource
        return SafetensorsSource(path)
    if _present(path, "pytorch_model.bin.index.json", "pytorch_model.bin"):
        from .torch_io import TorchFileSource
        return TorchFileSource(path)
    checkpoints = sorted(path.glob("*.ckpt"))
    if len(checkpoints) == 1:
        from .mindspore_ckpt_read import MindSporeCkptSource
        return MindSporeCkptSource(checkpoints[0])
    problem = f"{len(checkpoints)} .ckpt files: ambiguous" if checkpoints else "no checkpoint found in this folder"
    raise InputError(str(path), problem, f"pass the file itself; looked for {_LOOKED_FOR}")


def _present(folder: Path, *names: str) -> bool:
    """Any of ``names`` in ``folder``, even a FIFO or a broken link (its reader then says what is wrong)."""
    return any(os.path.lexists(folder / name) for name in names)


def sink_format(path: Path, fmt: str | None) -> str:
    """``fmt`` if given, else from the path: ``.ckpt``, ``.safetensors``, otherwise a folder."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError(str(path), f"unknown output format {fmt!r}", f"use one of {', '.join(FORMATS)}")
        return fmt
    if path.suffix == ".ckpt":
        return "ckpt"
    if path.suffix == ".safetensors":
        return "safetensors"
    if path.is_file() or path.suffix:
        raise InputError(str(path), f"cannot tell the output format from {path.suffix!r}",
                         "name it .ckpt or .safetensors, or pass a folder for sharded safetensors")
    return "safetensors-dir"


def open_sink(path: Path | str, metas: list[TensorMeta], fmt: str | None = None, shard_bytes: int | None = None,
              metadata: dict | None = None, aligned_to: dict[str, int] | None = None) -> TensorSink:
    """The streaming writer for ``path``; tensors must then arrive in ``metas`` order.
    ``aligned_to``: source offsets of tensors that will arrive as byte ranges (the writers pad for them and
    reserve the file's blocks when they are large)."""
    path = Path(path)
    chosen = sink_format(path, fmt)
    if chosen == "ckpt":
        from .mindspore_ckpt import MindSporeCkptWriter
        return MindSporeCkptWriter(path, metas, copied=aligned_to or ())
    from .safetensors_write import SafetensorsSink
    metadata = {"format": "pt"} if metadata is None else metadata      # what transformers expects; MindSpore ignores
    if chosen == "safetensors":
        return SafetensorsSink(path, metas, metadata=metadata, aligned_to=aligned_to)
    return SafetensorsSink(path, metas, shard_bytes=shard_bytes or DEFAULT_SHARD_BYTES, metadata=metadata,
                           aligned_to=aligned_to)
