"""msprobe ``dump.json`` of PyTorch and of MindSpore (statistics, tensor and md5 tasks; L0, L1, mix).

Layout: ``[step{N}/][rank{R}|proc{pid}/]dump.json`` beside ``stack.json`` and ``construct.json``. Entries
are in execution order; each holds ``input_args``/``input_kwargs``/``output``/``parameters`` (forward)
or ``input``/``output`` (backward) or parameter gradients (``*.parameters_grad.N``). Module paths come
from ``Module.<path>.<Class>.forward.N`` / ``Cell.<path>.<Class>...`` names, and for API rows from
construct.json (the module each API ran in). Field names and grammars: ``datasets/dump_formats.yaml``.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..input_files import JSON_DEPTH_LIMIT, decode_utf8, json_depth, parse_json
from .formats import DumpFormats, load_dump_formats
from .msprobe_ahead import take
from .msprobe_native import native_columns
from ..native import scanned_bytes
from ..gc_pause import gc_paused
from .msprobe_entries import entry_info, entry_infos
from .msprobe_json import DATA_FOUND, Irregular, data_entries
from .msprobe_side import Beside
from .msprobe_sink import FIX, IO_LABELS, Sink
from ..libc import release_free_memory
from .rows import (
    check_same_ranks,
    concat_columns,
    folder_number,
    subfolders,
    table_from_columns,
)


def msprobe_units(root: Path, fmt: DumpFormats) -> list[tuple[int, int, Path]]:
    """(step, rank, folder holding dump.json) of a dump root, a step folder, a rank folder or a dump.json."""
    m = fmt.msprobe
    root = Path(root)
    if root.is_file():
        root = root.parent
    if (root / m["dump_file"]).is_file():
        step = folder_number(root.parent, m["step_folder"], "step") or 0
        return [(step, _rank_of(root, [root], fmt), root)]
    steps = [p for p in subfolders(root) if m["step_folder"].match(p.name)]
    pairs = [(folder_number(p, m["step_folder"], "step"), p) for p in steps] or [(0, root)]
    units, seen = [], {}
    for step, folder in pairs:
        ranks = [p for p in subfolders(folder) if m["rank_folder"].match(p.name)]
        if not ranks:
            raise InputError(str(folder), f"holds no rank*/proc* folder with a {m['dump_file']}",
                             "pass an msprobe dump root, a step*/ folder or a rank folder")
        for folder_ in ranks:
            if not (folder_ / m["dump_file"]).is_file():
                raise InputError(str(folder_ / m["dump_file"]), "file not found",
                                 "the rank's dump is missing or was cut short: re-dump it")
            rank = _rank_of(folder_, ranks, fmt)
            units.append((step, rank, folder_))
            seen.setdefault(step, set()).add(rank)
    check_same_ranks(seen, root, m["dump_file"])
    return units


def _rank_of(folder: Path, siblings: list[Path], fmt: DumpFormats) -> int:
    """rank{R}: R; proc{pid} (no process group): position among the step's proc folders."""
    if fmt.msprobe["pid_folder"].match(folder.name):
        procs = [p for p in siblings if fmt.msprobe["pid_folder"].match(p.name)]
        return procs.index(folder) if folder in procs else 0
    return folder_number(folder, fmt.msprobe["rank_folder"], "rank") or 0


def read_msprobe(root: Path, side: str = "A", fmt: DumpFormats | None = None):
    """An msprobe dump (root, step, rank folder or dump.json) → the table."""
    fmt = fmt or load_dump_formats()
    parts = [read_dump_json(folder / fmt.msprobe["dump_file"], step=step, rank=rank, fmt=fmt)
             for step, rank, folder in msprobe_units(Path(root), fmt)]
    table = table_from_columns(concat_columns(parts), side, fmt)
    del parts
    release_free_memory()
    return table


def read_dump_json(path: Path, *, step: int = 0, rank: int = 0, fmt: DumpFormats | None = None) -> dict:
    """Columns of one dump.json (see :func:`.rows.table_from_columns`), with stack ids and construct.json
    parents from its folder. Entries are decoded one at a time (:mod:`.msprobe_json`); anything irregular is
    decoded whole, so results and errors are those of ``json.loads``."""
    with gc_paused():
        return _read_dump_json(Path(path), step, rank, fmt or load_dump_formats())


