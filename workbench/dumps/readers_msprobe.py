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
from ..input_files import read_json
from .formats import DumpFormats, load_dump_formats
from .rows import check_same_ranks, count, finish, folder_number, number, shape_fields, shape_of, subfolders

FIX = "fix or regenerate the msprobe dump"


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
    rows = []
    for step, rank, folder in msprobe_units(Path(root), fmt):
        rows += read_dump_json(folder / fmt.msprobe["dump_file"], step=step, rank=rank, fmt=fmt)
    return finish(rows, side, fmt)


def read_dump_json(path: Path, *, step: int = 0, rank: int = 0, fmt: DumpFormats | None = None) -> list[dict]:
    """Rows of one dump.json, with stack ids and construct.json parents from its folder."""
    fmt = fmt or load_dump_formats()
    m = fmt.msprobe
    doc = read_json(path, what="msprobe dump.json")
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        found = "no 'data' mapping" if isinstance(doc, dict) else f"a {type(doc).__name__}"
        raise InputError(str(path), f"holds {found}, expected an msprobe dump.json", FIX)
    parents = _construct(path.parent / m["construct_file"])
    stacks = _stacks(path.parent / m["stack_file"])
    rows: list[dict] = []
    for entry, body in doc["data"].items():
        if not isinstance(body, dict):
            raise InputError(f"{path} [{entry}]", f"is {type(body).__name__}, expected a mapping of inputs and outputs",
                             FIX)
        info = _entry_info(entry, parents, fmt)
        base = {"rank": rank, "step": step, "op": info["op"], "module_path": info["module_path"],
                "pass": info["pass"], "stack_id": stacks.get(entry, ""), "source": str(path)}
        if info["grad"]:
            _walk(body, entry, "parameter", 0, base, rows, path, fmt)
            continue
        keys = m["backward_keys"] if info["pass"] == "backward" else m["forward_keys"]
        offset = 0
        for key, io in keys.items():
            if key not in body:
                continue
            label = {"input": "input", "output": "output", "parameter": "parameters"}[io]
            value = body[key]
            _walk(value, f"{entry}.{label}", io, offset if key == "input_kwargs" else 0, base, rows, path, fmt)
            if key == "input_args" and isinstance(value, list):
                offset = len(value)
    return rows


def _entry_info(entry: str, parents: dict, fmt: DumpFormats) -> dict:
    m = fmt.msprobe
    found = m["module_pattern"].match(entry)
    if found:
        grad = found.group("pass") == "parameters_grad"
        return {"op": found.group("cls"), "module_path": _unwrapped(found.group("path"), m), "grad": grad,
                "pass": "backward" if grad else found.group("pass")}
    found = m["api_pattern"].match(entry)
    parent = parents.get(entry)
    owner = m["module_pattern"].match(parent) if isinstance(parent, str) else None
    if found:
        op = found.group("prim") or found.group("api")
        return {"op": op, "module_path": _unwrapped(owner.group("path"), m) if owner else "", "grad": False,
                "pass": found.group("pass")}
    pieces = entry.split(".")
    return {"op": pieces[1] if len(pieces) > 1 else entry, "module_path": _unwrapped(owner.group("path"), m) if owner else "",
            "grad": False, "pass": "backward" if ".backward" in entry else "forward"}


def _unwrapped(path: str, m: dict) -> str:
    """``module.module.decoder.layers.0`` → ``decoder.layers.0`` (training wrappers are not in checkpoint names)."""
    pieces = path.split(".")
    while len(pieces) > 1 and pieces[0] in m["wrappers"]:
        pieces.pop(0)
    return ".".join(pieces)


def _walk(value, name: str, io: str, offset: int, base: dict, rows: list, path: Path, fmt: DumpFormats) -> None:
    """One row per tensor (or number) of an argument structure; ``slot`` is the top-level position + offset."""
    if isinstance(value, list):
        items = [(f"{name}.{index}", item) for index, item in enumerate(value)]
    elif isinstance(value, dict) and "type" not in value:
        items = [(f"{name}.{key}", _single(item) if io == "parameter" else item) for key, item in value.items()]
    else:
        items = [(f"{name}.0" if io != "parameter" else name, value)]
    for index, (label, item) in enumerate(items):
        _nested(item, label, io, offset + index, base, rows, path, fmt)


def _single(value):
    """A parameter's gradient is a one-element list in dump.json; msprobe names it without the index."""
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _nested(value, name: str, io: str, slot: int, base: dict, rows: list, path: Path, fmt: DumpFormats) -> None:
    where = f"{path} [{name}]"
    if isinstance(value, list):
        for index, item in enumerate(value):
            _nested(item, f"{name}.{index}", io, slot, base, rows, path, fmt)
    elif isinstance(value, dict) and "type" not in value:
        for key, item in value.items():
            _nested(item, f"{name}.{key}", io, slot, base, rows, path, fmt)
    elif isinstance(value, dict):
        row = _leaf(value, where, fmt)
        if row is not None:
            rows.append({**base, **row, "name": name, "io": io, "slot": slot})
    elif value is not None:
        raise InputError(where, f"is {type(value).__name__}, expected a tensor record (a mapping with 'type')", FIX)


def _leaf(value: dict, where: str, fmt: DumpFormats) -> dict | None:
    m = fmt.msprobe
    kind = value["type"]
    if not isinstance(kind, str):
        raise InputError(where, f"type is {type(kind).__name__}, expected a string", FIX)
    if kind in m["scalar_types"] and m["scalar_rows"]:
        if not isinstance(value.get("value"), (int, float)):
            return None                                    # None / non-numeric: nothing to compare
        number_ = float(value["value"])
        return {"dtype": m["scalar_types"][kind], "shape": "", "numel": 1, "max": number_, "min": number_,
                "mean": number_, "l2norm": abs(number_)}
    if kind not in m["tensor_types"]:
        return None                                        # dtypes, strings, slices: not data
    dtype = value.get("dtype")
    if not isinstance(dtype, str):
        raise InputError(where, f"dtype is {type(dtype).__name__}, expected a string such as torch.float32", FIX)
    row = {"dtype": fmt.dtype(dtype), **shape_fields(shape_of(value.get("shape"), where))}
    for column, field in m["stats"].items():
        row[column] = number(value.get(field), f"{where} {field}", field)
    row["md5"] = next((str(value[f]) for f in m["md5_fields"] if isinstance(value.get(f), (str, int))), "")
    for column, field in (("nan_count", "nan_count"), ("inf_count", "inf_count")):
        if field in value:
            row[column] = count(value[field], where, field)
    return row


def _construct(path: Path) -> dict:
    """construct.json: row name → the module/cell it ran in (absent file: no parents)."""
    if not path.is_file():
        return {}
    data = read_json(path, what="msprobe construct.json")
    if not isinstance(data, dict):
        raise InputError(str(path), f"is {type(data).__name__}, expected a mapping of names to parents", FIX)
    return data


def _stacks(path: Path) -> dict[str, str]:
    """stack.json: row name → stack id (``{"0": [[names], [lines]]}``; older: ``{name: [lines]}``)."""
    if not path.is_file():
        return {}
    data = read_json(path, what="msprobe stack.json")
    if not isinstance(data, dict):
        raise InputError(str(path), f"is {type(data).__name__}, expected a mapping", FIX)
    found: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], list):
            for name in value[0]:
                if isinstance(name, str):
                    found.setdefault(name, str(key))
        else:
            found.setdefault(str(key), str(key))
    return found
