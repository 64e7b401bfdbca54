"""What kind of checkpoint folder a path is, told from its file names alone.

:func:`workbench.tensors.open.open_source` asks these before it picks a reader. They live apart
from the readers, whose modules import pickle, zipfile and the torch helpers: a safetensors or
``.ckpt`` conversion never needs those, and importing them was a twentieth of its start-up.
"""
from __future__ import annotations

import re
from pathlib import Path

from .megatron_files import read_tracker

METADATA_FILE = ".metadata"                  # torch_dist: pickled torch.distributed.checkpoint Metadata
LABELS = {"wgrads": "main_grad before optimizer.step()", "params": "param.data after optimizer.step()"}
REFUSED_LABELS = {"dgrads": "activation gradients keyed by module, not per-parameter tensors"}
ITERATION = re.compile(r"^iter_(\d{7,})$")
RANK_FILE = re.compile(r"^mp_rank_(\d{2})(?:_(\d{3}))?(?:_(\d{3}))?\.pth$")


def rank_files(folder: Path) -> list[tuple[Path, tuple]]:
    """The ``mp_rank_*.pth`` files of a capture iteration with their rank digits, in name order."""
    found = []
    for child in sorted(folder.iterdir()):
        match = RANK_FILE.match(child.name)
        if match:
            found.append((child, tuple(int(g) for g in match.groups() if g is not None)))
    return found


def iterations(root: Path) -> list[tuple[int, Path]]:
    """The ``iter_*`` folders of a capture root that hold rank files, oldest first."""
    found = []
    for child in root.iterdir():
        match = ITERATION.match(child.name)
        if match and child.is_dir() and rank_files(child):
            found.append((int(match.group(1)), child))
    return sorted(found)


def is_megatron_capture(path: Path) -> bool:
    """An ``iter_*`` folder of ``mp_rank_*.pth`` files, or a ``wgrads``/``params``/``dgrads`` root of such folders."""
    if not path.is_dir():
        return False
    if ITERATION.match(path.name):
        return bool(rank_files(path))
    return path.name in LABELS.keys() | REFUSED_LABELS.keys() and bool(iterations(path))


def is_torch_dist(path: Path) -> bool:
    """Whether ``path`` holds a torch_dist checkpoint; a damaged tracker file is reported, not hidden."""
    if not path.is_dir():
        return False
    if (path / METADATA_FILE).is_file():
        return True
    tracked = read_tracker(path)
    return tracked is not None and (path / tracked.folder / METADATA_FILE).is_file()


def is_step_store_folder(path: Path) -> bool:
    """A declared kind folder (``grads``, ...) inside a ``step_{N}`` folder (manifest present or not), or one
    of its rank folders."""
    from ..replay.step_kinds import load_step_layout

    layout = load_step_layout()
    if layout.parse_rank(path.name) is not None:             # one rank's shard: step_N/KIND/mp_rank_TT_PPP/
        path = path.resolve().parent
    names = {layout.kind_dir.format(kind=kind) for kind in layout.kinds}
    return path.name in names and layout.parse_step(path.resolve().parent.name) is not None