def _read_dump_json(path: Path, step: int, rank: int, fmt: DumpFormats) -> dict:
    what = "msprobe dump.json"
    pending, beside = take(path, fmt) or (None, Beside(path.parent, fmt, entry_infos))   # or started ahead
    raw = pending.raw if pending is not None else scanned_bytes("dumpscan", path, what)
    found = native_columns(raw, str(path), step, rank, fmt, beside, pending)
    if found is not None:
        return found
    raw = bytes(raw)                                           # the Python reader and json take bytes
    if json_depth(raw) > JSON_DEPTH_LIMIT:
        parse_json(raw, str(path), what=what)                  # the shared nesting error
    text = decode_utf8(raw, str(path))
    del raw
    try:
        return _read_entries(data_entries(text), path, step, rank, fmt, beside)
    except (Irregular, InputError):
        pass                        # decoded whole: json.loads' own error, or the error of the entry it keeps
    doc = parse_json(text, str(path), what=what)
    del text
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        found = "no 'data' mapping" if isinstance(doc, dict) else f"a {type(doc).__name__}"
        raise InputError(str(path), f"holds {found}, expected an msprobe dump.json", FIX)
    return _read_entries(iter([DATA_FOUND, *doc["data"].items()]), path, step, rank, fmt, beside)


def _read_entries(entries, path: Path, step: int, rank: int, fmt: DumpFormats, beside: Beside) -> dict:
    m = fmt.msprobe
    if next(entries) is not DATA_FOUND:                       # pragma: no cover - data_entries yields it first
        raise Irregular
    parents = beside.parents()
    stacks = beside.stacks()
    sink = Sink(str(path), fmt)
    infos: dict = {}
    for entry, body in entries:
        if not isinstance(body, dict):
            raise InputError(f"{path} [{entry}]", f"is {type(body).__name__}, expected a mapping of inputs and outputs",
                             FIX)
        op, module_path, pass_, grad = entry_info(entry, parents, fmt, infos)
        sink.start_entry(op, module_path, pass_, stacks.get(entry, ""))
        if grad:
            _walk(body, entry, "parameter", 0, sink)
            continue
        keys = m["backward_keys"] if pass_ == "backward" else m["forward_keys"]
        offset = 0
        for key, io in keys.items():
            if key not in body:
                continue
            label = IO_LABELS[io]
            value = body[key]
            _walk(value, f"{entry}.{label}", io, offset if key == "input_kwargs" else 0, sink)
            if key == "input_args" and isinstance(value, list):
                offset = len(value)
    return sink.columns(step=step, rank=rank)


def _walk(value, name: str, io: str, offset: int, sink: Sink) -> None:
    """One row per tensor (or number) of an argument structure; ``slot`` is the top-level position + offset."""
    if isinstance(value, list):
        leaf = sink.leaf
        for index, item in enumerate(value):
            if type(item) is dict and "type" in item:                       # the usual case, one call less
                leaf(item, f"{name}.{index}", io, offset + index)
            else:
                _nested(item, f"{name}.{index}", io, offset + index, sink)
    elif isinstance(value, dict) and "type" not in value:
        for index, (key, item) in enumerate(value.items()):
            _nested(_single(item) if io == "parameter" else item, f"{name}.{key}", io, offset + index, sink)
    else:
        _nested(value, f"{name}.0" if io != "parameter" else name, io, offset, sink)


def _single(value):
    """A parameter's gradient is a one-element list in dump.json; msprobe names it without the index."""
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _nested(value, name: str, io: str, slot: int, sink: Sink) -> None:
    if isinstance(value, dict):
        if "type" in value:
            sink.leaf(value, name, io, slot)
            return
        for key, item in value.items():
            _nested(item, f"{name}.{key}", io, slot, sink)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _nested(item, f"{name}.{index}", io, slot, sink)
    elif value is not None:
        raise InputError(f"{sink.path} [{name}]", f"is {type(value).__name__}, expected a tensor record (a mapping "
                         "with 'type')", FIX)
