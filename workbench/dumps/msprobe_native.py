"""The compiled reader of msprobe ``dump.json`` (``workbench/native/dumpscan.c``): the columns of
:meth:`.msprobe_sink.Sink.columns` from one pass over the bytes, without a Python object per JSON value.

The scanner writes per entry its name and the length of its ``input_args`` list, and per tensor record the
entry, the body member, the position, the ids of its type/dtype/shape/md5 spellings, its counts and its
statistics. Here every distinct spelling is decoded once, and the rows are filtered, ordered (members in the
order of ``forward_keys``/``backward_keys``), named and spread with numpy. Whatever the scanner does not handle
exactly, and what it cannot see (repeated entry or argument names, gradient entries, a record the Python
reader would reject), returns ``None``: the caller then runs the pure-Python reader, which gives the result
or the one-line error, so both paths agree (``tests/test_dump_native.py``).
"""
from __future__ import annotations

import json
import math

from ..errors import InputError
from .api_stems import stem_codes
from .formats import DumpFormats
from .msprobe_scan import (DTYPE, ENTRY, FIXED_COLUMNS, INDEX, INF, INNER, KEY, NAN, NULL, SHAPE, SUB_LEN, SUB_OFF,
                           TYPE, Layout, PendingScan, scan_plan)
from .msprobe_sink import IO_LABELS
from .msprobe_arrays import by_id, counts, distinct, integers, spread_codes
from .msprobe_join import number
from .msprobe_lines import as_list, packed, packed_lines, row_names
from .rows import repeated, shape_fields, shape_of




