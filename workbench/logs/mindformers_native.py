"""The compiled scan of MindFormers logs (``mfscan_mindformers`` in ``workbench/native/mfscan.c``),
used by ``mindformers_scan.scan`` when the library is built and ``WORKBENCH_NATIVE`` is not ``0``.

C reads, from a position in the chunk, every line the exact per-line parser (``mindformers._line``)
would read the simple way: lines without a marker, step lines whose pieces have keys passed in from
here (each key as printed, with its meaning from ``datasets/log_formats.yaml``) and plain values,
``norm_size`` lines equal to the last one Python read, and their ``local_norm`` arrays. It stops
before any other line, which Python reads (``hand_back``), and Python then passes in the keys of the
step line it read. Rows and blocks come back in arrays allocated here: series rows are kept as
columns (``NativeSteps.series`` joins them with the per-line parser's rows, in file order, into the
table), blocks go into the reader's state in file order, stored at their step line, or left pending
(``state.pending``) when their step line has not come yet.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pandas as pd

from .logscan import CODES, P8, P32, P64, PF, pointer

DONE, BACK, FULL = 0, 1, 2
KIND_DROP, KIND_SLOW = -1, -2
ROWS = 4096                       # series rows and blocks taken per call at most (then Python takes them)
HUGE = (4 << 20) // 8 + 512       # values per array at least: numpy asks for huge pages from 4 MiB on


class MFScan(ctypes.Structure):
    """``mf_scan`` of mfscan.c, field for field."""

    _fields_ = [("keys", ctypes.c_void_p), ("key_start", P64), ("key_kind", P32), ("key_loss", P32),
                ("units", ctypes.c_void_p),
                ("unit_start", P64), ("nkeys", ctypes.c_int64),
                ("sizes", ctypes.c_void_p), ("sizes_len", ctypes.c_int64), ("nsizes", ctypes.c_int64),
                ("step", P64), ("line", P64), ("code", P8), ("value", PF), ("rows_cap", ctypes.c_int64),
                ("rows", ctypes.c_int64),
                ("block_line", P64), ("block_step", P64), ("block_at", P64), ("blocks_cap", ctypes.c_int64),
                ("blocks", ctypes.c_int64),
                ("values", PF), ("values_cap", ctypes.c_int64), ("values_used", ctypes.c_int64),
                ("waiting", ctypes.c_int64), ("last_step", ctypes.c_int64), ("steps_read", ctypes.c_int64),
                ("first_step", ctypes.c_int64), ("pos", ctypes.c_int64), ("line_no", ctypes.c_int64),
                ("open_block", ctypes.c_int64), ("non_sink", ctypes.c_int64)]



class StepKeys:
    """The keys of step-line pieces passed to C, as printed: metric code, or dropped (not in the YAML:
    the per-line parser has noted it already), with the key's unit."""

    def __init__(self, fmt):
        self.fmt = fmt
        self.kinds: dict[bytes, tuple[int, bytes, int]] = {}
        self.metrics: list[str] = []
        self.arrays: tuple = ()

    def learn(self, raw: bytes) -> None:
        """The keys of a step line the per-line parser has read (ASCII lines only: C reads no other)."""
        from .mindformers import STEP_LINE

        if b"Epoch:[" not in raw or not raw.isascii():
            return
        match = STEP_LINE.search(raw.decode("ascii"))
        if match is None or not match.group(5):
            return
        new = False
        for piece in match.group(6).split(", "):
            key, colon, _ = piece.partition(":")
            if colon and key.encode() not in self.kinds:
                self.kinds[key.encode()] = self._kind(key)
                new = True
        if new:
            self._arrays()

    def _kind(self, key: str) -> tuple[int, bytes, int]:
        """(metric code or KIND_DROP / KIND_SLOW, unit, whether it is the loss: ``mean_part`` applies)."""
        meaning = self.fmt.meaning(key)
        if meaning is None:
            return KIND_DROP, b"", 0
        if meaning.metric not in self.metrics:
            self.metrics.append(meaning.metric)
        code = self.metrics.index(meaning.metric)
        loss = meaning.metric == "loss"
        slow = code >= CODES or (loss and meaning.unit)           # mean_part reads the value without its unit
        return (KIND_SLOW if slow else code), meaning.unit.encode(), int(loss)

    def _arrays(self) -> None:
        keys = list(self.kinds)
        units = [self.kinds[key][1] for key in keys]
        self.arrays = (ctypes.create_string_buffer(b"".join(keys) or b"\0"),
                       np.cumsum([0] + [len(key) for key in keys], dtype=np.int64),
                       np.array([self.kinds[key][0] for key in keys] or [0], dtype=np.int32),
                       np.array([self.kinds[key][2] for key in keys] or [0], dtype=np.int32),
                       ctypes.create_string_buffer(b"".join(units) or b"\0"),
                       np.cumsum([0] + [len(unit) for unit in units], dtype=np.int64), len(keys))

    def load(self, scan: MFScan) -> None:
        if not self.arrays:
            scan.nkeys = 0
            return
        keys, starts, kinds, losses, units, unit_starts, count = self.arrays
        scan.keys, scan.key_start, scan.key_kind = ctypes.cast(keys, ctypes.c_void_p), pointer(starts, P64), \
            pointer(kinds, P32)
        scan.key_loss = pointer(losses, P32)
        scan.units, scan.unit_start, scan.nkeys = ctypes.cast(units, ctypes.c_void_p), pointer(unit_starts, P64), count


