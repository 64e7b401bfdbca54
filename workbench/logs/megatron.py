"""Megatron-LM / MindSpeed-LLM training logs: the ``iteration N/ T | key: value | ...`` lines.

The line is assembled field by field (``training_log``): any subset of fields, in any order, with
or without a timestamp, behind launcher prefixes (``[default0]:``, Slurm ``1: ``). Each field's
meaning and the update it belongs to come from ``datasets/log_formats.yaml``: the loss is the mean
of the log interval ending at update N, the printed learning rate is the one update N+1 uses.

Fast path: the iteration lines of a chunk that have the same number of fields are cut into
columns with ``bytes.split`` and slicing, each column's key is checked for every line with one
``count`` and its numbers are parsed by numpy in one call. A group whose keys differ from line to
line goes through the per-line path. Between iteration lines, the workbench's named local-norm
lines (``local_norm/<param>: value``, written by the torch reference trainer) are read; lists of
the common local-norm patch (``[tensor(...), ...]``) are read by ``megatron_grads.read_patch_lists``.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from itertools import compress, repeat
from operator import contains, itemgetter
from pathlib import Path

import numpy as np

from .formats import LogFormat
from .lines import bad_bytes_note, chunks, rank_of, text
from .schema import LOCAL_NORM_COLUMNS, SERIES_COLUMNS, LogSeries
from .tables import frame
from .values import floats, parse_joined

HEAD = re.compile(rb"(?:^|\x00)(?:\s*(?:\[default(\d+)\]:|(\d+):\s))?[^\x00]*?iteration\s+(\d{1,18})\s*/\s*\d{1,18}\s*(?=\x00|$)")
ITERATION = re.compile(rb"iteration\s+(\d{1,18})\s*/\s*(\d{1,18})")
HEAD_END = re.compile(rb"iteration\s+(\d{1,18})\s*/\s*\d{1,18}\s*(?=\x00|$)")     # HEAD's counter, found fast
HEAD_RANK = re.compile(rb"\x00\s*(?:\[default(\d+)\]:|(\d+):\s)")          # HEAD's rank prefix, after a NUL
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


def _fast_group(lines: list[bytes], numbers: list[int], columns: Columns) -> bool:
    """Column-wise parse of iteration lines with the same number of '|'; False if keys differ."""
    width = lines[0].count(b"|") + 1
    pieces = b"|".join(lines).split(b"|")
    if len(pieces) != width * len(lines) or b"".join(pieces[width - 1::width]).strip():
        return False                                       # text after the last '|': a truncated line
    matched = _heads(b"\x00".join(pieces[0::width]), len(lines))
    if matched is None:
        return False
    keys = []
    for column in range(1, width - 1):
        values = pieces[column::width]
        key = values[0].partition(b":")[0]
        joined = b"\x00" + b"\x00".join(values)
        if not key.strip() or joined.count(b"\x00" + key + b":") != len(values):
            return False
        keys.append((key, joined))
    iterations, ranks = matched
    numbers = np.asarray(numbers, dtype=np.int64)
    for key, joined in keys:
        columns.add_block(key.strip(), iterations, joined.replace(b"\x00" + key + b":", b"\x00")[1:], numbers, ranks)
    return True


def _heads(joined: bytes, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(iterations, ranks) of ``count`` NUL-separated line heads, each ending in ``iteration N/ T``;
    ``None`` when one does not. Two quick scans; the full ``HEAD`` pattern only when some heads
    carry a rank prefix and others do not."""
    found = HEAD_END.findall(joined)
    if len(found) != count:
        return None
    ranked = HEAD_RANK.findall(b"\x00" + joined)
    if not ranked:
        ranks = np.full(count, -1, dtype=np.int64)
    elif len(ranked) == count:
        ranks = np.array([int(a or b) for a, b in ranked], dtype=np.int64)
    else:
        matched = HEAD.findall(joined)
        if len(matched) != count:
            return None
        found = [it for _, _, it in matched]
        ranks = np.array([int(a or b) if (a or b) else -1 for a, b, _ in matched], dtype=np.int64)
    return np.array(found, dtype=np.bytes_).astype(np.int64), ranks


def _slow_line(line: bytes, number: int, columns: Columns) -> bool:
    """One iteration line field by field; False when its last field was cut off (no closing '|')."""
    match = ITERATION.search(line)
    if match is None:
        return True
    rank, iteration = rank_of(line[:match.start()]), int(match.group(1))
    pieces = line[match.end():].split(b"|")
    for piece in pieces[1:-1]:                            # the last piece follows the last '|'
        key, colon, value = piece.partition(b":")
        if colon and key.strip() and value.strip():
            columns.add(key.strip(), [iteration], [value.strip()], [number], [rank])
    return not pieces[-1].strip()


