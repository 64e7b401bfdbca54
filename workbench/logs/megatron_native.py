"""The compiled scan of Megatron iteration lines (``workbench/native/logscan.c``), used by
``read_megatron`` when the library is built and ``WORKBENCH_NATIVE`` is not ``0``.

Each chunk stays in the reader's buffer (``lines.spans``, no copy) and is passed to C with its length.
C writes one row per kept field (rank, step, metric code, value, line) into arrays allocated here,
already in the table's order: file order, the fields of a line by (metric, key). The keys it knows
come from here (``KeyTable``: each printed key seen so far with its meaning from
``datasets/log_formats.yaml``); a line with a key it does not know, a value that is not a plain
number, or anything else it does not read exactly is handed back and read by the exact Python
parser (``megatron._slow_line``), after which its keys are passed in. Python rows and C rows are
merged by line number at the end (``merge``).
"""
from __future__ import annotations

import ctypes
import numpy as np

from . import lines
from .ahead import Ahead
from .lines import spans
from .logscan import CODES, P8, P32, P64, PF, Scan, library, pointer  # noqa: F401  (library: read_megatron's)

TRUSTED = 1 << 20                # bytes read before their rows say how many the whole file holds
SCAN_CHUNK = 1 << 20             # bytes scanned at a time: the read buffer stays in the core's L2 cache
BACK = 4096                      # lines handed back per call at most
KIND_DROP, KIND_SLOW = -1, -2
POINTERS = {np.int8: P8, np.int32: P32, np.int64: P64, np.float64: PF}
SEEN_TENSOR, SEEN_LOCAL_NORM = 1, 2
HUGE = 2 << 20                   # a huge page: the rows' one allocation starts at one (see NativeRows)
LAYOUT = (4, 0, 1, 2, 3, 5)      # NativeRows' arrays in that allocation: value, rank, step, line, code, iteration



class KeyTable:
    """The printed keys passed to C: stripped bytes, metric code (or drop / slow), order, step shift."""

    def __init__(self, meaning_of):
        self.meaning_of = meaning_of              # bytes key -> FieldMeaning | None
        self.keys: list[bytes] = []
        self.metrics: list[str] = []               # code -> metric name
        self.arrays: tuple = ()
        self.loaded = -1                           # len(self.keys) when they were last passed to C

    def add(self, keys) -> bool:
        """Passes ``keys`` in; False when every one was known."""
        known = set(self.keys)
        new = list(dict.fromkeys(key for key in keys if key not in known))
        if not new:
            return False
        self.keys += new
        kinds, shifts, flags, sort_keys = [], [], [], []
        for key in self.keys:
            meaning = self.meaning_of(key)
            kinds.append(KIND_DROP if meaning is None else KIND_SLOW if meaning.unit else self.code(meaning.metric))
            shifts.append(1 if meaning is not None and meaning.step == "next" else 0)
            flags.append((SEEN_TENSOR if b"tensor(" in key else 0) | (SEEN_LOCAL_NORM if b"local_norm/" in key else 0))
            sort_keys.append((meaning.metric if meaning else "", key))
        order = np.empty(len(self.keys), dtype=np.int32)
        order[sorted(range(len(self.keys)), key=sort_keys.__getitem__)] = np.arange(len(self.keys), dtype=np.int32)
        starts = np.cumsum([0] + [len(key) for key in self.keys], dtype=np.int64)
        self.arrays = (ctypes.create_string_buffer(b"".join(self.keys) or b"\0"), starts,
                       np.array(kinds, dtype=np.int32), order, np.array(shifts, dtype=np.int32),
                       np.array(flags, dtype=np.int32))
        return True

    def code(self, metric: str) -> int:
        if metric not in self.metrics:
            self.metrics.append(metric)
        return self.metrics.index(metric)

    def load(self, scan: Scan) -> None:
        if self.loaded == len(self.keys):
            return
        self.loaded = len(self.keys)
        joined, starts, kinds, order, shifts, flags = self.arrays or (ctypes.create_string_buffer(1),
                                                                      np.zeros(1, np.int64), *[np.zeros(1, np.int32)] * 4)
        scan.keys = ctypes.cast(joined, ctypes.c_void_p)
        scan.key_start, scan.key_kind, scan.key_order = pointer(starts, P64), pointer(kinds, P32), pointer(order, P32)
        scan.key_shift, scan.key_flags, scan.nkeys = pointer(shifts, P32), pointer(flags, P32), len(self.keys)


