"""MindFormers training logs: ``MFLossMonitor`` step lines, local-norm blocks, monitor lines, and the
``Param groups`` start-up block. Keyed on the message, never on the prefix (the stdout logger writes
``<asctime> - mindformers<log dir>[file:line] - INFO - ``, ``info.log`` ``[INFO] <asctime> [file:line]
func: ``; older releases and the docs other forms).

* ``{ Epoch:[  1/  2], step:[    2/   19], loss: 10.633, per_step_time: 1752ms, lr: 1e-05, ...``:
  ``key: value`` pieces separated by ``, `` (meanings in ``datasets/log_formats.yaml``); the step is
  ``(epoch - 1) * steps_per_epoch + step``; ``loss:[cur/mean]`` (non-sink) gives the current loss.
* `` norm_size: (…)`` / ``local_norm:`` / a numpy-printed array (wrapped over lines): one value per
  parameter in optimizer order, for the step whose loss line follows. The count is checked against
  ``norm_size``; an array summarised with ``...`` keeps its head and tail at their true positions and
  the gap is said in the notes.
* ``Epoch:[..], step:[..] local_norm/<param>: value`` (TrainingStateMonitor) and other monitor tags.
* ``Param groups = {json}`` (multi-line): the optimizer order of the trainable parameters, which
  names the block's values when its length matches ``norm_size``.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import InputError, location
from .fastnum import batch_floats
from .formats import LogFormat
from .lines import bad_bytes_note, chunks, spans, text
from .mindformers_groups import JSON_CONTINUATION, MAX_GROUP_LINES, name_blocks, param_order
from .mindformers_scan import ARRAY_START
from .mindformers_scan import scan as _scan
from .norm_rows import NormBlock, norm_frame, recent_count
from .schema import SERIES_COLUMNS, LogSeries
from .tables import typed_frame
from .values import floats, mean_part, number, parse_joined

STEP_LINE = re.compile(r"Epoch:\[\s*(\d{1,9})/\s*(\d{1,9})\],\s*step:\[\s*(\d{1,12})/\s*(\d{1,12})\](,?)\s*(.*)$")
MONITOR_TAG = re.compile(r"^(\S+?):\s*(\S+)\s*$")
RANK_DIR = re.compile(r"(?:^|/)rank_(\d{1,18})(?:/|$)")     # int64 ranks only (lines.RANK_PREFIX)


class _State:
    def __init__(self, path: Path, run: str, fmt: LogFormat):
        self.path, self.run, self.fmt = path, run, fmt
        self.series: list[tuple] = []
        self.norms: list = []                     # tuples (monitor lines) and NormBlocks
        self.notes: list[str] = []
        self.bad: list[int] = []
        self.unknown: set[str] = set()
        self.block: list | None = None            # [line of norm_size, sizes, [value lines]]
        self.pending: list[NormBlock] = []        # finished blocks waiting for their step line
        self.batch: list[NormBlock] = []          # blocks of this chunk whose numbers are parsed together
        self.sizes: tuple[str, np.ndarray] = ("", np.empty(0, dtype=np.int64))   # the last norm_size read
        self.groups: list | None = None           # [first line, [lines]] of a Param groups block
        self.param_order: list[str] | None = None
        self.block_lengths: set[int] = set()       # len(norm_size) of every stored block
        self.last_step = 0
        self.non_sink = False
        self.native = None                        # the compiled scan (mindformers_native), when built
        self.rank = int(match.group(1)) if (match := RANK_DIR.search(path.as_posix())) else -1


def _step_line(state: _State, line: str, number_: int, match: re.Match) -> None:
    epoch, _, step, per_epoch = (int(match.group(i)) for i in range(1, 5))
    global_step = (epoch - 1) * per_epoch + step
    if not -(1 << 63) <= global_step < 1 << 63:
        raise InputError(location(state.path, number_), f"step (epoch - 1) * {per_epoch} + {step} of epoch {epoch} is "
                         "past a 64-bit integer", "pass the log as MindFormers wrote it")
    rest = match.group(6)
    if not match.group(5):                        # 'step:[..] tag: value': a monitor line
        _monitor_line(state, global_step, rest, number_)
        return
    state.last_step = global_step
    for piece in rest.split(", "):
        key, colon, value = piece.partition(":")
        if not colon:
            continue
        meaning = state.fmt.meaning(key)
        if meaning is None:
            state.unknown.add(key.strip()[:40])
            continue
        parsed = number(value, meaning.unit)
        if parsed is None:
            state.notes.append(f"{location(state.path, number_)}: {key.strip()} {value.strip()[:40]!r} is not a "
                               "number: left out")
            continue
        if meaning.metric == "loss" and mean_part(value) is not None:
            state.non_sink = True
        state.series.append((state.run, state.rank, global_step, meaning.metric, parsed, number_))
    for block in state.pending:
        _store_block(state, global_step, block)
    state.pending = []


def _monitor_line(state: _State, step: int, rest: str, number_: int) -> None:
    match = MONITOR_TAG.match(rest)
    if match is None:
        return
    tag, value = match.groups()
    parsed = number(value)
    for prefix, definition in state.fmt.extra.get("monitor_local_norms", {}).items():
        if tag.startswith(prefix):
            position = recent_count(state.norms, step, definition)
            state.norms.append((state.run, state.rank, step, -1, position, tag[len(prefix):], -1,
                                np.nan if parsed is None else parsed, definition, number_))
            return
    state.series.append((state.run, state.rank, step, tag, np.nan if parsed is None else parsed, number_))


def _block_values(state: _State, first: int, sizes: np.ndarray, body: list[str], complete: bool):
    flat = " ".join(body).replace("[", " ").replace("]", " ")
    summarised = "..." in flat and "..." in flat.split()          # numpy's gap is a token of its own
    values = None if summarised else parse_joined(flat.encode(), len(sizes))
    head, tail, bad = [], [], []
    if values is None:                                   # summarised, or not all numbers: token by token
        tokens = flat.split()
        cut = tokens.index("...") if summarised else len(tokens)
        head, tail = tokens[:cut], tokens[cut + 1:]
        values, bad = floats([token.encode() for token in head + tail])
    else:
        head = range(len(values))
    if bad:
        raise InputError(location(state.path, first), f"local_norm block holds {len(bad)} value(s) that are not "
                         f"numbers (e.g. {(head + tail)[bad[0]][:30]!r})", "pass the log as MindFormers wrote it")
    expected = len(sizes)
    if not summarised and len(values) != expected and complete:
        raise InputError(location(state.path, first), f"local_norm block has {len(values)} values but norm_size "
                         f"lists {expected} parameters", "the block was cut or edited: pass the complete log")
    if summarised:
        positions = list(range(len(head))) + list(range(expected - len(tail), expected))
        state.notes.append(f"{location(state.path, first)}: local_norm block summarised by numpy ('...'): "
                           f"{len(head) + len(tail)} of {expected} values printed, positions {len(head)}.."
                           f"{expected - len(tail) - 1} are missing")
    else:
        positions = list(range(len(values)))
    return positions, values


def _store_block(state: _State, step: int, block: NormBlock) -> None:
    block.step, block.definition = step, state.fmt.extra.get("block_definition", "sum_sq_step")
    state.block_lengths.add(len(block.sizes))
    state.norms.append(block)


def _finish_block(state: _State, complete: bool = True) -> None:
    _parse_batch(state)                  # the blocks set aside before this one first: errors in file order
    first, sizes, body = state.block
    state.block = None
    if not complete and len(" ".join(body).split()) < len(sizes):
        state.notes.append(f"{location(state.path, first)}: the last local_norm block is cut off: left out")
        return
    positions, values = _block_values(state, first, sizes, body, complete)
    state.pending.append(NormBlock(first, sizes, np.asarray(positions, dtype=np.int64), values))


def _parse_batch(state: _State) -> None:
    """The numbers of the blocks the fast path set aside, in one call; a block that is not what the
    fast parser reads exactly goes through ``_block_values`` (its errors and notes are the same)."""
    blocks, state.batch = state.batch, []
    if not blocks:
        return
    values = batch_floats([block.text for block in blocks], [len(block.sizes) for block in blocks])
    start = 0
    for block in blocks:
        if values is not None:
            block.values = values[start:start + len(block.sizes)]
            block.at = start if values.base is None else -1           # norm_rows._contiguous
            start += len(block.sizes)
        else:
            positions, block.values = _block_values(state, block.first, block.sizes, [block.text.decode()], True)
            block.positions = np.asarray(positions, dtype=np.int64)
        block.text = b""


def _groups_done(state: _State) -> None:
    first, body, _ = state.groups
    state.groups = None
    order, note = param_order(body, location(state.path, first, "Param groups"))
    if note is None:
        state.param_order = order
    else:
        state.notes.append(note)


def _line(state: _State, raw: bytes, number_: int) -> None:
    if state.groups is not None:
        if raw[:1] in JSON_CONTINUATION:               # json.dumps(indent=2): every later line is indented
            body = state.groups[1]
            body.append(text(raw, state.bad, number_))
            state.groups[2] += raw.count(b"{") - raw.count(b"}")
            if state.groups[2] <= 0 or len(body) > MAX_GROUP_LINES:
                _groups_done(state)
            return
        _groups_done(state)                            # a log line: the block ended unclosed
    if state.block is not None:
        if b"local_norm:" in raw and not state.block[2]:
            return
        if raw.lstrip().startswith(ARRAY_START):
            state.block[2].append(text(raw, state.bad, number_))
            if b"]" in raw:
                _finish_block(state)
            return
        _finish_block(state, complete=False)
    if b"Epoch:[" in raw:
        line = text(raw, state.bad, number_)
        match = STEP_LINE.search(line)
        if match:
            _step_line(state, line, number_, match)
    elif b"norm_size:" in raw:
        line = text(raw, state.bad, number_)
        state.block = [number_, _sizes(state, line[line.index("norm_size:"):], number_), []]
    elif b"Param groups = {" in raw:
        line = text(raw, state.bad, number_)
        start = line[line.index("Param groups = ") + len("Param groups = "):]
        state.groups = [number_, [start], start.count("{") - start.count("}")]
        if state.groups[2] <= 0:
            _groups_done(state)


def _sizes(state: _State, printed: str, number_: int) -> np.ndarray:
    """The numbers of ``norm_size: (...)``; every step prints the same tuple, so it is read once."""
    if printed != state.sizes[0]:
        try:
            sizes = np.array([int(size) for size in re.findall(r"\d+", printed)], dtype=np.int64)
        except OverflowError:
            raise InputError(location(state.path, number_), "norm_size holds a number larger than any tensor",
                             "pass the log as MindFormers wrote it") from None
        state.sizes = (printed, sizes)
    return state.sizes[1]


def _chunking() -> dict:
    """With the compiled scan, 1 MiB chunks (the buffer stays in L2 cache, 5.5 MB less fresh memory
    than one 6.5 MB buffer) cut before a block's norm_size line: C reads each block whole."""
    from . import lines
    from .logscan import mf_library
    from .megatron_native import SCAN_CHUNK

    from .ahead import Ahead

    return {} if mf_library() is None else {"chunk": min(SCAN_CHUNK, lines.CHUNK), "boundary": b"norm_size:",
                                            "ahead": Ahead()}


