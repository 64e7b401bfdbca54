"""The two tables matching produces: pairs (both sides' statistics per compared tensor) and unmatched rows
(with the reason), collected by a :class:`PairBuilder`."""
from __future__ import annotations

from operator import itemgetter

from .match_calls import STATS, Call, Rows, combine, known
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
        self._plain: list[tuple] = []             # (sequence, A position, B position, call index)
        self._calls: list[tuple] = []             # (call_a stem, call_b stem, level, logical text, layer)
        self._fused: list[tuple] = []             # (sequence, what add_fused was given)
        self._reasons: dict[str, dict[int, str]] = {"A": {}, "B": {}}      # side -> row position -> reason
        self._texts: dict[str, str] = {}

    def rows(self, side: str) -> Rows:
        return self.rows_a if side == "A" else self.rows_b

    def add_calls(self, call_a: Call, call_b: Call, level: str, rows: tuple[list, list], logical=None,
                  layer=None) -> None:
        pairs, unmatched = rows
        if pairs:
            self._calls.append((call_a.stem, call_b.stem, level, _logical_text(logical), layer))
            number = len(self._calls) - 1
            for index_a, index_b in pairs:
                self._plain.append((self._seq, index_a, index_b, number))
                self._seq += 1
        for side, index, reason in unmatched:
            self.unmatched_row(side, index, reason)

    def add_fused(self, index_a: int, indexes_b: list[int], call_a: str, call_b: str, logical, layer,
                  swap: bool) -> None:
        """One row of a fused module against its parts' rows (``swap``: the fused one is B's); the pair is made
        when the table is (:meth:`_fused_pairs`)."""
        self._fused.append((self._seq, (index_a, indexes_b, call_a, call_b, logical, layer, swap)))
        self._seq += 1

    def _fused_pairs(self) -> list[tuple[int, dict]]:
        """(sequence, pair dict) of every fused pair, its rows read once per side."""
        wanted: dict[str, set] = {"A": set(), "B": set()}
        for _, (index_f, indexes_p, *_, swap) in self._fused:
            wanted["B" if swap else "A"].add(index_f)
            wanted["A" if swap else "B"].update(indexes_p)
        rows = {side: self.rows(side).rows_at(sorted(found)) for side, found in wanted.items()}
        pairs = []
        for sequence, (index_f, indexes_p, call_a, call_b, logical, layer, swap) in self._fused:
            side_f, side_p = ("B", "A") if swap else ("A", "B")
            pairs.append((sequence, self._pair(rows[side_f][index_f], [rows[side_p][i] for i in indexes_p], call_a,
                                               call_b, "module", "fused", logical, layer, swap)))
        return pairs

    def _pair(self, row_a: dict, rows_b: list[dict], call_a: str, call_b: str, level: str, relation: str,
              logical, layer, swap: bool = False) -> dict:
        side_a, side_b = _side(row_a), _side(rows_b[0]) if len(rows_b) == 1 else _combined(rows_b)
        if swap:
            side_a, side_b, call_a, call_b = side_b, side_a, call_b, call_a
        first = row_a if not swap else rows_b[0]
        if layer is None or not known(layer):
            layer = first.get("layer")
        return {"rank": first["rank"], "step": first["step"], "order": min(r["order"] for r in ([row_a] if not swap
                                                                                                  else rows_b)),
                "level": level, "relation": relation, "logical_module": _logical_text(logical),
                "layer": layer if known(layer) else None, "pass": first["pass"], "io": first["io"],
                "slot": first["slot"], "call_a": call_a, "call_b": call_b,
                **{f"a_{k}": v for k, v in side_a.items()}, **{f"b_{k}": v for k, v in side_b.items()}}

    def unmatched_row(self, side: str, index: int, reason: str) -> None:
        if index not in self._reasons[side]:
            self._reasons[side][index] = self._texts.setdefault(reason, reason)   # one object per text

    def unmatched_call(self, side: str, call: Call, reason: str) -> None:
        """:meth:`unmatched_row` for each of the call's rows (its first reason stays)."""
        reason = self._texts.setdefault(reason, reason)
        keep = self._reasons[side].setdefault
        for index in call.rows:
            keep(index, reason)

    def pairs_table(self):
        import numpy as np

        plain = np.asarray(self._plain, dtype=np.int64).reshape(-1, 4)      # (sequence, A, B, call) per pair
        index_a, index_b = plain[:, 1], plain[:, 2]
        calls = plain[:, 3]                                                   # each pair's call number
        fused = self._fused_pairs() if self._fused else []
        sequence = np.concatenate([plain[:, 0], np.asarray([s for s, _ in fused], dtype=np.int64)])
        order = np.argsort(sequence, kind="stable") if fused else None

        records = list(map(itemgetter(*PAIR_COLUMNS), (pair for _, pair in fused)))     # fused pairs, transposed:
        fused_columns = dict(zip(PAIR_COLUMNS, map(list, zip(*records, strict=True)), strict=True)) if fused else {}

        def column(name: str) -> tuple:
            values = self._plain_column(name, index_a, index_b, calls)
            if order is None:
                return values
            return reordered(joined([values, listed(fused_columns.pop(name))]), order)

        return _frame(PAIR_COLUMNS, len(sequence), column, ("step", "rank", "order"))

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
            given = self._call_field(4)[calls]
            return listed([_layer(layer, own) for layer, own in zip(given.tolist(), self.rows_a.take("layer", index_a),
                                                                   strict=True)])
        rows, positions = (self.rows_a, index_a) if name.startswith("a_") else (self.rows_b, index_b)
        field = name[2:]
        return taken(rows, field, positions) if field in rows.columns else ([None] * len(calls), TEXT)

    def _call_field(self, at: int):
        """One field of every paired call (:meth:`add_calls`) as an object array, indexed by call number."""
        return object_array([call[at] for call in self._calls])

    def unmatched_table(self):
        import numpy as np

        found = self._reasons                      # side -> {row position: reason}, in the order recorded
        positions = {side: np.fromiter(items, np.int64, len(items)) for side, items in found.items()}

        def column(name: str) -> tuple:
            parts: list = []
            for side, items in found.items():
                rows = self.rows(side)
                if name == "side":
                    parts.append((repeated(side, len(items)), TEXT))
                elif name == "reason":
                    parts.append((list(items.values()), TEXT))
                else:
                    parts.append(taken(rows, name, positions[side]) if name in rows.columns
                                 else ([None] * len(items), TEXT))
            return joined(parts)

        return _frame(UNMATCHED_COLUMNS, sum(len(items) for items in found.values()), column,
                      ("side", "step", "rank", "order"))


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
    found = {key: column(key) for key in keys}
    order = sort_order([found[key] for key in keys])
    if order is None:
        order = pd.DataFrame({key: pd.Series(listed_values(found[key][0])) for key in keys}).sort_values(
            list(keys), kind="stable").index.to_numpy()
    frame = pd.DataFrame(index=pd.RangeIndex(size))
    for name in names:
        frame[name] = series(found.pop(name) if name in found else column(name), order, frame.index)
    return frame


def _side(row: dict) -> dict:
    return {k: row.get(k) for k in SIDE_FIELDS}


def _combined(rows: list[dict]) -> dict:
    joined = {k: "+".join(str(r.get(k) or "") for r in rows) for k in ("name", "op", "module_path", "shape",
                                                                      "stack_id", "source")}
    return {**joined, "dtype": rows[0].get("dtype"), **combine(rows)}


def _logical_text(logical) -> str:
    if not logical:
        return ""
    names = [str(n) for n in logical]
    if len(names) == 1 and names[0].startswith(("path:", "map:")):
        return ""
    return ",".join(names)