class NativeRows:
    """The rows C wrote, in one set of arrays that grows (to the whole file's estimate after the
    first chunk, then by half); ``iteration``: one per line with a kept field; ``counts``: rows per
    metric code (the codes are int8: a metric past the first ``CODES`` is read in Python). The arrays
    are views into one allocation starting at a huge page (``block``): the kernel then faults the fresh
    rows in as ~30 huge pages, not ~3,000 small ones at the edges of five arrays."""

    NAMES = ("rank", "step", "line", "code", "value", "iteration")
    TYPES = (np.int32, np.int32, np.int32, np.int8, np.float64, np.int64)     # tables.COLUMN_TYPES

    def __init__(self, scan: Scan, capacity: int, reading=None):
        self.arrays = [np.empty(0, dtype) for dtype in self.TYPES]
        self.reading = reading                     # an ahead.Ahead: fresh arrays are faulted in on its thread
        self.metrics: list[str] = []
        self.counts = np.zeros(CODES, dtype=np.int64)
        scan.code_rows, scan.code_cap = pointer(self.counts, P64), CODES
        self.grow(scan, capacity)

    def grow(self, scan: Scan, capacity: int) -> None:
        filled = (scan.rows,) * 5 + (scan.iterations,)
        grown = [None] * len(self.TYPES)
        for index, array in zip(LAYOUT, block(capacity, [self.TYPES[index] for index in LAYOUT]), strict=True):
            grown[index] = array
        for new, old, count in zip(grown, self.arrays, filled, strict=True):
            new[:count] = old[:count]
        self.arrays = grown
        for name, array in zip(self.NAMES, self.arrays, strict=True):
            setattr(scan, name, pointer(array, POINTERS[array.dtype.type]))
        scan.rows_cap = capacity
        if self.reading is not None:
            self.reading.fault_in(*self.ahead(scan))       # the rows C will write, on the other core

    def ahead(self, scan: Scan) -> list[tuple[np.ndarray, int]]:
        """(array, items C is expected to write) of each array: all its rows, iterations in the ratio so far."""
        lines = min(scan.iterations / max(scan.rows, 1) * 1.05, 1.0)
        return [(array, int(scan.rows_cap * lines) if name == "iteration" else scan.rows_cap)
                for name, array in zip(self.NAMES, self.arrays, strict=True)]

    def columns(self, scan: Scan) -> tuple[np.ndarray, ...]:
        """(rank, step, line, code, value) of every row, and the iterations."""
        return tuple(array[:scan.iterations if index == 5 else scan.rows] for index, array in enumerate(self.arrays))


def recoder(lib):
    """``recode(codes, remap)``: int8 ``codes`` replaced in place by ``remap[codes]`` in one pass of C
    (numpy's fancy indexing would first widen 2.6M codes to int64)."""
    def recode(codes: np.ndarray, remap: np.ndarray) -> np.ndarray:
        table = np.zeros(CODES, dtype=np.int8)
        table[:len(remap)] = remap[:CODES]
        lib.logscan_recode(pointer(codes, P8), len(codes), pointer(table, P8))
        return codes
    return recode


