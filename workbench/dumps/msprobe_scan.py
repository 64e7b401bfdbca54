"""The compiled scan of an msprobe ``dump.json`` (``workbench/native/dumpscan.c``), in a thread that lets go of the
GIL: what it takes (the field and key lists of ``datasets/dump_formats.yaml``), the arrays it writes, and the
codes it returns. :mod:`.msprobe_native` makes the columns from its arrays; :mod:`.msprobe_ahead` starts a scan
before its reader asks for it.
"""
from __future__ import annotations

import ctypes

from ..input_files import JSON_DEPTH_LIMIT
from ..native import address, library
from .formats import DumpFormats
from .msprobe_sink import SCALAR_STATS

OK, IRREGULAR, FULL = 0, 1, 2
START = 1 << 18                  # rows and entries a first scan has room for
FIXED_FIELDS = ("type", "dtype", "shape", "nan_count", "inf_count")
ENTRY, KEY, INDEX, SUB_OFF, SUB_LEN, NULL, TYPE, DTYPE, SHAPE, NAN, INF, INNER = range(12)      # row columns
FIXED_COLUMNS = 12                                # then one spelling id per md5 field
_INT64_P, _DOUBLE_P = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_double)


def scan_plan(fmt: DumpFormats):
    """(compiled scanner, field layout) for dump.json files of this format, or None where only the Python reader
    reads them (no compiler, scalar rows, more fields than the scanner takes)."""
    scanner = library("dumpscan")
    if scanner is None or fmt.msprobe["scalar_rows"]:
        return None
    layout = Layout(fmt)
    return None if layout.fields is None else (scanner, layout)


class Layout:
    """Field and key lists handed to the scanner, from ``datasets/dump_formats.yaml``'s msprobe section."""

    def __init__(self, fmt: DumpFormats):
        m = fmt.msprobe
        self.keys = list(dict.fromkeys([*m["forward_keys"], *m["backward_keys"]]))
        stats = m["stats"]
        self.stat_columns = tuple(dict.fromkeys((*SCALAR_STATS, *stats)))
        stat_fields = list(dict.fromkeys(f for f in (stats.get(c) for c in self.stat_columns) if f is not None))
        self.md5_fields = list(m["md5_fields"])
        fields = [*FIXED_FIELDS, *self.md5_fields, *stat_fields]
        self.fields = fields if len(set(fields)) == len(fields) and len(fields) <= 64 and len(self.keys) <= 64 else None
        self.stat_index = {c: stat_fields.index(stats[c]) if stats.get(c) is not None else None
                           for c in self.stat_columns}
        self.ncols = FIXED_COLUMNS + len(self.md5_fields)
        self.nstat = len(stat_fields)


def _strings(values: list[str]):
    encoded = [v.encode("utf-8") for v in values]
    return (ctypes.c_char_p * max(len(encoded), 1))(*encoded), \
        (ctypes.c_int64 * max(len(encoded), 1))(*(len(v) for v in encoded))


class PendingScan:
    """:func:`scan` of one dump.json's bytes running in a thread (``ctypes`` lets go of the GIL for the C call),
    with a :func:`scan_plan`, then ``then()`` in the same thread (a reader's side files, which keep their own
    errors); :meth:`result` runs ``while_waiting`` here, then joins it."""

    def __init__(self, raw, plan, then=None) -> None:
        import threading

        from ..libc import one_heap_for_threads

        one_heap_for_threads()
        self.raw, self.outcome = raw, []
        self.thread = threading.Thread(target=self._work, args=(*plan, then), name="dumpscan", daemon=True)
        self.thread.start()

    def _work(self, scanner, layout, then) -> None:
        try:
            self.outcome.append((scan(scanner, self.raw, layout), None))
        except Exception as error:                 # noqa: BLE001 - raised by result(), in the reading thread
            self.outcome.append((None, error))
        if then is not None:
            then()

    def result(self, while_waiting=None):
        """The scan's arrays (None: the Python reader decides); its error raised here."""
        try:
            if while_waiting is not None:
                while_waiting()
        finally:
            self.thread.join()
        found, error = self.outcome[0]
        if error is not None:
            raise error
        return found


def scan(scanner, raw: bytes, layout: Layout):
    """(entries, rows, stats, spellings) arrays of a successful scan, or None."""
    import numpy as np

    scanner.dumpscan.restype = ctypes.c_int
    # Capacities start from what the bytes can hold (an entry takes at least 4 bytes, `"":{`, and so does a row,
    # `null`) and at most START; a scan that fills one is repeated with 4 times more: memory follows what was
    # found, never a count a hostile file claims. The arrays are np.empty: only the pages the scan writes are
    # touched (a file of brackets touches nothing large), so "type" and "null" are not counted first to size them
    # (two passes over the bytes: 32 ms of the scan's 135 ms on 200k rows).
    entry_cap = min(len(raw) // 4 + 1, START)
    row_cap = entry_cap
    per_row = 3 + len(layout.md5_fields)
    dist_cap = min(row_cap * per_row, 1 << 16)
    keys, key_lens = _strings(layout.keys)
    fields, field_lens = _strings(layout.fields)
    args = layout.keys.index("input_args") if "input_args" in layout.keys else -1
    while True:
        entries = np.empty((entry_cap, 3), np.int64)
        rows = np.empty((row_cap, layout.ncols), np.int64)
        stats = np.empty((row_cap, max(layout.nstat, 1)), np.float64)
        dist = np.empty((dist_cap, 2), np.int64)
        table_size = 1 << max(2 * dist_cap - 1, 1).bit_length()
        table = np.full(table_size, -1, np.int64)
        counts = np.zeros(4, np.int64)
        code = scanner.dumpscan(
            address(raw), ctypes.c_int64(len(raw)), ctypes.c_int64(JSON_DEPTH_LIMIT),
            keys, key_lens, ctypes.c_int64(len(layout.keys)), ctypes.c_int64(args),
            fields, field_lens, ctypes.c_int64(len(layout.md5_fields)), ctypes.c_int64(layout.nstat),
            entries.ctypes.data_as(_INT64_P), ctypes.c_int64(entry_cap),
            rows.ctypes.data_as(_INT64_P), stats.ctypes.data_as(_DOUBLE_P), ctypes.c_int64(row_cap),
            dist.ctypes.data_as(_INT64_P), ctypes.c_int64(dist_cap),
            table.ctypes.data_as(_INT64_P), ctypes.c_int64(table_size), counts.ctypes.data_as(_INT64_P))
        if code == FULL:
            grown = (counts[0] >= entry_cap, counts[1] >= row_cap, counts[2] >= dist_cap)
            entry_cap, row_cap = entry_cap * (4 if grown[0] else 1), row_cap * (4 if grown[1] else 1)
            dist_cap = dist_cap * 4 if grown[2] else dist_cap
            if any(grown):
                continue
        if code != OK:
            return None
        n_entries, n_rows, n_dist = (int(c) for c in counts[:3])
        return entries[:n_entries], rows[:n_rows], stats[:n_rows], dist[:n_dist]
