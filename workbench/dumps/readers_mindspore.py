"""MindSpore Dump: ``statistic.csv`` files and ``.npy`` tensor files, in the graph's execution order.

Layout (O0/O1 and O2): ``rank_{id}/{net_name}/{graph_id}/{iteration}/statistic.csv`` (or one ``.npy``
per op, io and slot), and ``rank_{id}/execution_order/ms_execution_order_graph_{graph_id}.csv`` listing
the graph's full scope names in execution order. Headers, spellings and file grammars come from
``datasets/dump_formats.yaml``.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from ..errors import InputError
from ..input_files import read_text
from .formats import DumpFormats, load_dump_formats
from .rows import check_same_ranks, count, finish, number, shape_fields, shape_of, subfolders, where_line
from .scope import parse_scope
from .tensor_stats import npy_stats

_RANK = re.compile(r"^rank_(?P<rank>\d+)$")
FIX = "fix or regenerate the dump"


def read_statistic_csv(path: Path, *, rank: int = 0, step: int = 0, order: dict[str, tuple[int, str]] | None = None,
                       fmt: DumpFormats | None = None) -> list[dict]:
    """Rows of one ``statistic.csv`` (any statistic_category order, old fixed headers, trailing commas),
    sorted by ``order`` (op name with ``_`` → (position, full scope name)) when given."""
    fmt = fmt or load_dump_formats()
    path = Path(path)
    reader = csv.reader(io.StringIO(read_text(path, what="statistic.csv"), newline=""), strict=True)
    try:
        lines = list(reader)
    except csv.Error as error:                    # a stray quote, an unterminated quoted field
        raise InputError(where_line(path, reader.line_num), f"not CSV ({error})", FIX) from None
    if not lines:
        raise InputError(str(path), "is empty, expected a statistic.csv header", FIX)
    header = _header(lines[0], path, fmt)
    rows = []
    for number_, fields in enumerate(lines[1:], start=2):
        if not fields:
            continue
        if len(fields) == len(header) + 1 and fields[-1] == "":
            fields = fields[:-1]                     # the rows' trailing comma
        if len(fields) != len(header):
            raise InputError(where_line(path, number_), f"{len(fields)} fields, the header has {len(header)}",
                             "the file is truncated or damaged: " + FIX)
        rows.append(_statistic_row(dict(zip(header, fields, strict=True)), path, number_, rank, step, order or {}, fmt))
    return _in_order(rows)


def _header(fields: list[str], path: Path, fmt: DumpFormats) -> list[str]:
    while fields and fields[-1].strip() == "":
        fields = fields[:-1]
    header = [field.strip() for field in fields]
    summed = {name for names in fmt.statistic_sums.values() for name in names}
    for name in header:
        if name not in fmt.statistic_columns and name not in summed and name not in fmt.statistic_ignored:
            raise InputError(where_line(path, 1, name), f"unknown statistic.csv column {name!r}",
                             "declare its meaning in datasets/dump_formats.yaml (mindspore_statistic)")
    present = {fmt.statistic_columns.get(name) for name in header}
    missing = [name for name in fmt.statistic_required if fmt.statistic_columns[name] not in present]
    if missing:
        raise InputError(where_line(path, 1), f"missing column(s) {', '.join(missing)}",
                         "pass a MindSpore Dump statistic.csv with its header line")
    return header


def _statistic_row(fields: dict[str, str], path: Path, line: int, rank: int, step: int,
                   order: dict[str, tuple[int, str]], fmt: DumpFormats) -> dict:
    values = {}
    for header, text in fields.items():
        target = fmt.statistic_columns.get(header)
        if target:
            values[target] = text.strip()
    where = where_line(path, line)
    io_kind = values["io"].lower()
    if io_kind not in ("input", "output"):
        raise InputError(where_line(path, line, "IO"), f"IO is {values['io'][:20]!r}, expected input or output", FIX)
    slot = count(values["slot"], where_line(path, line, "Slot"), "Slot")
    dims = shape_of(values["shape"], where_line(path, line, "Shape"), "Shape")
    op_name = values["op_name"]
    position, full = order.get(op_name, (None, op_name))
    scope = parse_scope(full, fmt)
    row = {"rank": rank, "step": step, "name": f"{op_name}.{io_kind}.{slot}", "op": values["op_type"] or scope.op,
           "module_path": scope.module_path, "pass": "backward" if scope.backward else "forward", "io": io_kind,
           "slot": slot if slot is not None else 0, "dtype": fmt.dtype(values["dtype"]), **shape_fields(dims),
           "md5": values.get("md5", ""), "source": where, "_position": position, "_line": line}
    for column in ("max", "min", "mean", "l2norm"):
        row[column] = number(values.get(column), where_line(path, line, column), column)
    for column in ("nan_count", "numel"):
        if values.get(column, "") != "":
            row[column] = count(values[column], where_line(path, line, column), column)
    for column, headers in fmt.statistic_sums.items():
        parts = [count(fields[h], where_line(path, line, h), h) for h in headers if fields.get(h, "").strip() != ""]
        if parts:
            row[column] = sum(parts)
    return row


def _in_order(rows: list[dict]) -> list[dict]:
    """Sorted by execution order; ops the order does not list keep their file order, after the listed ones."""
    unknown = len(rows) + 1_000_000
    rows.sort(key=lambda r: (r["_position"] if r["_position"] is not None else unknown, r["_line"]))
    for row in rows:
        del row["_position"], row["_line"]
    return rows


def read_execution_order(path: Path, fmt: DumpFormats | None = None) -> dict[str, tuple[int, str]]:
    """``ms_execution_order_graph_N.csv`` → {op name as dumped (``/`` → ``_``): (position, full scope name)}."""
    fmt = fmt or load_dump_formats()
    order: dict[str, tuple[int, str]] = {}
    for line in read_text(path, what="execution order csv").splitlines():
        name = line.strip().strip('"')
        if not name or name == fmt.order_header:
            continue
        order.setdefault(name.replace("/", "_"), (len(order), name))
    return order


def _orders(rank_folder: Path, fmt: DumpFormats) -> dict[str, dict]:
    folder = rank_folder / fmt.order_folder
    if not folder.is_dir():
        return {}
    found = {}
    for path in sorted(folder.iterdir()):
        match = fmt.order_file.match(path.name)
        if match:
            found[match.group("graph")] = read_execution_order(path, fmt)
    return found


def iteration_folders(root: Path, fmt: DumpFormats) -> list[tuple[int, Path, dict]]:
    """(rank, iteration folder, execution order of its graph) of a dump root (or a single rank folder)."""
    ranks = [p for p in subfolders(root) if _RANK.match(p.name)]
    if not ranks and _RANK.match(root.name):
        ranks = [root]
    out, seen = [], {}
    for rank_folder in ranks:
        rank = int(_RANK.match(rank_folder.name).group("rank"))
        orders = _orders(rank_folder, fmt)
        found = 0
        for net in subfolders(rank_folder):
            if net.name in (fmt.order_folder, "graphs"):
                continue
            for graph in (p for p in subfolders(net) if p.name.isdigit()):
                for iteration in (p for p in subfolders(graph) if p.name.isdigit()):
                    out.append((rank, iteration, orders.get(graph.name, {})))
                    seen.setdefault(int(iteration.name), set()).add(rank)
                    found += 1
        if not found:
            raise InputError(str(rank_folder), "holds no {net}/{graph}/{iteration}/ folder of dumped data",
                             "the rank's dump is missing: re-dump it, or pass only the ranks that were dumped")
    check_same_ranks(seen, root, "dump folder")
    return out


def read_statistic_tree(root: Path, side: str = "A", fmt: DumpFormats | None = None):
    """A MindSpore Dump root (``rank_*/{net}/{graph}/{iteration}/statistic.csv``) → the table."""
    fmt = fmt or load_dump_formats()
    rows = []
    for rank, folder, order in iteration_folders(Path(root), fmt):
        path = folder / fmt.statistic_file
        if not path.is_file():
            raise InputError(str(path), "file not found", "the iteration folder holds no statistic.csv: re-dump it")
        rows += read_statistic_csv(path, rank=rank, step=int(folder.name), order=order, fmt=fmt)
    return finish(rows, side, fmt)


def read_tensor_tree(root: Path, side: str = "A", fmt: DumpFormats | None = None):
    """A MindSpore Dump root of ``.npy`` tensor files → the table, statistics computed one file at a time."""
    fmt = fmt or load_dump_formats()
    rows = []
    for rank, folder, order in iteration_folders(Path(root), fmt):
        rows += read_tensor_folder(folder, rank=rank, step=int(folder.name), order=order, fmt=fmt)
    return finish(rows, side, fmt)


def read_tensor_folder(folder: Path, *, rank: int = 0, step: int = 0, order: dict | None = None,
                       fmt: DumpFormats | None = None) -> list[dict]:
    """Rows of one iteration folder of MindSpore ``.npy`` tensor files, in execution order."""
    fmt = fmt or load_dump_formats()
    order = order or {}
    rows = []
    files = sorted(p for p in Path(folder).iterdir() if p.suffix == ".npy")
    if not files:
        raise InputError(str(folder), "holds no .npy tensor file", "the iteration's dump is missing: re-dump it")
    for path in files:
        found = fmt.tensor_file.match(path.name)
        if not found:
            raise InputError(str(path), "name does not follow {op_type}.{op_name}.{task}.{stream}.{timestamp}."
                             "{io}.{slot}.{format}.{dtype}.npy", "remove files that are not part of the dump")
        op_type, op_name = found.group("op_type"), found.group("op_name")
        position, full = order.get(op_name, (None, op_name))
        scope = parse_scope(full, fmt)
        parameter = op_type == "Parameter"
        io_kind = "parameter" if parameter else found.group("io")
        stats = npy_stats(path)
        rows.append({"rank": rank, "step": step, "name": f"{op_name}.{found.group('io')}.{found.group('slot')}",
                     "op": op_type if parameter else (scope.op or op_type),
                     "module_path": "" if parameter else scope.module_path,
                     "pass": "backward" if scope.backward else "forward", "io": io_kind,
                     "slot": int(found.group("slot")), "dtype": fmt.dtype(found.group("dtype")), **stats,
                     "source": str(path), "_position": position,
                     "_line": int(found.groupdict().get("timestamp") or 0)})
    return _in_order(rows)
