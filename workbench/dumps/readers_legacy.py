"""PyTorch legacy ptdbg_ascend ``api_stack_dump.pkl`` (TEXT: one JSON list a line) and its ``.npy`` folder.

Tensor lines ``[name, step, md5_list, dtype, shape, [max, min, mean(, norm)]]`` with names
``Functional_linear_0_forward_input.0``; stack lines ``[name_stack_info, [[path, line, func, code], ...]]``
(writer: ptdbg_ascend dump.py::append_pkl_data / dump_stack_info; grammar in datasets/dump_formats.yaml).
The file is never unpickled: each line is parsed as JSON with bounded nesting.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError, location
from ..input_files import parse_json, read_text
from .formats import DumpFormats, load_dump_formats
from .rows import finish, number, shape_fields, shape_of
from .tensor_stats import npy_stats

_RANK = re.compile(r"^rank_?(\d+)$")
FIX = "fix or regenerate the api_stack_dump.pkl"


def read_legacy_pkl(path: Path, side: str = "A", fmt: DumpFormats | None = None):
    """An ``api_stack_dump.pkl`` → the table (lines in file order = execution order)."""
    fmt = fmt or load_dump_formats()
    path = Path(path)
    rank = _rank(path.parent)
    rows, stacks = [], set()
    text = read_text(path, what="api_stack_dump.pkl")
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = parse_json(line, location(path, line_number), max_depth=8, what="JSON line")
        where = location(path, line_number)
        if not isinstance(item, list) or not item or not isinstance(item[0], str):
            raise InputError(where, f"is {type(item).__name__}, expected a JSON list starting with a name", FIX)
        if item[0].endswith(fmt.legacy["stack_suffix"]):
            _check_stack(item, where)
            stacks.add(item[0][: -len(fmt.legacy["stack_suffix"])])
            continue
        rows.append(_tensor_row(item, where, rank, path, line_number, fmt))
    for row in rows:
        call = row.pop("_call")
        row["stack_id"] = call if call in stacks else ""
    return finish(rows, side, fmt)


def _rank(folder: Path) -> int:
    found = _RANK.match(folder.name)
    return int(found.group(1)) if found else 0


def _check_stack(item: list, where: str) -> None:
    if len(item) != 2 or not isinstance(item[1], list):
        raise InputError(where, "stack line must be [name, [[path, line, func, code], ...]]", FIX)


def parse_name(name: str, where: str, fmt: DumpFormats) -> dict:
    """``Functional_linear_0_forward_input.0`` → op, pass, io, slot and the call's name."""
    found = fmt.legacy["tensor_pattern"].match(name)
    if not found:
        raise InputError(where, f"name {name[:80]!r} does not follow {{Api}}_{{api}}_{{n}}_{{forward|backward}}_"
                         "{input.N|output[.N]}", FIX)
    slot = found.group("slot") or "0"
    return {"op": found.group("api"), "pass": found.group("pass"), "io": found.group("io"),
            "slot": int(slot) if slot.isdigit() else 0,
            "_call": f"{found.group('kind')}_{found.group('api')}_{found.group('index')}_{found.group('pass')}"}


def _tensor_row(item: list, where: str, rank: int, path: Path, line: int, fmt: DumpFormats) -> dict:
    if len(item) != fmt.legacy["line_items"]:
        raise InputError(where, f"{len(item)} items, expected {fmt.legacy['line_items']} "
                         "[name, step, md5_list, dtype, shape, summary]", FIX)
    name, step, md5s, dtype, shape, summary = item
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise InputError(location(path, line, "step"), f"step is {step!r}, expected a non-negative integer", FIX)
    if not isinstance(md5s, list) or not isinstance(dtype, str):
        raise InputError(where, "md5_list must be a list and dtype a string", FIX)
    if not isinstance(summary, list) or len(summary) not in fmt.legacy["summary_lengths"]:
        lengths = " or ".join(map(str, fmt.legacy["summary_lengths"]))
        raise InputError(location(path, line, "summary"), f"summary is {str(summary)[:40]}, expected a list of "
                         f"{lengths} numbers [max, min, mean(, norm)]", FIX)
    stats = [number(value, location(path, line, "summary"), "summary") for value in summary]
    row = {"rank": rank, "step": step, "name": name, **parse_name(name, where, fmt), "dtype": fmt.dtype(dtype),
           **shape_fields(shape_of(shape, location(path, line, "shape"))), "max": stats[0], "min": stats[1],
           "mean": stats[2], "md5": str(md5s[0]) if md5s else "", "source": where}
    if len(stats) > 3:
        row["l2norm"] = stats[3]
    return row


def read_legacy_npy_folder(folder: Path, side: str = "A", fmt: DumpFormats | None = None):
    """A legacy tensor folder (``{name}.npy``, names as in the pkl) → the table, statistics computed here.

    Order: the pkl beside the folder when there is one (its line order), else the files' write times.
    """
    fmt = fmt or load_dump_formats()
    folder = Path(folder)
    files = [p for p in folder.iterdir() if p.suffix == ".npy"]
    if not files:
        raise InputError(str(folder), "holds no .npy tensor file", "pass the legacy dump's tensor folder")
    files.sort(key=lambda p: (p.stat().st_mtime_ns, p.name))
    rank = _rank(folder.parent) if not _RANK.match(folder.name) else _rank(folder)
    rows = []
    for path in files:
        name = path.name[: -len(".npy")]
        info = parse_name(name, str(path), fmt)
        info.pop("_call")
        rows.append({"rank": rank, "step": 0, "name": name, **info, "dtype": "", **npy_stats(path),
                     "source": str(path)})
        rows[-1]["dtype"] = _npy_dtype(path, fmt)
    return finish(rows, side, fmt)


def _npy_dtype(path: Path, fmt: DumpFormats) -> str:
    from ..replay.npy_files import npy_header

    return fmt.dtype(str(npy_header(path)[1]))
