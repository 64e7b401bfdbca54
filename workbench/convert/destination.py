"""Where a conversion writes, as users name it.

``--to hf`` always writes a Hugging Face model folder (``config.json`` + ``model.safetensors`` or
shards + index), whatever dots the name holds (``Qwen2.5-7B-hf/``, ``llama.hf``). Other formats:
a name ending ``.ckpt`` is a MindSpore checkpoint, ``.safetensors`` one safetensors file; a name
ending in a checkpoint suffix the workbench does not write (``.bin``, ``.pt``, ...) is refused;
anything else is a folder. An existing empty folder is used; an existing non-empty one, or an
existing file, needs ``--force`` and is replaced only once the new output is complete.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError

FILE_KINDS = {".ckpt": "ckpt", ".safetensors": "safetensors"}
NOT_WRITTEN = (".bin", ".pt", ".pth", ".json", ".npz", ".npy", ".gguf", ".h5", ".msgpack", ".onnx", ".tar", ".zip")
HF_FOLDER, FOLDER = "hf-folder", "folder"


def destination_kind(path: Path | str, to: str) -> str:
    """``hf-folder``, ``folder``, ``ckpt`` or ``safetensors`` for ``path`` and the target format."""
    path = Path(path)
    suffix = path.suffix.lower()
    if to == "hf":
        if suffix in FILE_KINDS or suffix in NOT_WRITTEN:
            raise InputError(str(path), f"--to hf writes a Hugging Face model folder, not a {suffix} file",
                             f"name a folder, e.g. {path.with_suffix('')}-hf/")
        return HF_FOLDER
    if suffix in FILE_KINDS and not path.is_dir():
        return FILE_KINDS[suffix]
    if suffix in NOT_WRITTEN:
        raise InputError(str(path), f"cannot write {suffix} checkpoints", "name the output .ckpt (MindSpore) or "
                         ".safetensors, or give a folder (safetensors shards + index)")
    return FOLDER


def check_destination(path: Path | str, to: str, force: bool) -> Path:
    """Fail before any work: unknown kind, a missing parent, or something in the way without --force."""
    path = Path(path)
    kind = destination_kind(path, to)
    if not path.parent.is_dir():
        raise InputError(str(path), f"folder {path.parent} does not exist", "create it first")
    if kind in (HF_FOLDER, FOLDER) and path.exists() and not path.is_dir():
        if not force:
            raise InputError(str(path), "exists and is a file; the output is a folder",
                             "choose another path, or pass --force to replace the file")
    elif path.is_dir() and kind not in (HF_FOLDER, FOLDER):
        raise InputError(str(path), f"is a folder; a {kind} output is one file", "choose a file path")
    elif path.exists() and not force and not (path.is_dir() and not any(path.iterdir())):
        raise InputError(str(path), "output already exists", "pass --force to replace it, or choose another path")
    return path


def open_destination(path: Path | str, plan, to: str, hf_config: dict | None = None,
                     aligned_to: dict[str, int] | None = None):
    """The streaming writer for ``path``: a folder writer (with ``config.json`` for hf) or one file.
    What is in the way is replaced once the output is complete: call :func:`check_destination` first.
    ``aligned_to``: source offsets of the tensors that arrive as byte ranges (see ``open_sink``)."""
    from ..tensors.open import open_sink
    from .hf_folder import FolderSink

    path = Path(path)
    kind = destination_kind(path, to)
    if kind in (HF_FOLDER, FOLDER):
        return FolderSink(path, plan.targets, config=hf_config if kind == HF_FOLDER else None, replace=True,
                          aligned_to=aligned_to)
    return open_sink(path, plan.targets, fmt=kind, aligned_to=aligned_to)