def read_mindformers(path: Path, fmt: LogFormat, run: str | None = None, fast: bool = True) -> LogSeries:
    """Every step line, local-norm block, monitor line and the Param groups block (module doc).
    ``fast=False`` reads every line with the exact per-line parser (the reference the fast path is
    tested against)."""
    state = _State(path, run or path.stem, fmt)
    if fast:
        ends = [0]                                     # line ends of the chunk, counted by the scan
        for first, data, _ in spans(path, state.notes, count=lambda *_: ends[0], exact=True, **_chunking()):
            ends[0] = _scan(state, data, first, _line, _finish_block, _store_block) - first - 1   # buffer: no copy
            _parse_batch(state)
    else:
        for first, data in chunks(path, state.notes):
            for index, raw in enumerate(data.split(b"\n")):
                _line(state, raw, first + index)
    if state.block is not None:
        _finish_block(state, complete=False)
    if state.groups is not None:
        state.notes.append(f"{location(path, state.groups[0], 'Param groups')}: the block never closes: "
                           "parameter names not taken from it")
    if state.pending:
        state.notes.append(f"{len(state.pending)} local_norm block(s) after the last step line: taken as step "
                           f"{state.last_step + 1}")
        for block in state.pending:
            _store_block(state, state.last_step + 1, block)
    return _result(state)


def _result(state: _State) -> LogSeries:
    notes = list(state.notes)
    facts = {"step_base": "step = (epoch - 1) * steps_per_epoch + step; lr is the one the step used",
             "log_interval": 1}
    if state.non_sink:
        notes.append("non-sink loss lines (loss:[current/mean]): the current step's loss is used")
    if state.unknown:
        notes.append(f"pieces not in datasets/log_formats.yaml left out: {', '.join(sorted(state.unknown))[:300]}")
    notes += bad_bytes_note(state.bad)
    norms = norm_frame(state.norms, state.run, state.rank)
    order = state.param_order
    if order is not None:
        facts["param_groups"] = len(order)
        name_blocks(norms, order, state.block_lengths, notes, state.fmt.extra.get("block_definition", "sum_sq_step"))
    series = typed_frame(state.series, SERIES_COLUMNS) if state.native is None else state.native.series(state)
    return LogSeries(str(state.path), "mindformers", series, norms, facts, notes, order)
