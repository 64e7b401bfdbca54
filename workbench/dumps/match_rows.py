"""The two tables matching produces: pairs (both sides' statistics per compared tensor) and unmatched rows
(with the reason), collected by a :class:`PairBuilder`."""
from __future__ import annotations

from .match_calls import STATS, Call, Rows, combine, known

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
        self._fused: list[tuple] = []             # (sequence, pair dict)
        self._reasons: dict[tuple[str, int], str] = {}

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
        """One row of a fused module against its parts' rows (``swap``: the fused one is B's)."""
        side_f, side_p = ("B", "A") if swap else ("A", "B")
        row_a = self.rows(side_f).row(index_a)
        rows_b = [self.rows(side_p).row(i) for i in indexes_b]
        self._fused.append((self._seq, self._pair(row_a, rows_b, call_a, call_b, "module", "fused", logical, layer,
                                                  swap)))
        self._seq += 1

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
        if (side, index) not in self._reasons:
            self._reasons[(side, index)] = reason

    def unmatched_call(self, side: str, call: Call, reason: str) -> None:
        for index in call.rows:
            self.unmatched_row(side, index, reason)

    def pairs_table(self):
        import numpy as np

        columns = self._plain_columns()
        if self._fused:
            sequence = [s for s, *_ in self._plain] + [s for s, _ in self._fused]
            for name in PAIR_COLUMNS:
                columns[name] = columns[name] + [pair[name] for _, pair in self._fused]
            order = np.argsort(np.asarray(sequence), kind="stable").tolist()
            columns = {name: [values[i] for i in order] for name, values in columns.items()}
        frame = _records_frame(columns, PAIR_COLUMNS)
        return frame.sort_values(["step", "rank", "order"], kind="stable").reset_index(drop=True)

    def _plain_columns(self) -> dict[str, list]:
        """PAIR_COLUMNS of the one-to-one pairs, as :meth:`_pair` makes them, taken from whole columns."""
        import numpy as np

        index_a = np.asarray([a for _, a, _, _ in self._plain], dtype=np.int64)
        index_b = np.asarray([b for _, _, b, _ in self._plain], dtype=np.int64)
        calls = [self._calls[c] for _, _, _, c in self._plain]
        take_a = {name: self.rows_a.array(name)[index_a].tolist() for name in self.rows_a.arrays}
        take_b = {name: self.rows_b.array(name)[index_b].tolist() for name in self.rows_b.arrays}
        out = {name: take_a[name] for name in ("rank", "step", "order", "pass", "io", "slot")}
        out["level"] = [call[2] for call in calls]
        out["relation"] = ["same"] * len(calls)
        out["logical_module"] = [call[3] for call in calls]
        out["layer"] = [_layer(call[4], own) for call, own in zip(calls, take_a["layer"], strict=True)]
        out["call_a"] = [call[0] for call in calls]
        out["call_b"] = [call[1] for call in calls]
        for field in SIDE_FIELDS:
            out[f"a_{field}"] = take_a[field] if field in take_a else [None] * len(calls)
            out[f"b_{field}"] = take_b[field] if field in take_b else [None] * len(calls)
        return out

    def unmatched_table(self):
        import numpy as np

        columns: dict[str, list] = {name: [] for name in UNMATCHED_COLUMNS}
        for side in ("A", "B"):
            found = [(index, reason) for (side_, index), reason in self._reasons.items() if side_ == side]
            rows = self.rows(side)
            positions = np.asarray([index for index, _ in found], dtype=np.int64)
            columns["side"] += [side] * len(found)
            for name in UNMATCHED_COLUMNS[1:-1]:
                columns[name] += rows.array(name)[positions].tolist() if name in rows.arrays else [None] * len(found)
            columns["reason"] += [reason for _, reason in found]
        frame = _records_frame(columns, UNMATCHED_COLUMNS)
        return frame.sort_values(["side", "step", "rank", "order"], kind="stable").reset_index(drop=True)


def _layer(given, own):
    layer = own if given is None or not known(given) else given
    return layer if known(layer) else None


def _records_frame(columns: dict[str, list], names: tuple[str, ...]):
    """The DataFrame one dict per row would make (same column types), from columns of Python values."""
    import pandas as pd

    return pd.DataFrame(list(zip(*(columns[name] for name in names), strict=True)), columns=list(names))


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
