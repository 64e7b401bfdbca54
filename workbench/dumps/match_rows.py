"""The two tables matching produces: pairs (both sides' statistics per compared tensor) and unmatched rows
(with the reason), collected by a :class:`PairBuilder`."""
from __future__ import annotations

from .match_calls import STATS, Call, combine, known

SIDE_FIELDS = ("name", "op", "module_path", "dtype", "shape", "numel", *STATS, "nan_count", "inf_count", "stack_id",
               "source")
PAIR_COLUMNS = ("rank", "step", "order", "level", "relation", "logical_module", "layer", "pass", "io", "slot",
                "call_a", "call_b", *(f"a_{f}" for f in SIDE_FIELDS), *(f"b_{f}" for f in SIDE_FIELDS))
UNMATCHED_COLUMNS = ("side", "rank", "step", "order", "name", "op", "module_path", "layer", "pass", "io", "slot",
                     "dtype", "shape", "reason")


class PairBuilder:
    def __init__(self, table_a, table_b):
        self.recs_a = table_a.to_dict("index")
        self.recs_b = table_b.to_dict("index")
        self.pairs: list[dict] = []
        self.unmatched: list[dict] = []
        self._reasons: dict[tuple[str, object], str] = {}

    def recs(self, side: str) -> dict:
        return self.recs_a if side == "A" else self.recs_b

    def add_calls(self, call_a: Call, call_b: Call, level: str, rows: tuple[list, list], logical=None,
                  layer=None) -> None:
        pairs, unmatched = rows
        for index_a, index_b in pairs:
            row_a, row_b = self.recs_a[index_a], self.recs_b[index_b]
            self.pairs.append(self._pair(row_a, [row_b], call_a.stem, call_b.stem, level, "same", logical, layer))
        for side, index, reason in unmatched:
            self.unmatched_row(side, index, reason)

    def add_fused(self, row_a: dict, rows_b: list[dict], call_a: str, call_b: str, logical, layer,
                  swap: bool) -> None:
        """One row of a fused module against its parts' rows (``swap``: the fused one is B's)."""
        self.pairs.append(self._pair(row_a, rows_b, call_a, call_b, "module", "fused", logical, layer, swap))

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

    def unmatched_row(self, side: str, index, reason: str) -> None:
        if (side, index) in self._reasons:
            return
        self._reasons[(side, index)] = reason
        row = self.recs(side)[index]
        self.unmatched.append({"side": side, **{k: row.get(k) for k in UNMATCHED_COLUMNS[1:-1]}, "reason": reason})

    def unmatched_call(self, side: str, call: Call, reason: str) -> None:
        for index in call.rows:
            self.unmatched_row(side, index, reason)

    def pairs_table(self):
        import pandas as pd

        frame = pd.DataFrame(self.pairs, columns=list(PAIR_COLUMNS))
        return frame.sort_values(["step", "rank", "order"], kind="stable").reset_index(drop=True)

    def unmatched_table(self):
        import pandas as pd

        frame = pd.DataFrame(self.unmatched, columns=list(UNMATCHED_COLUMNS))
        return frame.sort_values(["side", "step", "rank", "order"], kind="stable").reset_index(drop=True)


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