def _scan(path: Path, columns: Columns, notes: list[str], fast: bool = True) -> tuple[list, bool, list[int]]:
    named, patch, bad, cut = [], False, [], []
    current = None
    for first, data in chunks(path, notes):
        lines = data.split(b"\n")
        found = _iteration_lines(lines)
        for indices in _groups(lines, found):
            if not fast or not _fast_group([lines[i] for i in indices], [first + i for i in indices], columns):
                cut += [first + i for i in indices if not _slow_line(lines[i], first + i, columns)]
        patch = patch or b"tensor(" in data
        if b"local_norm/" in data:
            iteration_at = dict.fromkeys(found)
            for i, line in enumerate(lines):
                if i in iteration_at:
                    match = ITERATION.search(line)
                    current = int(match.group(1)) if match else current
                elif b"local_norm/" in line:
                    found_norm = NAMED_NORM.search(text(line, bad, first + i))
                    if found_norm:
                        named.append((current, found_norm.group(1), found_norm.group(2), first + i))
        elif found:
            match = ITERATION.search(lines[found[-1]])
            current = int(match.group(1)) if match else current
        try:
            data.isascii() or data.decode("utf-8")
        except UnicodeDecodeError as error:
            bad.append(first + data.count(b"\n", 0, error.start))
    if cut:
        notes.append(f"{len(cut)} iteration line(s) cut off before their last '|' (first: line {cut[0]}): "
                     "their last field is left out")
    return named, patch, bad


def _iteration_lines(lines: list[bytes]) -> list[int]:
    """Indices of the lines holding ``iteration`` and ``|`` (tests run in C through ``map``)."""
    named = list(compress(range(len(lines)), map(contains, lines, repeat(b"iteration"))))
    if not named:
        return []
    held = itemgetter(*named)(lines) if len(named) > 1 else (lines[named[0]],)
    return list(compress(named, map(contains, held, repeat(b"|"))))


def _groups(lines: list[bytes], found: list[int]) -> list[list[int]]:
    """``found`` grouped by the number of '|' of each line, in order of first appearance."""
    counts = list(map(bytes.count, [lines[i] for i in found], repeat(b"|")))
    if not counts or min(counts) == max(counts):
        return [found] if found else []
    groups = defaultdict(list)
    for i, count in zip(found, counts, strict=True):
        groups[count].append(i)
    return list(groups.values())


def _interval(iterations: np.ndarray) -> int:
    steps = np.diff(np.unique(iterations))
    if steps.size == 0:
        return 1
    return int(Counter(steps.tolist()).most_common(1)[0][0])


def read_megatron(path: Path, fmt: LogFormat, run: str | None = None, fast: bool = True) -> LogSeries:
    """Every iteration line of a Megatron / MindSpeed-LLM log (see the module doc); ``fast=False``
    reads every iteration line field by field (the reference the fast path is tested against)."""
    notes: list[str] = []
    columns = Columns(lambda key: getattr(fmt.meaning(key.decode("utf-8", errors="replace")), "unit", ""))
    named, patch, bad = _scan(path, columns, notes, fast)
    label = run or path.stem
    parts, unknown, garbled, all_iterations = [], [], 0, []
    for key, segments in columns.data.items():
        meaning = fmt.meaning(key.decode("utf-8", errors="replace"))
        if meaning is None:
            unknown.append(key.decode("utf-8", errors="replace"))
            continue
        iterations, values, lines, ranks, wrong = Columns.arrays(segments, meaning.unit)
        garbled += wrong
        all_iterations.append(iterations)
        parts.append((meaning.metric, iterations + (1 if meaning.step == "next" else 0), values, lines, ranks))
    series = _series_frame(label, parts)
    facts = {"step_base": "iteration N = update N; the printed learning rate is update N+1's"}
    interval = _interval(np.concatenate(all_iterations)) if all_iterations else 1
    facts["log_interval"] = interval
    if interval > 1:
        notes.append(f"--log-interval {interval}: losses are means over the {interval} iterations ending at "
                     "each printed one; grad norm, loss scale, params norm are the last iteration's")
    if any(metric == "lr" for metric, *_ in parts):
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


def _series_frame(label: str, parts: list):
    import pandas as pd

    if not parts:
        return frame([], SERIES_COLUMNS)
    parts = sorted(parts, key=lambda part: part[0])
    count = sum(len(steps) for _, steps, *_ in parts)
    lines = np.concatenate([lines for *_, lines, _ in parts])
    order = np.argsort(lines, kind="stable")               # file order; fields of a line by metric
    codes = np.concatenate([np.full(len(steps), index) for index, (_, steps, *_) in enumerate(parts)])
    names = np.array([metric for metric, *_ in parts], dtype=object)
    return pd.DataFrame({
        "run": np.array([label] * count, dtype=object),
        "rank": np.concatenate([ranks for *_, ranks in parts])[order],
        "step": np.concatenate([steps for _, steps, *_ in parts])[order],
        "metric": names[codes[order]],
        "value": np.concatenate([values for _, _, values, *_ in parts])[order],
        "line": lines[order],
    }, copy=False)


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
    from .megatron_grads import read_patch_lists

    lists = read_patch_lists(path, run or path.stem)
    result.local_norms = lists.local_norms
    result.notes += lists.notes
    return result
