"""Megatron-LM / MindSpeed-LLM training logs: the ``iteration N/ T | key: value | ...`` lines.

The line is assembled field by field (``training_log``): any subset of fields, in any order, with
or without a timestamp, behind launcher prefixes (``[default0]:``, Slurm ``1: ``). Each field's
meaning and the update it belongs to come from ``datasets/log_formats.yaml``: the loss is the mean
of the log interval ending at update N, the printed learning rate is the one update N+1 uses.

Fast paths: the compiled scanner (``megatron_native``, ``workbench/native/logscan.c``) when it is
built, else the numpy column path (``megatron_columns``); a line either does not read exactly goes
through the per-line path (``_slow_line``), which ``fast=False`` uses for every line.
Between iteration lines, the workbench's named local-norm lines (``local_norm/<param>: value``,
written by the torch reference trainer) are read; lists of the common local-norm patch (``[tensor(...), ...]``) are read by ``megatron_grads.read_patch_lists``.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from .formats import LogFormat
from .megatron_columns import fast_group, groups, iteration_lines
from .lines import bad_bytes_note, bad_lines, chunks, rank_of, text
from .schema import LOCAL_NORM_COLUMNS, SERIES_COLUMNS, LogSeries
from .tables import categorical, code_of, frame, texts, narrow
from .values import floats, parse_joined

ITERATION = re.compile(rb"iteration\s+(\d{1,18})\s*/\s*(\d{1,18})")
NAMED_NORM = re.compile(r"local_norm/(\S+):\s*(\S+)\s*$")
NAMED_NORM_DEFINITION = "sum_sq_step"


class Columns:
    """Values gathered per printed key as segments: (iterations, raw numbers, line numbers, ranks).
    Raw numbers are a list of bytes, ``(NUL-joined bytes, count)`` from the fast path, or
    ``(parsed values,)`` when that column was read as it came (memory then follows the values, not
    the text); the iteration / line / rank arrays of the fast path are shared by every key of a group."""

    def __init__(self, unit_of=lambda key: ""):
        self.data = defaultdict(list)
        self.unit_of = unit_of

    def add(self, key: bytes, iterations, raw, lines, ranks) -> None:
        segments = self.data[key]
        if not segments or isinstance(segments[-1][1], tuple):      # open a list segment
            segments.append(([], [], [], []))
        for part, values in zip(segments[-1], (iterations, raw, lines, ranks), strict=True):
            part.extend(values)

    def add_block(self, key: bytes, iterations, joined: bytes, lines, ranks) -> None:
        parsed = None if self.unit_of(key) else parse_joined(joined, len(iterations))
        raw = (joined, len(iterations)) if parsed is None else (parsed,)
        self.data[key].append((iterations, raw, lines, ranks))

    @staticmethod
    def arrays(segments: list, unit: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """(iterations, values, lines, ranks) of one key in file order, and how many were not numbers."""
        values, wrong = [], 0
        for _, raw, _, _ in segments:
            parsed = raw[0] if isinstance(raw, tuple) and len(raw) == 1 else None
            if parsed is None and isinstance(raw, tuple):
                parsed = None if unit else parse_joined(*raw)
                raw = raw[0].split(b"\x00") if parsed is None else raw
            if parsed is None:
                parsed, bad = floats(_unit_stripped(raw, unit))
                wrong += len(bad)
            values.append(parsed)
        def joined(index: int) -> np.ndarray:
            return np.concatenate([np.asarray(segment[index], dtype=np.int64) for segment in segments])
        return joined(0), np.concatenate(values), joined(2), joined(3), wrong


def _unit_stripped(raw: list[bytes], unit: str) -> list[bytes]:
    return [value.strip().removesuffix(unit.encode()) for value in raw] if unit else raw


def _slow_line(line: bytes, number: int, columns: Columns) -> bool:
    """One iteration line field by field; False when its last field was cut off (no closing '|')."""
    read = line_fields(line)
    if read is None:
        return True
    rank, iteration, fields, complete = read
    for key, value in fields:
        columns.add(key, [iteration], [value], [number], [rank])
    return complete


def line_fields(line: bytes) -> tuple[int, int, list[tuple[bytes, bytes]], bool] | None:
    """(rank, iteration, [(stripped key, stripped value)], whether the last '|' closes the line) of an
    iteration line, ``None`` when it is not one."""
    match = ITERATION.search(line)
    if match is None:
        return None
    rank, iteration = rank_of(line[:match.start()]), int(match.group(1))
    pieces = line[match.end():].split(b"|")
    fields = []
    for piece in pieces[1:-1]:                            # the last piece follows the last '|'
        key, colon, value = piece.partition(b":")
        if colon and key.strip() and value.strip():
            fields.append((key.strip(), value.strip()))
    return rank, iteration, fields, not pieces[-1].strip()


def _scan(path: Path, columns: Columns, notes: list[str], fast: bool = True) -> tuple[list, bool, list[int], list[int]]:
    named, patch, bad, cut = [], False, [], []
    current = None
    for first, data in chunks(path, notes):
        lines = data.split(b"\n")
        found = iteration_lines(lines)
        for indices in groups(lines, found):
            if not fast or not fast_group([lines[i] for i in indices], [first + i for i in indices], columns):
                cut += [first + i for i in indices if not _slow_line(lines[i], first + i, columns)]
        patch = patch or b"tensor(" in data
        if b"local_norm/" in data:
            current = _named_in_chunk(data, first, current, named, lines, found)
        elif found:
            match = ITERATION.search(lines[found[-1]])
            current = int(match.group(1)) if match else current
        bad_lines(data, first, bad)
    return named, patch, bad, cut


def _named_in_chunk(data: bytes, first: int, current, named: list, lines=None, found=None):
    """The ``local_norm/<param>: value`` lines of a chunk, each with the iteration printed above it;
    returns the iteration of the chunk's last iteration line (``current`` when it has none)."""
    lines = data.split(b"\n") if lines is None else lines
    iteration_at = dict.fromkeys(iteration_lines(lines) if found is None else found)
    for i, line in enumerate(lines):
        if i in iteration_at:
            match = ITERATION.search(line)
            current = int(match.group(1)) if match else current
        elif b"local_norm/" in line:
            found_norm = NAMED_NORM.search(text(line))             # its bad bytes: the chunk's bad_lines
            if found_norm:
                named.append((current, found_norm.group(1), found_norm.group(2), first + i))
    return current


