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
        self._blocks = {"A": [], "B": []}      # side -> (events, places, positions, reason numbers) arrays

    def reserve(self) -> int:
        """An event number for rows given later (:meth:`extend`), at the place of this call in the order."""
        self._events += 1
        return self._events - 1

    def extend(self, events, places, sides, positions, reasons: list) -> None:
        """Rows of reserved events: int64 arrays (side 0 for A, 1 for B) and their reasons; ``places`` order the
        rows of one event."""
        import numpy as np

        numbers = np.fromiter((self._reasons.setdefault(r, len(self._reasons)) for r in reasons), np.int64,
                              len(reasons))
        for code, side in enumerate("AB"):
            mine = sides == code
            self._blocks[side].append((events[mine], places[mine], positions[mine], numbers[mine]))

    def row(self, side: str, index: int, reason: str) -> None:
        events, positions, reasons = self._rows[side]
        events.append(self._events)
        positions.append(index)
        reasons.append(self._reasons.setdefault(reason, len(self._reasons)))
        self._events += 1

    def call(self, side: str, call, reason: str) -> None:
        """Every row of ``call`` (a :class:`.match_calls.Call` of that side), in execution order."""
        self.calls(side, [call], [reason])

    def calls(self, side: str, calls: list, reasons: list[str]) -> None:
        """:meth:`call` of each call with its reason, in turn."""
        if not calls:
            return
        if side not in self._tables:
            self._tables[side] = calls[0].table.rows_by_call()
        events, numbers, numbered = self._calls[side]
        events.extend(range(self._events, self._events + len(calls)))
        numbers.extend([call.index for call in calls])
        number = self._reasons.setdefault
        numbered.extend([number(reason, len(self._reasons)) for reason in reasons])
        self._events += len(calls)

    def found(self, side: str) -> tuple:
        """(the unmatched row positions of ``side`` in the order their first reason came, the reasons, an object
        array of str)."""
        import numpy as np

        from .match_columns import object_array

        events, positions, reasons = (np.asarray(v, dtype=np.int64) for v in self._rows[side])
        places = np.zeros(len(events), dtype=np.int64)
        call_events, numbers, call_reasons = (np.asarray(v, dtype=np.int64) for v in self._calls[side])
        if len(numbers):
            by_call, starts = self._tables[side]
            first, sizes = starts[numbers], starts[numbers + 1] - starts[numbers]
            total = int(sizes.sum())
            within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            events = np.concatenate([events, np.repeat(call_events, sizes)])
            places = np.concatenate([places, within])
            positions = np.concatenate([positions, by_call[np.repeat(first, sizes) + within]])
            reasons = np.concatenate([reasons, np.repeat(call_reasons, sizes)])
        for block_events, block_places, block_positions, block_reasons in self._blocks[side]:
            events, places = np.concatenate([events, block_events]), np.concatenate([places, block_places])
            positions = np.concatenate([positions, block_positions])
            reasons = np.concatenate([reasons, block_reasons])
        order = np.lexsort((places, events))                    # a call's rows in their order
        positions, reasons = positions[order], reasons[order]
        _, firsts = np.unique(positions, return_index=True)
        kept = np.sort(firsts)                                  # each row at its first reason
        texts = object_array(list(self._reasons))
        return positions[kept], texts[reasons[kept]]
