"""The unmatched rows of one matching: recorded as events (a row, or all rows of a call, with a reason), expanded with
arrays when the table is made. A row keeps its first reason and its place is where that reason came: what a dict
``{row position: reason}`` filled by ``setdefault`` in the same order holds (``tests/test_compare_match_features.py``),
without a Python step per row of the ~100k unmatched calls."""
from __future__ import annotations


class Unmatched:
    def __init__(self):
        self._reasons: dict[str, int] = {}                  # reason text -> its number
        self._rows = {"A": ([], [], []), "B": ([], [], [])}     # side -> (event numbers, row positions, reasons)
        self._calls = {"A": ([], [], []), "B": ([], [], [])}    # side -> (event numbers, call numbers, reasons)
        self._tables: dict[str, object] = {}                # side -> its calls' (rows by call, where each starts)
        self._events = 0

    def row(self, side: str, index: int, reason: str) -> None:
        events, positions, reasons = self._rows[side]
        events.append(self._events)
        positions.append(index)
        reasons.append(self._reasons.setdefault(reason, len(self._reasons)))
        self._events += 1

    def call(self, side: str, call, reason: str) -> None:
        """Every row of ``call`` (a :class:`.match_calls.Call` of that side), in execution order."""
        if side not in self._tables:
            self._tables[side] = call.table.rows_by_call()
        events, numbers, reasons = self._calls[side]
        events.append(self._events)
        numbers.append(call.index)
        reasons.append(self._reasons.setdefault(reason, len(self._reasons)))
        self._events += 1

    def found(self, side: str) -> tuple:
        """(the unmatched row positions of ``side`` in the order their first reason came, the reasons, an object
        array of str)."""
        import numpy as np

        from .match_columns import object_array

        events, positions, reasons = (np.asarray(v, dtype=np.int64) for v in self._rows[side])
        call_events, numbers, call_reasons = (np.asarray(v, dtype=np.int64) for v in self._calls[side])
        if len(numbers):
            by_call, starts = self._tables[side]
            first, sizes = starts[numbers], starts[numbers + 1] - starts[numbers]
            total = int(sizes.sum())
            within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            events = np.concatenate([events, np.repeat(call_events, sizes)])
            positions = np.concatenate([positions, by_call[np.repeat(first, sizes) + within]])
            reasons = np.concatenate([reasons, np.repeat(call_reasons, sizes)])
        order = np.argsort(events, kind="stable")               # a call's rows stay in their order
        positions, reasons = positions[order], reasons[order]
        _, firsts = np.unique(positions, return_index=True)
        kept = np.sort(firsts)                                  # each row at its first reason
        texts = object_array(list(self._reasons))
        return positions[kept], texts[reasons[kept]]
