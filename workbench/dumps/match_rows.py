"""The two tables matching produces: pairs (both sides' statistics per compared tensor) and unmatched rows
(with the reason), collected by a :class:`PairBuilder`."""
from __future__ import annotations

from .match_calls import STATS, Call, Rows, known
from .match_fused_columns import first_orders, side_columns, side_rows, typed
from .match_pairs import PendingPairs
from .match_unmatched import Unmatched
from .match_gather import Layout, constant, gathered, plain_part, resolved, source, typed_part
from .match_columns import TEXT, joined, listed, listed_values, object_array, reordered, series, sort_order, taken
from .rows import repeated

SIDE_FIELDS = ("name", "op", "module_path", "dtype", "shape", "numel", *STATS, "nan_count", "inf_count", "stack_id",
               "source")
PAIR_COLUMNS = ("rank", "step", "order", "level", "relation", "logical_module", "layer", "pass", "io", "slot",
                "call_a", "call_b", *(f"a_{f}" for f in SIDE_FIELDS), *(f"b_{f}" for f in SIDE_FIELDS))
UNMATCHED_COLUMNS = ("side", "rank", "step", "order", "name", "op", "module_path", "layer", "pass", "io", "slot",
                     "dtype", "shape", "reason")


class PairBuilder:
    """Collects pairs and unmatched rows by row position; the tables are built at the end from whole columns
    (the values, order and column types of one dict per row, without building them)."""

    def __init__(self, table_a, table_b):
        self.rows_a, self.rows_b = Rows(table_a), Rows(table_b)
        self._seq = 0
        self._pending = PendingPairs()            # call pairs whose rows are paired at the end (match_pending)
        self._plain = None                        # their row pairs: sequence, A position, B position, call number
        self._calls: list[tuple] = []             # (call_a stem, call_b stem, level, logical text, layer)
        self._fused: list[tuple] = []             # (sequence, what add_fused was given)
        self._call_columns: list | None = None    # self._calls transposed (_call_field)
        self._unmatched = Unmatched()

    def rows(self, side: str) -> Rows:
        return self.rows_a if side == "A" else self.rows_b

    def add_calls(self, call_a: Call, call_b: Call, level: str, logical=None, layer=None) -> None:
        """Two paired calls; their rows are paired by :meth:`match_pending` (all pairs at once)."""
        self._calls.append((call_a.stem, call_b.stem, level, _logical_text(logical), layer))
        self._pending.add(self._seq, self._unmatched.reserve(), call_a, call_b, len(self._calls) - 1)
        self._seq += 1

    def match_pending(self, ops=None) -> None:
        """The rows of every pair :meth:`add_calls` was given, paired (:mod:`.match_pairs`) in the order one
        :func:`.match_pairs.pair_rows` per call pair gave; the unmatched ones recorded at their call pair's place.
        The calls are let go."""
        import numpy as np

        from .match_ops import load_operators

        pairs, unmatched = self._pending.matched(self.rows_a, self.rows_b, ops or load_operators())
        self._pending = PendingPairs()
        event, place, index_a, index_b, number = pairs
        order = np.lexsort((place, event))
        self._plain = (event[order], index_a[order], index_b[order], number[order])
        self._unmatched.extend(*unmatched)

    def add_fused(self, index_a: int, indexes_b: list[int], call_a: str, call_b: str, logical, layer,
                  swap: bool) -> None:
        """One row of a fused module against its parts' rows (``swap``: the fused one is B's); the pair is made
        when the table is (:meth:`_fused_pairs`)."""
        self._fused.append((self._seq, (index_a, indexes_b, call_a, call_b, logical, layer, swap)))
        self._seq += 1

    def _fused_columns(self) -> dict[str, tuple]:
        """PAIR_COLUMNS of every fused pair (in the order added), typed (:mod:`.match_columns`) as the list of the
        values one dict per pair made would be: the sides' fields from whole columns
        (:mod:`.match_fused_columns`), the pair's own fields from A's rows and what :meth:`add_fused` was given."""
        entries = [entry for _, entry in self._fused]
        spans = {"A": side_rows([parts if swap else [index_f] for index_f, parts, *_, swap in entries]),
                 "B": side_rows([[index_f] if swap else parts for index_f, parts, *_, swap in entries])}
        columns: dict[str, tuple] = {}
        for side in ("A", "B"):
            found = side_columns(self.rows(side), spans[side], SIDE_FIELDS)
            columns.update({f"{side.lower()}_{field}": column for field, column in found.items()})
        flat, starts, _ = spans["A"]
        first = flat[starts]                                   # each pair's first A row gives its place
        for name in ("rank", "step", "pass", "io", "slot"):
            columns[name] = typed(taken(self.rows_a, name, first))
        columns["order"] = first_orders(self.rows_a, spans["A"])
        own = (self.rows_a.take_objects("layer", first).tolist() if "layer" in self.rows_a.columns
               else [None] * len(entries))
        columns["layer"] = listed([_layer(entry[5], layer) for entry, layer in zip(entries, own, strict=True)])
        columns["level"], columns["relation"] = listed(["module"] * len(entries)), listed(["fused"] * len(entries))
        texts = {logical: _logical_text(logical) for logical in {entry[4] for entry in entries}}   # per fused call
        columns["logical_module"] = listed([texts[entry[4]] for entry in entries])
        columns["call_a"] = listed([entry[3] if entry[6] else entry[2] for entry in entries])
        columns["call_b"] = listed([entry[2] if entry[6] else entry[3] for entry in entries])
        return columns

    def unmatched_row(self, side: str, index: int, reason: str) -> None:
        """The row at ``index`` of ``side`` is unmatched for ``reason`` (unless a reason came for it before)."""
        self._unmatched.row(side, index, reason)

    def unmatched_call(self, side: str, call: Call, reason: str) -> None:
        """:meth:`unmatched_row` for each of the call's rows (its first reason stays)."""
        self._unmatched.call(side, call, reason)

    def unmatched_calls(self, side: str, calls: list[Call], reasons: list[str]) -> None:
        """:meth:`unmatched_call` of each call with its reason, in turn."""
        self._unmatched.calls(side, calls, reasons)

    def unmatched_numbers(self, side: str, table, numbers, reason) -> None:
        """:meth:`unmatched_call` of the calls numbered ``numbers`` in ``table`` (the side's CallIndex), in turn, for
        ``reason``: a str, or a function of (side, op, module path) (:meth:`.match_unmatched.Unmatched.numbered`)."""
        self._unmatched.numbered(side, table, numbers, reason)

    def pairs_table(self):
        import numpy as np

        if self._plain is None:
            self.match_pending()
        plain_sequence, index_a, index_b, calls = self._plain                 # calls: each pair's call number
        fused = [sequence for sequence, _ in self._fused]
        sequence = np.concatenate([plain_sequence, np.asarray(fused, dtype=np.int64)])
        order = np.argsort(sequence, kind="stable") if fused else None
        fused_columns = self._fused_columns() if fused else {}

        layout = Layout([len(index_a), len(fused)], order) if fused else Layout([len(index_a)])

        def column(name: str) -> tuple:
            plain = self._plain_part(name, index_a, index_b, calls)
            if order is None:
                return gathered([plain], layout) or self._plain_column(name, index_a, index_b, calls)
            fused_column = fused_columns.pop(name)
            found = gathered([plain, typed_part(fused_column)], layout)
            if found is not None:
                return found
            values = (resolved(gathered([plain], Layout([len(index_a)]))) if plain is not None
                      else self._plain_column(name, index_a, index_b, calls))
            return reordered(joined([values, fused_column]), order)

        return _frame(PAIR_COLUMNS, len(sequence), column, ("step", "rank", "order"))

    def _plain_part(self, name: str, index_a, index_b, calls):
        """One PAIR_COLUMNS column of the one-to-one pairs as a part of a :class:`.match_gather.Gather` (read from
        the tables' and the calls' own arrays), or None where :meth:`_plain_column` must make it."""
        if name in ("rank", "step", "order", "pass", "io", "slot"):
            typed = source(self.rows_a, name)
            return None if typed is None else plain_part(typed, index_a)
        if name in ("level", "logical_module", "call_a", "call_b"):
            values = self._call_field({"call_a": 0, "call_b": 1, "level": 2, "logical_module": 3}[name])
            return (values, None, calls), TEXT, values.dtype                  # stems and labels are str
        if name == "relation":
            return constant("same", len(calls))
        if name == "layer":
            return typed_part(listed(self._plain_layers(index_a, calls)))
        rows, positions = (self.rows_a, index_a) if name.startswith("a_") else (self.rows_b, index_b)
        if name[2:] not in rows.columns:
            return constant(None, len(calls))
        typed = source(rows, name[2:])
        return None if typed is None else plain_part(typed, positions)

    def _plain_column(self, name: str, index_a, index_b, calls) -> tuple:
        """One PAIR_COLUMNS column of the one-to-one pairs, as :meth:`_pair` makes it, from whole columns
        (typed: :mod:`.match_columns`); ``calls``: each pair's call number."""
        if name in ("rank", "step", "order", "pass", "io", "slot"):
            return taken(self.rows_a, name, index_a)
        if name in ("level", "logical_module", "call_a", "call_b"):
            at = {"call_a": 0, "call_b": 1, "level": 2, "logical_module": 3}[name]
            return self._call_field(at)[calls], TEXT                          # stems and labels are str
        if name == "relation":
            return ["same"] * len(calls), TEXT
        if name == "layer":
            return listed(self._plain_layers(index_a, calls))
        rows, positions = (self.rows_a, index_a) if name.startswith("a_") else (self.rows_b, index_b)
        field = name[2:]
        return taken(rows, field, positions) if field in rows.columns else ([None] * len(calls), TEXT)

    def _plain_layers(self, index_a, calls) -> list:
        """:func:`_layer` of every one-to-one pair: its call's layer where known (found once per call), else its A
        row's own. An Int64 column's values are int or None, so there the choice is a whole-array ``where``."""
        import numpy as np
        import pandas as pd

        given = self._call_field(4)
        own = self.rows_a.take_objects("layer", index_a)
        if not isinstance(self.rows_a.table["layer"].dtype, pd.Int64Dtype):
            return [_layer(layer, mine) for layer, mine in zip(given[calls].tolist(), own.tolist(), strict=True)]
        use = np.fromiter((layer is not None and known(layer) for layer in given.tolist()), bool, len(given))
        return np.where(use[calls], given[calls], own).tolist()

    def _call_field(self, at: int):
        """One field of every paired call (:meth:`add_calls`) as an object array, indexed by call number (the
        calls transposed once, for all five fields)."""
        if self._call_columns is None or len(self._call_columns[0]) != len(self._calls):
            fields = list(zip(*self._calls, strict=True)) or [()] * 5
            self._call_columns = [object_array(list(values)) for values in fields]
        return self._call_columns[at]

    def unmatched_table(self):
        if self._plain is None:
            self.match_pending()
        found = {side: self._unmatched.found(side) for side in ("A", "B")}     # (positions, reasons) in order

        layout = Layout([len(positions) for positions, _ in found.values()])

        def column(name: str) -> tuple:
            return self._unmatched_gathered(name, found, layout) or self._unmatched_joined(name, found)

        return _frame(UNMATCHED_COLUMNS, sum(len(positions) for positions, _ in found.values()), column,
                      ("side", "step", "rank", "order"))

    def unmatched_sides(self):
        """``unmatched_table()[["side"]]`` (all a CSV report keeps of it: each side's count), from the counts alone:
        ``side`` is the table's first sort key, so the column is A's rows and then B's, whatever the others hold."""
        import numpy as np
        import pandas as pd

        if self._plain is None:
            self.match_pending()
        sides = np.concatenate([repeated(side, self._unmatched.count(side)) for side in ("A", "B")])
        return pd.DataFrame({"side": sides}, index=pd.RangeIndex(len(sides)), copy=False)

    def _unmatched_gathered(self, name: str, found: dict, layout: Layout):
        """An UNMATCHED_COLUMNS column as a :class:`.match_gather.Gather` of both sides' own arrays, or None."""
        import numpy as np

        parts = []
        for side, (positions, reasons) in found.items():
            if name == "side":
                parts.append(constant(side, len(positions)))
            elif name == "reason":
                parts.append(((reasons, None, np.arange(len(reasons))), TEXT, reasons.dtype))
            elif name not in self.rows(side).columns:
                parts.append(constant(None, len(positions)))
            else:
                typed = source(self.rows(side), name)
                if typed is None:
                    return None
                parts.append(plain_part(typed, positions))
        return gathered(parts, layout)

    def _unmatched_joined(self, name: str, found: dict) -> tuple:
        """An UNMATCHED_COLUMNS column taken side by side and joined (any column types)."""
        parts: list = []
        for side, (positions, reasons) in found.items():
            rows = self.rows(side)
            if name == "side":
                parts.append((repeated(side, len(positions)), TEXT))
            elif name == "reason":
                parts.append((reasons, TEXT))
            else:
                parts.append(taken(rows, name, positions) if name in rows.columns
                             else ([None] * len(positions), TEXT))
        return joined(parts)