def is_utf8(raw) -> bool:
    """Whether ``raw`` (bytes or a map) is ASCII or UTF-8: what the compiled scans take (the rest goes to the
    Python readers, which name the first bad byte)."""
    if raw.isascii() if isinstance(raw, bytes) else _ascii_map(raw):
        return True
    try:
        str(raw, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _ascii_map(raw) -> bool:
    """Whether a map's bytes are all below 0x80: eight at a time OR-ed (the main thread read 67 MB a side for
    their maximum byte, ~2x the time)."""
    import numpy as np

    words = len(raw) // 8
    high = int(np.bitwise_or.reduce(np.frombuffer(raw, np.uint64, words))) if words else 0
    tail = np.frombuffer(raw, np.uint8, len(raw) - 8 * words, 8 * words)
    return high & 0x8080808080808080 == 0 and int(tail.max(initial=0)) < 0x80


def native_columns(raw: bytes, path: str, step: int, rank: int, fmt: DumpFormats, beside,
                   pending: PendingScan | None = None) -> dict | None:
    """The columns of one dump.json (as the Python reader gives them), or ``None`` when the Python reader must
    decide. ``beside``: the reader's side files (:class:`.msprobe_side.Beside`): ``load()`` runs while the
    scan does, ``infos(names)`` gives ops, module paths, passes and whether any entry is a gradient,
    ``stacks()`` stack.json's name → stack id. ``pending``: the scan of ``raw``, started earlier
    (:mod:`.msprobe_ahead`)."""
    plan = scan_plan(fmt)
    if plan is None:
        return None
    layout = plan[1]
    found = (pending or PendingScan(raw, plan)).result(beside.load)
    if found is None:
        return None
    if not is_utf8(raw):
        return None                                       # the Python reader names the byte
    try:
        return _columns(raw, found, layout, path, step, rank, fmt, beside)
    except (InputError, ValueError, KeyError):
        return None                                       # the Python reader gives the exact message


def _columns(raw: bytes, found, layout: Layout, path: str, step: int, rank: int, fmt: DumpFormats,
             beside) -> dict | None:
    import numpy as np

    m = fmt.msprobe
    entries, rows, stats, dist = found
    spell = texts(raw, dist)
    names, text, spans_ = _entry_names(raw, entries)
    if names is None:
        return None                                       # json.loads keeps the last of a repeated name
    ops, modules, passes, grad = beside.infos(names, stem_codes(text, spans_), text, spans_)
    if grad:
        return None                                       # parameter gradients: the Python reader's walk
    named = rows[:, SUB_LEN] >= 0
    if named.any():
        subs = [(e, k, _text(raw, o, n)) for e, k, o, n in rows[named][:, [ENTRY, KEY, SUB_OFF, SUB_LEN]].tolist()]
        if len(set(subs)) != len(subs):
            return None                                   # a repeated argument name
    backward = np.asarray(passes, dtype=object) == "backward" if len(passes) else np.zeros(0, bool)
    tensor = np.fromiter((s in m["tensor_types"] for s in spell), bool, len(spell))
    order = {p: np.array([list(m[f"{p}_keys"]).index(k) if k in m[f"{p}_keys"] else -1 for k in layout.keys]
                         + [-1], np.int64) for p in ("forward", "backward")}
    entry_of, key = rows[:, ENTRY], rows[:, KEY]
    rank_of_key = np.where(backward[entry_of], order["backward"][key], order["forward"][key])
    keep = (rows[:, NULL] == 0) & (rank_of_key >= 0)
    keep &= np.append(tensor, False)[rows[:, TYPE]]            # type -1: a null member
    rows, stats = _ordered(rows, stats, entry_of, rank_of_key, keep)
    if (rows[:, DTYPE] < 0).any():
        return None                                       # a tensor without a dtype: the reader's error
    size = len(rows)
    entry = rows[:, ENTRY].copy()                         # contiguous: it indexes seven arrays below
    member = backward[entry] * len(layout.keys) + rows[:, KEY]   # (pass, member key) numbered per row
    out: dict = {"name": _names(raw, rows, (names, text, spans_), (backward, entry, member), layout, m)}
    out["io"], out["slot"] = _io_slots(rows, entries, (entry, member), layout, m)
    out["dtype"] = by_id(rows[:, DTYPE], lambda i: fmt.dtype(spell[i]))
    shape_ids = distinct(rows[:, SHAPE])                  # once for the three uses below
    shapes = {i: _shape(spell[i], path) if i >= 0 else ("", None) for i in shape_ids[0].tolist()}
    out["shape"] = by_id(rows[:, SHAPE], lambda i: shapes[i][0], shape_ids)
    out["numel"] = integers(rows[:, SHAPE], lambda i: shapes[i][1], shape_ids)
    out["nan_count"], out["inf_count"] = counts(rows[:, NAN]), counts(rows[:, INF])
    out["md5"] = _md5(rows, spell, layout)
    for column in layout.stat_columns:
        index = layout.stat_index[column]
        out[column] = stats[:, index].copy() if index is not None else np.full(size, math.nan)
    per_entry = {"op": ops, "module_path": modules, "pass": passes}
    per_entry["stack_id"] = beside.stack_ids(names, text, spans_)
    for column, values in per_entry.items():
        if not size:
            out[column] = np.empty(0, dtype=object)
        else:            # module paths numbered once per entry for the table's layers, not hashed per row
            out[column] = spread_codes(values, entry) if column == "module_path" else \
                np.asarray(values, dtype=object)[entry]
    out["rank"] = np.full(size, rank, dtype=np.int64)
    out["step"] = np.full(size, step, dtype=np.int64)
    out["source"] = repeated(path, size)
    return out


def _entry_names(raw: bytes, entries) -> tuple:
    """(names, text, spans): the entry names (:class:`.msprobe_lines.Packed`: strs made of only those read), the
    buffer of them packed and their spans there (the compiled passes read them there rather than at their places
    in dump.json); names None where one is repeated (``json.loads`` keeps the last: the Python reader decides)."""
    names = packed_lines(raw, entries)
    if names is None:
        names = texts(raw, entries[:, :2])
        found = (names, *packed(names, entries[:, 1]))
    else:
        found = (names, names.text, names.rows)
    distinct = number(found[1], found[2])                 # the names' bytes hashed, not a set of every str
    count = len(set(as_list(names))) if distinct is None else len(distinct[1])
    return found if count == len(names) else (None, *found[1:])


def _ordered(rows, stats, entry_of, rank_of_key, keep):
    """The kept rows by entry, then member rank, then scan order: as the scan wrote them where that is already
    so (the usual dump's members come in the YAML's order), with no sort and no copy of the rows when all are
    kept; else sorted."""
    import numpy as np

    if len(rows) > 1:
        order = entry_of * (int(rank_of_key.max()) + 2) + rank_of_key      # entry, then rank (-1 included)
        if (order[1:] >= order[:-1]).all():
            return (rows, stats) if keep.all() else (rows[keep], stats[keep])
    picked = np.lexsort((np.arange(len(rows)), rank_of_key, entry_of))
    picked = picked[keep[picked]]
    return rows[picked], stats[picked]


def _text(raw: bytes, offset: int, length: int) -> str:
    return raw[offset:offset + length].decode("utf-8")


def texts(raw: bytes, spans, text: str | None = None) -> list[str]:
    """The strings at (offset, length) rows (the bytes were checked to be UTF-8 before); ``text``: the bytes
    decoded, when they are ASCII (then its offsets are theirs), sliced without a bytes object per string."""
    starts, ends = spans[:, 0].tolist(), (spans[:, 0] + spans[:, 1]).tolist()
    if text is not None:
        return [text[a:b] for a, b in zip(starts, ends, strict=True)]
    return [raw[a:b].decode("utf-8") for a, b in zip(starts, ends, strict=True)]


def _names(raw: bytes, rows, named: tuple, placed: tuple, layout: Layout, m: dict) -> list[str]:
    """``{entry}.{label}.{position}`` (``.{position}.{inner position}`` in a nested list), or
    ``.{argument name}`` for a mapping's member. ``named``: the entry names, and the buffer of them packed and
    their spans there (:func:`.msprobe_lines.packed`: read there, not at their places in ``raw``, a row's entry
    name is not a cache miss each; ``raw`` holds the argument names). ``placed``: which entries are backward, and
    each row's entry and (pass, member key) number (:func:`_io_slots`)."""
    import numpy as np

    names, text, spans_ = named
    labels = {p: [IO_LABELS[m[f"{p}_keys"][k]] if k in m[f"{p}_keys"] else "" for k in layout.keys]
              for p in ("forward", "backward")}
    index = rows[:, INDEX]
    if len(rows) and (rows[:, SUB_LEN] < 0).all() and (rows[:, INNER] < 0).all() and index.min() >= 0:
        middles = [f".{label}." for p in ("forward", "backward") for label in labels[p]]
        tails = [str(i) for i in range(int(index.max()) + 1)]
        _, entry, middle = placed              # every row a plain position: its three pieces joined, per row
        found = row_names(text, spans_, entry, middles, middle, tails, index)
        if found is not None:
            return found
        return np.asarray(as_list(names), dtype=object)[entry] + np.array(middles, dtype=object)[middle] \
            + np.array(tails, dtype=object)[index]
    out, names, backward = [], as_list(names), placed[0]
    for entry, key, index, inner, sub_off, sub_len in rows[:, [ENTRY, KEY, INDEX, INNER, SUB_OFF, SUB_LEN]].tolist():
        label = labels["backward" if backward[entry] else "forward"][key]
        tail = _text(raw, sub_off, sub_len) if sub_len >= 0 else index if inner < 0 else f"{index}.{inner}"
        out.append(f"{names[entry]}.{label}.{tail}")
    return out


def _io_slots(rows, entries, placed: tuple, layout: Layout, m: dict):
    """io per row and slot: the position, after the ``input_args`` list's length for ``input_kwargs`` members.
    ``placed``: each row's entry and its (pass, member key) number, pass x len(layout.keys) + key."""
    import numpy as np

    entry, member = placed
    io = np.array([m[f"{p}_keys"].get(k, "") for p in ("forward", "backward") for k in layout.keys], dtype=object)
    slot = rows[:, INDEX].copy()
    for pass_, code in (("forward", 0), ("backward", 1)):
        keys = list(m[f"{pass_}_keys"])
        if "input_args" in keys and "input_kwargs" in keys and keys.index("input_args") < keys.index("input_kwargs"):
            kwargs = member == code * len(layout.keys) + layout.keys.index("input_kwargs")
            slot[kwargs] += np.maximum(entries[entry[kwargs], 2], 0)
    return io[member], slot


def _shape(spelling: str, path: str) -> tuple[str, int | None]:
    fields = shape_fields(shape_of(json.loads(spelling), path))
    return fields["shape"], fields["numel"]


def _md5(rows, spell: list[str], layout: Layout):
    """The first md5 field present as a string, else ""."""
    import numpy as np

    if not layout.md5_fields:
        return repeated("", len(rows))
    ids = rows[:, FIXED_COLUMNS:FIXED_COLUMNS + len(layout.md5_fields)]
    chosen = np.full(len(rows), -1, np.int64)
    for column in range(ids.shape[1] - 1, -1, -1):
        chosen = np.where(ids[:, column] >= 0, ids[:, column], chosen)
    table = np.array([*spell, ""], dtype=object)
    return table[chosen]