def _interval(iterations: np.ndarray) -> int:
    """The most common step between printed iterations (the first seen among equally common ones)."""
    if len(iterations) > 1 and iterations[1] > iterations[0] and _evenly(iterations, iterations[1] - iterations[0]):
        return int(iterations[1] - iterations[0])          # printed in order at one interval: no sort
    steps = np.diff(np.unique(iterations))
    if steps.size == 0:
        return 1
    values, first, counts = np.unique(steps, return_index=True, return_counts=True)
    common = np.flatnonzero(counts == counts.max())
    return int(values[common[np.argmin(first[common])]])


def _evenly(iterations: np.ndarray, step, piece: int = 8192) -> bool:
    """Whether each iteration is the one before plus ``step``, read a piece at a time: the differences
    of 200,000 iterations at once would be 1.6 MB of fresh memory, ~400 page faults."""
    for start in range(0, len(iterations) - 1, piece):
        window = iterations[start:start + piece + 1]
        if not (np.diff(window) == step).all():
            return False
    return True


def read_megatron(path: Path, fmt: LogFormat, run: str | None = None, fast: bool = True) -> LogSeries:
    """Every iteration line of a Megatron / MindSpeed-LLM log (see the module doc); ``fast=False``
    reads every iteration line field by field (the reference the fast path is tested against). The
    fast path is the compiled scanner when it is built (``megatron_native``), else numpy's."""
    from . import megatron_native

    notes: list[str] = []
    def meaning_of(key: bytes):
        return fmt.meaning(key.decode("utf-8", errors="replace"))
    columns = Columns(lambda key: getattr(meaning_of(key), "unit", ""))
    lib = megatron_native.library() if fast else None
    native = None
    if lib is None:
        named, patch, bad, cut = _scan(path, columns, notes, fast)
    else:
        named, patch, bad, cut, native = megatron_native.scan(path, columns, notes, lib, meaning_of, _slow_line,
                                                              _named_in_chunk)
    if cut:
        notes.append(f"{len(cut)} iteration line(s) cut off before their last '|' (first: line {min(cut)}): "
                     "their last field is left out")
    label = run or path.stem
    parts, garbled, all_iterations = [], 0, []
    seen = set(columns.data) | set(native[0].keys if native else ())
    unknown = [key.decode("utf-8", errors="replace") for key in seen if meaning_of(key) is None]
    for key, segments in columns.data.items():
        meaning = meaning_of(key)
        if meaning is None:
            continue
        iterations, values, lines, ranks, wrong = Columns.arrays(segments, meaning.unit)
        garbled += wrong
        all_iterations.append(iterations)
        parts.append((meaning.metric, key, iterations + (1 if meaning.step == "next" else 0), values, lines, ranks))
    native_rows = None
    if native is not None:
        native_rows = native[1].columns(native[2])
        all_iterations.append(native_rows[5])
    series = _series_frame(label, parts, native_rows, native[1].metrics if native else [],
                           native and (native[1].counts, megatron_native.recoder(lib)))
    facts = {"step_base": "iteration N = update N; the printed learning rate is update N+1's"}
    interval = _interval(all_iterations[0] if len(all_iterations) == 1 else np.concatenate(all_iterations)) \
        if all_iterations else 1
    facts["log_interval"] = interval
    if interval > 1:
        notes.append(f"--log-interval {interval}: losses are means over the {interval} iterations ending at "
                     "each printed one; grad norm, loss scale, params norm are the last iteration's")
    if any(getattr(meaning_of(key), "metric", "") == "lr" for key in seen):
        notes.append("Megatron prints the learning rate of the next update: lr values are put on step N+1")
    if unknown:
        notes.append(f"fields not in datasets/log_formats.yaml kept out: {', '.join(sorted(set(unknown)))[:300]}")
    if garbled:
        notes.append(f"{garbled} printed value(s) are not numbers: read as nan")
    notes += bad_bytes_note(bad)
    norms = _named_norms(label, named, notes)
    result = LogSeries(str(path), "megatron", series, norms, facts, notes)
    if patch and norms.empty:
        result = _with_patch_lists(result, path, run)
    return result


