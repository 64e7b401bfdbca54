"""The rows of every pair of paired calls matched at once (what :func:`.match_calls.pair_rows` does for one pair):
inputs and outputs position by position with arrays (each pair's io rows are slices of the side's
:class:`.match_calls.CallIndex`), parameters by name in Python (module calls only), the unmatched rows with their
reasons. Every row pair and unmatched row carries its call pair's event number and a place inside it, so that
sorting by them gives the order of one :func:`pair_rows` per call pair in the order the pairs were made
(``tests/test_compare_match_features.py`` holds both equal). When a side's element counts are not an integer column
(the schema's Int64, or int64), :func:`pair_rows` itself runs per pair.
"""
from __future__ import annotations

from .match_calls import Call, Rows, call_numbers, known
from .match_codes import IO_CODE, IOS
from .match_columns import expanded
from .match_names import param_name

PHASES = 3           # places inside an io: phase 0 the zipped rows, 1 A's rows past B's, 2 B's past A's


class PendingPairs:
    """Call pairs whose rows are matched together (:meth:`matched`)."""

    def __init__(self):
        self.events: list[int] = []          # its row pairs' sequence number (shared with the fused pairs)
        self.unmatched: list[int] = []       # its unmatched rows' event number (match_unmatched.Unmatched)
        self.calls_a: list = []
        self.calls_b: list = []
        self.numbers: list[int] = []         # the call pair's number (PairBuilder._calls)

    def add(self, event: int, unmatched: int, call_a, call_b, number: int) -> None:
        self.events.append(event)
        self.unmatched.append(unmatched)
        self.calls_a.append(call_a)
        self.calls_b.append(call_b)
        self.numbers.append(number)

    def matched(self, rows_a: Rows, rows_b: Rows, ops) -> tuple:
        """(pairs: event, place, A position, B position, call number as int64 arrays; unmatched: event, place,
        side (0 A, 1 B), position as int64 arrays and the reasons, a list), in no particular order."""
        counts = [_counts(rows) for rows in (rows_a, rows_b)]
        pairs, unmatched = _Collected(texts=False), _Collected(texts=True)
        if not self.calls_a:
            return pairs.arrays(), unmatched.arrays()
        numbers = [call_numbers(calls) for calls in (self.calls_a, self.calls_b)]     # once for every io
        if any(found is None for found in counts):
            ios = ("input", "output", "parameter")
        else:
            ios = ("parameter",)
            arrays = _Arrays(self)
            for io in ("input", "output"):
                _zipped(self, arrays, io, numbers, counts, rows_a, rows_b, pairs, unmatched)
        chosen = range(len(self.calls_a))
        if len(ios) == 1:                                   # only the pairs with a parameter on either side
            code = IO_CODE["parameter"]
            chosen = ((_slices(self.calls_a, numbers[0], code)[1] > 0) |
                      (_slices(self.calls_b, numbers[1], code)[1] > 0)).nonzero()[0]
        for k in chosen.tolist() if len(ios) == 1 else chosen:
            call_a, call_b = self.calls_a[k], self.calls_b[k]
            found, reasons = pair_rows(rows_a, call_a, rows_b, call_b, ops, ios=ios)
            major = IO_CODE["parameter"] * PHASES if len(ios) == 1 else 0
            for j, (index_a, index_b) in enumerate(found):
                pairs.add(self.events[k], major, j, index_a, index_b, self.numbers[k])
            for j, (side, index, reason) in enumerate(reasons):
                unmatched.add(self.unmatched[k], major, j, 0 if side == "A" else 1, index, reason)
        return pairs.arrays(), unmatched.arrays()


class _Collected:
    """Rows (event, major place, minor place, three values) gathered one at a time and as arrays; the place
    becomes one int64 (major * stride + minor, the stride past every minor)."""

    def __init__(self, texts: bool):
        self.texts = texts                     # the last value a str (else an int)
        self.one: list[list] = [[], [], [], [], [], []]
        self.blocks: list[tuple] = []

    def add(self, event: int, major: int, minor: int, x, y, z) -> None:
        for column, value in zip(self.one, (event, major, minor, x, y, z), strict=True):
            column.append(value)

    def extend(self, events, major: int, minors, x, y, z) -> None:
        """Arrays of one length (``z`` an array or a list), all at ``major``."""
        import numpy as np

        self.blocks.append((events, np.full(len(events), major, dtype=np.int64), minors, x, y, z))

    def arrays(self) -> tuple:
        import numpy as np

        parts = [(*(np.asarray(c, dtype=np.int64) for c in self.one[:5]), self.one[5]), *self.blocks]
        event, major, minor, x, y = (np.concatenate([part[k] for part in parts]).astype(np.int64) for k in range(5))
        z = [part[5] for part in parts]
        z = ([v for value in z for v in value] if self.texts
             else np.concatenate([np.asarray(value, dtype=np.int64) for value in z]))
        stride = int(minor.max(initial=0)) + 1
        return event, major * stride + minor, x, y, z