def _layer(given, own):
    layer = own if given is None or not known(given) else given
    return layer if known(layer) else None


def _frame(names: tuple[str, ...], size: int, column, keys: tuple[str, ...]):
    """The DataFrame one dict per row would make (the same column types), stably sorted by ``keys``, built one
    column at a time from ``column(name)`` (typed values, :mod:`.match_columns`; untyped ones by a list's inference,
    which is the records' inference): the rows are put in order before they become columns, and only one column's
    Python objects exist at a time."""
    import pandas as pd

    if not size:
        return pd.DataFrame([], columns=list(names)).sort_values(list(keys), kind="stable").reset_index(drop=True)
    found = {key: resolved(column(key)) for key in keys}
    order = sort_order([found[key] for key in keys])
    if order is None:
        order = pd.DataFrame({key: pd.Series(listed_values(found[key][0])) for key in keys}).sort_values(
            list(keys), kind="stable").index.to_numpy()
    index = pd.RangeIndex(size)
    made = {name: series(found.pop(name) if name in found else column(name), order, index) for name in names}
    return pd.DataFrame(made, index=index, copy=False)     # each column fresh: not copied again as setitem did


def _logical_text(logical) -> str:
    if not logical:
        return ""
    names = [str(n) for n in logical]
    if len(names) == 1 and names[0].startswith(("path:", "map:")):
        return ""
    return ",".join(names)