class NativeSteps:
    """One reader's compiled scan: the keys, the arrays C fills, and taking what C read into the state."""

    def __init__(self, lib, fmt):
        self.lib, self.keys, self.scan = lib, StepKeys(fmt), MFScan()
        self.rows = (np.empty(ROWS, np.int64), np.empty(ROWS, np.int64), np.empty(ROWS, np.int8),
                     np.empty(ROWS, np.float64))
        self.blocks = tuple(np.empty(ROWS, np.int64) for _ in range(3))
        self.values = np.empty(0, np.float64)
        self.taken: list[tuple] = []              # C's series rows: (step, line, code, value) arrays, in order
        self.sizes: tuple = (None, b"")
        scan = self.scan
        scan.step, scan.line, scan.code, scan.value = (pointer(self.rows[0], P64), pointer(self.rows[1], P64),
                                                       pointer(self.rows[2], P8), pointer(self.rows[3], PF))
        scan.block_line, scan.block_step, scan.block_at = (pointer(array, P64) for array in self.blocks)
        scan.rows_cap = scan.blocks_cap = ROWS

    @staticmethod
    def can_start(state) -> bool:
        """C can go on from here: no Param groups block open, and no local_norm block, or one whose
        array has not started, opened by the last norm_size line."""
        block = state.block
        return state.groups is None and (block is None or (not block[2] and block[1] is state.sizes[1]))

    def run(self, state, address: int, size: int, pos: int, number: int, store) -> tuple[int, int, int]:
        """C from line ``number`` at ``pos`` of the chunk (``size`` bytes at ``address``) until it is done
        with the chunk or hands a line back:
        (status, position, line number) where it stopped; a block it left open is ``state.block``
        (the line at that position is then one of that block's for the Python paths).
        ``store(state, step, block)`` stores a block at its step (``mindformers._store_block``)."""
        scan = self.scan
        self._load_sizes(state)
        self.keys.load(scan)
        scan.pos, scan.line_no, scan.last_step = pos, number, state.last_step
        scan.open_block, state.block = (-1 if state.block is None else state.block[0]), None
        scan.rows = scan.blocks = scan.waiting = scan.steps_read = scan.non_sink = 0
        while True:
            if scan.values_cap - scan.values_used < max(scan.nsizes, 1):
                self._values(size - scan.pos, scan.nsizes)
            status = self.lib.mfscan_mindformers(ctypes.byref(scan), address, size)
            self._take(state, store)
            if status != FULL:
                break
        state.non_sink = state.non_sink or bool(scan.non_sink)
        if scan.open_block >= 0:
            state.block = [scan.open_block, state.sizes[1], []]
        return status, scan.pos, scan.line_no

    def _load_sizes(self, state) -> None:
        printed, sizes = state.sizes
        if self.sizes[0] is not printed:
            self.sizes = (printed, ctypes.create_string_buffer(printed.encode("utf-8", errors="replace") or b"\0"))
        scan = self.scan
        scan.sizes, scan.sizes_len = ctypes.cast(self.sizes[1], ctypes.c_void_p), len(self.sizes[1].value)
        scan.nsizes = len(sizes) if printed else 0

    def _values(self, remaining: int, nsizes: int) -> None:
        """A fresh values array (the blocks taken so far keep views of the old one)."""
        self.values = np.empty(max(remaining // 16, 8 * nsizes, HUGE), dtype=np.float64)
        self.scan.values, self.scan.values_cap, self.scan.values_used = pointer(self.values, PF), len(self.values), 0

    def _take(self, state, store) -> None:
        from .norm_rows import NormBlock

        scan = self.scan
        if scan.steps_read:
            for block in state.pending:                       # read before this call: the first step line's
                store(state, scan.first_step, block)
            state.pending = []
            state.last_step = scan.last_step
        if scan.rows:                                         # columns, not a tuple a row (built once: ``series``)
            self.taken.append(tuple(array[:scan.rows].copy() for array in self.rows))
        sizes, count, stepped = state.sizes[1], scan.nsizes, scan.blocks - scan.waiting
        for index, (first, step, at) in enumerate(zip(*(array[:scan.blocks].tolist() for array in self.blocks), strict=True)):
            block = NormBlock(first, sizes, None, self.values[at:at + count], at=at)
            if index < stepped:
                store(state, step, block)
            else:
                state.pending.append(block)
        scan.rows = scan.blocks = scan.waiting = scan.steps_read = 0

    def series(self, state) -> pd.DataFrame:
        """The series table of C's rows and the per-line parser's (``state.series``, tuples) in file order
        (``tables.typed_frame`` of them all): each line is read by one of the two, so the parser's rows go
        in where their line numbers fall, a line's rows in their order."""
        from .schema import SERIES_COLUMNS
        from .tables import categorical, code_of, frame, texts, narrow

        taken = self.taken or [tuple(array[:0] for array in self.rows)]
        step, line, code, value = (np.concatenate(columns) for columns in zip(*taken, strict=True))
        metrics = list(self.keys.metrics)
        if state.series:
            _, _, steps, names, values, lines = zip(*state.series, strict=True)
            at = np.searchsorted(line, lines)
            step, line, value = (np.insert(whole, at, np.array(some, dtype=whole.dtype))
                                 for whole, some in ((step, steps), (line, lines), (value, values)))
            code = np.insert(code.astype(np.int32), at, [code_of(metrics, name) for name in names])
        if not len(step):
            return frame([], SERIES_COLUMNS)
        rank = narrow(np.full(len(step), state.rank, dtype=np.int64))
        return pd.DataFrame({"run": texts(state.run, len(step)), "rank": rank, "step": narrow(step),
                             "metric": categorical(code, metrics), "value": value, "line": narrow(line)}, copy=False)


def hand_back(state, native: NativeSteps, raw: bytes, number: int, line) -> None:
    """A line C handed back, read by the per-line parser; the keys of a step line are passed in."""
    line(state, raw, number)
    native.keys.learn(raw)