def _series_frame(label: str, parts: list, native=None, metrics=(), coded=None):
    """The series table: rows in file order, the fields of a line by (metric, printed key). ``parts``:
    (metric, key, steps, values, lines, ranks) read in Python; ``native``: (rank, step, line, code,
    value, ...) rows of the compiled scanner, already in that order, int8 codes into ``metrics``;
    ``coded``: (rows per code, recode) of those, for the table's Categorical."""
    metrics = list(metrics)
    counts, recode = coded or (None, None)
    parts = sorted(parts, key=lambda part: part[:2])
    if parts:
        lines = np.concatenate([part[4] for part in parts])
        order = np.argsort(lines, kind="stable")               # file order; fields of a line by metric, key
        codes = np.concatenate([np.full(len(part[2]), code_of(metrics, part[0]), dtype=np.int32) for part in parts])
        columns = [narrow(np.concatenate([part[index] for part in parts])[order]) for index in (5, 2)]
        columns += [narrow(lines[order]), codes[order], np.concatenate([part[3] for part in parts])[order]]
    if native is not None and parts:
        at = np.searchsorted(native[2], columns[2])
        wide = native[:3] + (native[3].astype(np.int32) if len(metrics) > 127 else native[3],) + native[4:5]
        wide = tuple(whole.astype(np.result_type(whole, some), copy=False) if index < 3 else whole   # narrow's rule
                     for index, (whole, some) in enumerate(zip(wide, columns, strict=True)))
        columns = [np.insert(whole, at, some) for whole, some in zip(wide, columns, strict=True)]
        counts = None
    elif native is not None:
        columns = native[:5]
    if not parts and native is None or len(columns[0]) == 0:
        return frame([], SERIES_COLUMNS)
    rank, step, line, code, value = columns
    return pd.DataFrame({"run": texts(label, len(rank)), "rank": rank, "step": step,
                         "metric": categorical(code, metrics, counts, recode), "value": value, "line": line},
                        copy=False)


def _named_norms(label: str, named: list, notes: list[str]):
    rows, positions, orphans = [], Counter(), 0
    for iteration, name, value, number in named:
        if iteration is None:
            orphans += 1
            continue
        values, _ = floats([value.encode()])
        rows.append((label, -1, iteration, -1, positions[iteration], name, -1, float(values[0]),
                     NAMED_NORM_DEFINITION, number))
        positions[iteration] += 1
    if orphans:
        notes.append(f"{orphans} local_norm/ line(s) before the first iteration line: not attributed to a step")
    if rows:
        notes.append("named local norms (local_norm/<param> lines): sums of squares of each parameter's gradient "
                     "over the iteration printed above them")
    return frame(rows, LOCAL_NORM_COLUMNS)


def _with_patch_lists(result: LogSeries, path: Path, run: str | None) -> LogSeries:
    """The local-norm patch's lists, when a log that mentions ``tensor(`` holds any (a log line that
    merely prints a tensor is not an error)."""
    from ..errors import InputError
    from .megatron_grads import read_patch_lists

    try:
        lists = read_patch_lists(path, run or path.stem)
    except InputError:
        return result
    result.local_norms = lists.local_norms
    result.notes += lists.notes
    return result
