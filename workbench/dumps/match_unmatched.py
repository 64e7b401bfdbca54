"""The unmatched rows of one matching: recorded as events (a row, or all rows of a call, with a reason), expanded with
arrays when the table is made. A row keeps its first reason and its place is where that reason came: what a dict
``{row position: reason}`` filled by ``setdefault`` in the same order holds (``tests/test_compare_match_features.py``),
without a Python step per row of the ~100k unmatched calls. Calls given as numbers (:meth:`Unmatched.numbered`) have no
Python step per call either: their reasons are made when the table is, once per distinct (op, module path)."""
from __future__ import annotations


class Unmatched:
    def __init__(self):
        self._reasons: dict[str, int] = {}                  # reason text -> its number
        self._rows = {"A": ([], [], []), "B": ([], [], [])}     # side -> (event numbers, row positions, reasons)
        self._calls = {"A": ([], [], []), "B": ([], [], [])}    # side -> (event numbers, call numbers, reasons)
        self._tables: dict[str, object] = {}                # side -> its calls' CallIndex
        self._numbered = {"A": [], "B": []}    # side -> (first event, call numbers, reason text or describe) blocks
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
        self._tables.setdefault(side, calls[0].table)
        events, numbers, numbered = self._calls[side]
        events.extend(range(self._events, self._events + len(calls)))
        numbers.extend([call.index for call in calls])
        number = self._reasons.setdefault
        numbered.extend([number(reason, len(self._reasons)) for reason in reasons])
        self._events += len(calls)

    def numbered(self, side: str, table, numbers, reason) -> None:
        """:meth:`call` of the calls numbered ``numbers`` (int64 array) in ``table`` (the side's
        :class:`.match_calls.CallIndex`), in turn: each for ``reason``, a str, or a function of (side, op, module path)
        giving it, called once per distinct (op, module path) of all the calls given that function."""
        if not len(numbers):
            return
        self._tables.setdefault(side, table)
        self._numbered[side].append((self._events, numbers, reason))
        self._events += len(numbers)

    def _numbered_calls(self, side: str) -> tuple:
        """(events, call numbers, reason numbers) of the calls given by :meth:`numbered`, as int64 arrays (in no
        particular order: :meth:`found` sorts by event)."""
        import numpy as np

        parts = [(np.zeros(0, dtype=np.int64),) * 3]
        by_describe: dict = {}
        for first, numbers, reason in self._numbered[side]:
            events = first + np.arange(len(numbers), dtype=np.int64)
            if isinstance(reason, str):
                number = self._reasons.setdefault(reason, len(self._reasons))
                parts.append((events, numbers, np.full(len(numbers), number, dtype=np.int64)))
            else:
                by_describe.setdefault(reason, []).append((events, numbers))
        for describe, blocks in by_describe.items():
            events, numbers = (np.concatenate([block[k] for block in blocks]) for k in range(2))
            parts.append((events, numbers, self._described(side, numbers, describe)))
        return tuple(np.concatenate([part[k] for part in parts]) for k in range(3))

    def _described(self, side: str, numbers, describe):
        """The reason number of each call of ``numbers``: ``describe`` called once per distinct (op, module path)."""
        import numpy as np

        from .match_codes import tuple_codes
        from .match_columns import object_array

        table = self._tables[side]
        ops, modules = object_array(table.ops)[numbers], object_array(table.modules)[numbers]
        codes = tuple_codes((ops, modules))                     # numbered in order of first appearance
        _, firsts = np.unique(codes, return_index=True)
        number = self._reasons.setdefault
        distinct = [number(describe(side, op, module), len(self._reasons))
                    for op, module in zip(ops[firsts].tolist(), modules[firsts].tolist(), strict=True)]
        return np.asarray(distinct, dtype=np.int64)[codes]

    def found(self, side: str) -> tuple:
        """(the unmatched row positions of ``side`` in the order their first reason came, the reasons, an object
        array of str)."""
        import numpy as np

        from .match_columns import object_array

        events, places, positions, reasons = self._expanded(side)
        order = np.lexsort((places, events))                    # a call's rows in their order
        positions, reasons = positions[order], reasons[order]
        _, firsts = np.unique(positions, return_index=True)
        kept = np.sort(firsts)                                  # each row at its first reason
        texts = object_array(list(self._reasons))
        return positions[kept], texts[reasons[kept]]

    def count(self, side: str) -> int:
        """How many rows of ``side`` are unmatched (``len(found(side)[0])``), without ordering them or making the
        reasons of the calls given by :meth:`numbered` (a CSV report counts the unmatched rows only)."""
        import numpy as np

        numbers = np.concatenate([np.asarray(self._calls[side][1], dtype=np.int64),
                                  *(numbers for _, numbers, _ in self._numbered[side])])
        positions = np.concatenate([np.asarray(self._rows[side][1], dtype=np.int64), self._call_rows(side, numbers)[2],
                                    *(block[2] for block in self._blocks[side])])
        if not len(positions):
            return 0
        seen = np.zeros(int(positions.max()) + 1, dtype=bool)     # a mask, not np.unique's sort of 250k positions
        seen[positions] = True
        return int(np.count_nonzero(seen))

    def _expanded(self, side: str) -> tuple:
        """(events, places, row positions, reason numbers) of every unmatched row event of ``side``, a call's rows
        expanded, as int64 arrays in no particular order."""
        import numpy as np

        events, positions, row_reasons = (np.asarray(v, dtype=np.int64) for v in self._rows[side])
        places = np.zeros(len(events), dtype=np.int64)
        call_events, numbers, call_reasons = (np.concatenate([np.asarray(v, dtype=np.int64), more]) for v, more in
                                              zip(self._calls[side], self._numbered_calls(side), strict=True))
        sizes, within, call_positions = self._call_rows(side, numbers)
        parts = [(events, places, positions, row_reasons),
                 (np.repeat(call_events, sizes), within, call_positions, np.repeat(call_reasons, sizes)),
                 *self._blocks[side]]
        return tuple(np.concatenate([part[k] for part in parts]) for k in range(4))

    def _call_rows(self, side: str, numbers) -> tuple:
        """(each call's row count, each row's place in its call, the rows' positions) of the calls numbered
        ``numbers`` (int64 array) of ``side``, the calls one after the other."""
        import numpy as np

        from .match_columns import expanded

        if not len(numbers):
            return (np.zeros(0, dtype=np.int64),) * 3
        by_call, starts = self._tables[side].rows_by_call()
        first, sizes = starts[numbers], starts[numbers + 1] - starts[numbers]
        _, within = expanded(sizes)
        return sizes, within, by_call[np.repeat(first, sizes) + within]