def block(capacity: int, types) -> list[np.ndarray]:
    """Arrays of ``capacity`` items of each of ``types``, views into one allocation laid out in the
    order given, each at a multiple of 64 bytes (its items aligned; the last one's unused tail, past what
    C writes, is never touched), the first at a huge page boundary when they fill several (a small
    block is not padded: its first write would fault in a whole huge page)."""
    sizes = [-(-capacity * np.dtype(kind).itemsize // 64) * 64 for kind in types]
    align = HUGE if sum(sizes) >= 8 * HUGE else 64
    whole = np.empty(sum(sizes) + align, dtype=np.uint8)
    at = -whole.ctypes.data % align
    views = []
    for kind, size in zip(types, sizes, strict=True):
        views.append(whole[at:at + capacity * np.dtype(kind).itemsize].view(kind))
        at += size
    return views


def scan(path, columns, notes: list[str], lib, meaning_of, slow_line, named_norms):
    """The megatron ``_scan`` with C reading the iteration lines: (named, patch, bad, cut, (keys,
    rows, state)). ``slow_line`` reads a handed-back line into ``columns``; ``named_norms(data, first,
    current, named)`` reads the ``local_norm/`` lines of a chunk that has them (rare) and returns
    the iteration they belong to. A line with keys C does not know yet is read again by C once its
    keys are passed in (``line_fields`` finds them); only when it brings no new key does Python read it."""
    from .megatron import ITERATION, line_fields

    table, state, reading = KeyTable(meaning_of), Scan(), Ahead()
    total, read = max(path.stat().st_size, 1), 0
    rows = NativeRows(state, 1024, reading)
    named, patch, bad, cut, current = [], False, [], [], None
    back = np.empty(3 * BACK, dtype=np.int64)
    state.back, state.back_cap = pointer(back, P64), BACK
    chunk_first = [1]                                          # the number of the chunk's first line
    for first, buffer, size in spans(path, notes, count=lambda buffer, size: state.line_no - chunk_first[0],
                                     chunk=min(SCAN_CHUNK, lines.CHUNK), ahead=reading):
        chunk_first[0] = first
        holder = (ctypes.c_char * max(size, 1)).from_buffer(buffer)
        address = ctypes.addressof(holder)
        state.pos, state.line_no, state.done, state.last_candidate, state.flags, state.non_ascii = 0, first, 0, -1, 0, 0
        while True:
            state.backs = 0
            table.load(state)
            status = lib.logscan_megatron(ctypes.byref(state), address, size)
            backs = back[:3 * state.backs].reshape(-1, 3).tolist()
            if status == 2 and table.add(key for key, _ in (line_fields(bytes(buffer[backs[-1][0]:backs[-1][1]]))
                                                            or (0, 0, [], True))[2]):
                state.pos, _, state.line_no = backs.pop()             # read it again, its keys known
                state.done = 0
            for start, end, number in backs:
                if not slow_line(bytes(buffer[start:end]), number, columns):
                    cut.append(number)
            table.add(columns.data)
            if status == 0:
                break
            if status == 1 and state.backs < BACK:             # the rows are full
                rows.grow(state, max(2 * state.rows_cap, _estimate(state.rows, read + state.pos, total)))
        read += size + 1
        if TRUSTED <= read < total and state.rows_cap < _estimate(state.rows, read, total):
            rows.grow(state, _estimate(state.rows, read, total))
        patch = patch or bool(state.flags & SEEN_TENSOR)
        if state.flags & SEEN_LOCAL_NORM:
            current = named_norms(bytes(buffer[:size]), first, current, named)
        elif state.last_candidate >= 0:
            end = buffer.find(b"\n", state.last_candidate, size)
            match = ITERATION.search(bytes(buffer[state.last_candidate:size if end < 0 else end]))
            current = int(match.group(1)) if match else current
        if state.non_ascii:                                    # C checked every line it went through
            lines.bad_lines(bytes(buffer[:size]), first, bad)
        del holder                                             # the reader may resize its buffer now
    rows.metrics = table.metrics
    return named, patch, bad, cut, (table, rows, state)


def _estimate(rows: int, read: int, total: int) -> int:
    """Rows of the whole file, from those of the bytes read so far (and a margin)."""
    return int(rows / max(read, 1) * total * 1.05) + 1024
