"""``open_dump(path, side=...)``: any per-operator dump → the one table, the reader chosen from the layout.

    table = open_dump("msprobe_out/", side="torch")                 # step*/rank*|proc*/dump.json
    table = open_dump("ms_dump/", side="mindspore")                 # rank_*/{net}/{graph}/{iter}/statistic.csv | *.npy
    table = open_dump("rank0/api_stack_dump.pkl", side="legacy")    # ptdbg_ascend text pkl (or its .npy folder)
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError
from ..input_files import input_stat
from .formats import DumpFormats, load_dump_formats
from .readers_legacy import read_legacy_npy_folder, read_legacy_pkl
from .readers_mindspore import (
    iteration_folders,
    read_execution_order,
    read_statistic_csv,
    read_statistic_tree,
    read_tensor_folder,
    read_tensor_tree,
)
from .readers_msprobe import read_msprobe
from .rows import finish, subfolders

LOOKED_FOR = ("an msprobe dump.json (step*/rank*|proc*/), a MindSpore Dump tree (rank_*/{net}/{graph}/{iteration}/ "
              "with statistic.csv or .npy files), a MindSpore statistic.csv, an api_stack_dump.pkl, or a folder of "
              "legacy ptdbg .npy tensors")
_RANK = re.compile(r"^rank_(\d+)$")


def open_dump(path: Path | str, side: str = "A", fmt: DumpFormats | None = None):
    """The dump at ``path`` as the table of :mod:`workbench.dumps.schema`; ``side`` labels its rows."""
    fmt = fmt or load_dump_formats()
    path = Path(path)
    if path.is_dir():
        return _open_folder(path, side, fmt)
    input_stat(path)                                      # missing, broken link, loop: one line each
    if path.name == fmt.msprobe["dump_file"]:
        return read_msprobe(path, side, fmt)
    if path.name == fmt.statistic_file or _sniff(path).startswith("Op Type,"):
        return _open_statistic_file(path, side, fmt)
    if path.suffix == ".pkl" or _sniff(path).lstrip().startswith(("[", "#")):
        return read_legacy_pkl(path, side, fmt)
    raise InputError(str(path), f"is not a dump this tool reads; looked for {LOOKED_FOR}",
                     "pass one of those (docs/dumps.md lists the layouts)")


def _sniff(path: Path, size: int = 256) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(size).decode("utf-8", errors="replace")
    except OSError:
        return ""


def is_msprobe_folder(folder: Path, fmt: DumpFormats) -> bool:
    """An msprobe dump root, step folder or rank folder (``dump.json`` here, or step*/rank*/proc* below)."""
    m = fmt.msprobe
    return folder.is_dir() and ((folder / m["dump_file"]).is_file() or any(
        m["step_folder"].match(p.name) or m["rank_folder"].match(p.name) for p in subfolders(folder)))


def _open_folder(folder: Path, side: str, fmt: DumpFormats):
    children = subfolders(folder)
    if is_msprobe_folder(folder, fmt):
        return read_msprobe(folder, side, fmt)
    if _RANK.match(folder.name) or any(_RANK.match(p.name) for p in children):
        units = iteration_folders(folder, fmt)
        if units and (units[0][1] / fmt.statistic_file).is_file():
            return read_statistic_tree(folder, side, fmt)
        return read_tensor_tree(folder, side, fmt)
    files = [p for p in folder.iterdir() if p.is_file()]
    if (folder / fmt.statistic_file).is_file():
        return _open_statistic_file(folder / fmt.statistic_file, side, fmt)
    pkls = sorted(p for p in files if p.suffix == ".pkl")
    if len(pkls) == 1:
        return read_legacy_pkl(pkls[0], side, fmt)
    npys = [p for p in files if p.suffix == ".npy"]
    if npys and all(fmt.tensor_file.match(p.name) for p in npys):
        return finish(read_tensor_folder(folder, fmt=fmt, order=_order_near(folder, fmt)), side, fmt)
    if npys and fmt.legacy["tensor_pattern"].match(npys[0].stem):
        return read_legacy_npy_folder(folder, side, fmt)
    found = f"{len(pkls)} .pkl files" if len(pkls) > 1 else "no file of those layouts"
    raise InputError(str(folder), f"holds {found}; looked for {LOOKED_FOR}", "pass one dump (docs/dumps.md)")


def _open_statistic_file(path: Path, side: str, fmt: DumpFormats):
    """One statistic.csv: rank and iteration from its folders when they follow the tree, order from beside it."""
    iteration = path.parent
    rank_folder = next((p for p in path.parents if _RANK.match(p.name)), None)
    rank = int(_RANK.match(rank_folder.name).group(1)) if rank_folder else 0
    step = int(iteration.name) if iteration.name.isdigit() else 0
    rows = read_statistic_csv(path, rank=rank, step=step, order=_order_near(path.parent, fmt), fmt=fmt)
    return finish(rows, side, fmt)


def _order_near(folder: Path, fmt: DumpFormats) -> dict:
    """The execution order of a lone iteration folder: ``rank_*/execution_order/..._graph_{graph}.csv``."""
    graph = folder.parent.name
    for parent in folder.parents:
        candidate = parent / fmt.order_folder
        if candidate.is_dir():
            for path in sorted(candidate.iterdir()):
                found = fmt.order_file.match(path.name)
                if found and (found.group("graph") == graph or not graph.isdigit()):
                    return read_execution_order(path, fmt)
            return {}
    return {}