def _counts(rows: Rows):
    """(element counts as int64, known mask) of an Int64 or int64 column, else None."""
    import numpy as np

    column = rows.table["numel"]
    dtype = str(column.dtype)
    if dtype == "int64":
        values = column.to_numpy()
        return values, np.ones(len(values), dtype=bool)
    if dtype == "Int64":
        return column.to_numpy(dtype=np.int64, na_value=0), ~column.isna().to_numpy()
    return None


def _slices(calls: list, numbers, code: int) -> tuple:
    """(where each call's rows of io ``code`` start in its side's by_io, how many, by_io as an array); ``numbers``:
    :func:`.match_calls.call_numbers` of ``calls``."""
    index = calls[0].table
    at = index.io_at_array
    starts = at[4 * numbers + code]
    return starts, at[4 * numbers + code + 1] - starts, index.by_io_array


class _Arrays:
    """The pending pairs' events, unmatched events, call pair numbers and backward flags as arrays, made once
    for both ios."""

    def __init__(self, pending: PendingPairs):
        import numpy as np

        self.events, self.numbers = np.asarray(pending.events, np.int64), np.asarray(pending.numbers, np.int64)
        self.later = np.asarray(pending.unmatched, np.int64)
        self.backward = np.fromiter((call.pass_ == "backward" for call in pending.calls_a), bool,
                                    len(pending.calls_a))


def _zipped(pending: PendingPairs, arrays: _Arrays, io: str, side_numbers: list, counts, rows_a: Rows, rows_b: Rows,
            pairs: _Collected, unmatched: _Collected) -> None:
    """One io (input or output) of every pending call pair: :func:`pair_rows`' loop over it, with arrays."""
    import numpy as np

    code = IO_CODE[io]
    major = code * PHASES
    (start_a, size_a, by_a), (start_b, size_b, by_b) = (_slices(calls, numbers, code) for calls, numbers in
                                                        zip((pending.calls_a, pending.calls_b), side_numbers,
                                                            strict=True))
    events, numbers, later = arrays.events, arrays.numbers, arrays.later
    if io == "output":               # a backward call's outputs (its inputs' gradients) only when as many
        apart = arrays.backward & (size_a != size_b)
        if apart.any():
            for side, start, size, by in ((0, start_a, size_a, by_a), (1, start_b, size_b, by_b)):
                owner, within = expanded(np.where(apart, size, 0))
                texts = [f"backward outputs differ in number (A {x}, B {y}): the frameworks record different "
                         "gradients for this call, so they are not compared slot by slot"
                         for x, y in zip(size_a[owner].tolist(), size_b[owner].tolist(), strict=True)]
                unmatched.extend(later[owner], major + 1 + side, within, np.full(len(owner), side),
                                 by[start[owner] + within], texts)
            size_a, size_b = np.where(apart, 0, size_a), np.where(apart, 0, size_b)
    owner, within = expanded(np.minimum(size_a, size_b))
    at_a, at_b = by_a[start_a[owner] + within], by_b[start_b[owner] + within]
    (numel_a, known_a), (numel_b, known_b) = counts
    differ = known_a[at_a] & known_b[at_b] & (numel_a[at_a] != numel_b[at_b])
    same = ~differ
    pairs.extend(events[owner[same]], major, within[same], at_a[same], at_b[same], numbers[owner[same]])
    if differ.any():
        shape_a, shape_b = (rows.take_objects("shape", at[differ]).tolist() for rows, at in ((rows_a, at_a),
                                                                                           (rows_b, at_b)))
        texts = [f"element counts differ: {x or 'scalar'} (A) vs {y or 'scalar'} (B)"       # the differing rows' only
                 for x, y in zip(shape_a, shape_b, strict=True)]
        for side, at in ((0, at_a), (1, at_b)):
            unmatched.extend(later[owner[differ]], major, 2 * within[differ] + side, np.full(len(texts), side),
                             at[differ], texts)
    for side, start, size, other, by in ((0, start_a, size_a, size_b, by_a), (1, start_b, size_b, size_a, by_b)):
        owner, within = expanded(np.maximum(size - other, 0))
        if not len(owner):
            continue
        place = other[owner] + within                   # its position among its call's rows of this io
        calls, name = (pending.calls_b, "B") if side == 0 else (pending.calls_a, "A")
        texts = [f"{calls[k].stem} ({name}) has no {io} {p}" for k, p in zip(owner.tolist(), place.tolist(),
                                                                             strict=True)]
        unmatched.extend(later[owner], major + 1 + side, within, np.full(len(owner), side), by[start[owner] + place],
                         texts)


