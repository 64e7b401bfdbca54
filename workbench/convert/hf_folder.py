"""The one folder writer: a Hugging Face model folder that ``AutoModelForCausalLM.from_pretrained`` loads.

Layout (transformers ``save_pretrained``)::

    out/config.json                          (hf only) model_type, architectures, sizes, tie_word_embeddings
    out/model.safetensors                    when every tensor fits one shard (default 5 GB), else
    out/model-0000K-of-0000N.safetensors     + model.safetensors.index.json

Everything is written into a hidden staging folder beside ``out`` and renamed into place when
complete, so a failure leaves nothing that looks like a model; an existing ``out`` (``--force``)
is replaced only then. ``workbench convert --to hf`` and the reference models' HF export
(``workbench/reference/hf_io.py``) both write through :class:`FolderSink`.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from ..tensors.base import TensorMeta
from ..fileio import folder_mode
from ..temporaries import forget, new_temporary
from ..tensors.open import DEFAULT_SHARD_BYTES
from ..tensors.safetensors_io import SINGLE_FILE
from ..tensors.safetensors_write import SafetensorsSink

CONFIG_FILE = "config.json"


class FolderSink:
    """Streams ``metas`` (in order) into the folder ``path``; ``config`` becomes ``config.json``."""

    def __init__(self, path: Path | str, metas: list[TensorMeta], *, config: dict | None = None,
                 shard_bytes: int | None = None, metadata: dict | None = None, replace: bool = False,
                 aligned_to: dict[str, int] | None = None):
        self.path = Path(path)
        self.config = config
        if not self.path.parent.is_dir():
            raise InputError(str(self.path), f"folder {self.path.parent} does not exist", "create it first")
        if not replace and self.path.exists() and not (self.path.is_dir() and not any(self.path.iterdir())):
            raise InputError(str(self.path), "already exists and is not an empty folder",
                             "choose another path, or replace it (--force)")
        shard_bytes = shard_bytes or DEFAULT_SHARD_BYTES
        metadata = {"format": "pt"} if metadata is None else metadata    # what transformers expects
        self.staging, _ = new_temporary(self.path, ".part", folder=True)
        try:
            if sum(meta.nbytes for meta in metas) <= shard_bytes:
                self._inner = SafetensorsSink(self.staging / SINGLE_FILE, metas, metadata=metadata,
                                              aligned_to=aligned_to)
            else:
                self._inner = SafetensorsSink(self.staging, metas, shard_bytes=shard_bytes, metadata=metadata,
                                              aligned_to=aligned_to)
        except BaseException:
            _remove(self.staging)
            raise
        self._done = False
        self.files: list[Path] = []

    def write(self, name: str, array: np.ndarray) -> None:
        try:
            self._inner.write(name, array)
        except BaseException:
            self.abort()
            raise

    def finish(self) -> list[Path]:
        try:
            written = self._inner.finish()
            names = [file.name for file in written]
            if self.config is not None:
                text = json.dumps(self.config, indent=2, sort_keys=True) + "\n"
                (self.staging / CONFIG_FILE).write_text(text, encoding="utf-8")
                names.append(CONFIG_FILE)
            os.chmod(self.staging, folder_mode())
            swap_in(self.staging, self.path)
        except BaseException:
            self.abort()
            raise
        self._done = True
        self.files = [self.path / name for name in names]
        return self.files

    def abort(self) -> None:
        if not self._done:
            self._done = True
            self._inner.abort()
            _remove(self.staging)

    def __enter__(self) -> "FolderSink":
        return self

    def __exit__(self, kind, error, trace) -> None:
        if kind is not None:
            self.abort()
        elif not self._done:
            self.finish()


def swap_in(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``; an existing target is moved aside first and removed after."""
    if not target.exists() and not target.is_symlink():
        os.rename(staging, target)
        forget(staging)
        return
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        os.replace(staging, target)                 # rename(2) replaces an empty folder
        forget(staging)
        return
    aside, _ = new_temporary(target, ".old", folder=True)
    old = aside / target.name
    os.rename(target, old)
    try:
        os.rename(staging, target)
        forget(staging)
    except BaseException:
        os.rename(old, target)
        _remove(aside)
        raise
    _remove(aside)


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    forget(folder)


# ----------------------------------------------------------------------------- config.json of a plan

def hf_config_for(plan, arch, *, config: Path | None, source: Path, framework: str | None):
    """``config.json`` for a plan's output (:class:`workbench.spec.hf_config.HfConfigResult`).

    The config given (``--config``), else the one the source carries (an HF folder's config.json,
    a Megatron checkpoint's args); an HF config is the base, a training config fills the spec's block.
    """
    from ..spec.config_params import read_model_config
    from ..spec.hf_config import build_config

    read = read_model_config(config) if config is not None else _carried(source, framework)
    stated = None
    if read is not None and read.canonical is not None:
        stated = {key: value.value for key, value in read.canonical.values.items() if value.known}
    result = build_config(arch.hf_config, plan.target_params, hf_base=read.hf if read is not None else None,
                          stated=stated, dtype=_main_dtype(plan.targets), tied=bool(plan.tied), arch_name=arch.name)
    if result.assumed:
        result.assumed.insert(0, "no config states them" if read is None else f"{read.path} does not state them")
    return result


def _carried(source: Path, framework: str | None):
    from ..spec.config_params import read_model_config

    if framework is None and not (source.is_dir() and (source / CONFIG_FILE).is_file()):
        return None
    if framework not in (None, "megatron"):
        return None
    try:
        return read_model_config(source, "hf" if framework is None else framework)
    except InputError:
        return None


def _main_dtype(metas: list[TensorMeta]) -> str:
    totals: dict[str, int] = {}
    for meta in metas:
        totals[meta.dtype] = totals.get(meta.dtype, 0) + meta.nbytes
    return max(totals, key=totals.get) if totals else "fp32"