def pair_rows(rows_a: Rows, call_a: Call, rows_b: Rows, call_b: Call, ops, ios: tuple[str, ...] = IOS
              ) -> tuple[list, list]:
    """Rows of two paired calls matched by io: parameters by (normalised) parameter name, inputs and
    outputs position by position among the tensors of that io, only with the same element count. The
    outputs of a backward call (the gradients of its inputs) are paired only when both sides record as many
    (msprobe's torch ``Functional.linear`` backward records one tensor, MindSpore's ``matmul`` two).
    Returns (pairs of row positions, unmatched (side, position, reason)), for ``ios`` only when given
    (:class:`PendingPairs` pairs the inputs and outputs of all pairs at once)."""
    pairs: list[tuple] = []
    unmatched: list[tuple] = []
    numel_a, numel_b = rows_a["numel"], rows_b["numel"]
    for io in ios:
        part_a, part_b = call_a.io_rows(io), call_b.io_rows(io)
        if not part_a and not part_b:
            continue
        if io == "parameter":
            names_a, names_b = rows_a["name"], rows_b["name"]
            by_key = {ops.param_class(param_name(names_b[i])): i for i in part_b}
            used = set()
            for index in part_a:
                key = ops.param_class(param_name(names_a[index]))
                other = by_key.get(key)
                if other is None:
                    unmatched.append(("A", index, f"parameter {key!r} not in {call_b.stem} (B)"))
                else:
                    used.add(other)
                    _pair_or_reason(rows_a, index, rows_b, other, pairs, unmatched)
            unmatched += [("B", i, f"parameter not in {call_a.stem} (A)") for i in part_b if i not in used]
            continue
        if io == "output" and call_a.pass_ == "backward" and len(part_a) != len(part_b):
            reason = (f"backward outputs differ in number (A {len(part_a)}, B {len(part_b)}): the frameworks record "
                      "different gradients for this call, so they are not compared slot by slot")
            unmatched += [("A", i, reason) for i in part_a] + [("B", i, reason) for i in part_b]
            continue
        for index_a, index_b in zip(part_a, part_b, strict=False):
            x, y = numel_a[index_a], numel_b[index_b]
            if x is not None and y is not None and x == x and y == y and int(x) != int(y):
                _pair_or_reason(rows_a, index_a, rows_b, index_b, pairs, unmatched)
            else:
                pairs.append((index_a, index_b))
        if len(part_a) != len(part_b):
            unmatched += [("A", i, f"{call_b.stem} (B) has no {io} {k + len(part_b)}")
                          for k, i in enumerate(part_a[len(part_b):])]
            unmatched += [("B", i, f"{call_a.stem} (A) has no {io} {k + len(part_a)}")
                          for k, i in enumerate(part_b[len(part_a):])]
    return pairs, unmatched


def _pair_or_reason(rows_a: Rows, index_a, rows_b: Rows, index_b, pairs: list, unmatched: list) -> None:
    numel_a, numel_b = rows_a["numel"][index_a], rows_b["numel"][index_b]
    if known(numel_a) and known(numel_b) and int(numel_a) != int(numel_b):
        shape_a, shape_b = rows_a["shape"][index_a], rows_b["shape"][index_b]
        reason = f"element counts differ: {shape_a or 'scalar'} (A) vs {shape_b or 'scalar'} (B)"
        unmatched.append(("A", index_a, reason))
        unmatched.append(("B", index_b, reason))
    else:
        pairs.append((index_a, index_b))
