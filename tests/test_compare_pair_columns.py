"""The pair table's columns made from whole columns, held to the per-pair code they replaced (kept here as the
reference): the fused pairs' columns (Megatron's linear_qkv against MindFormers' wq, wk, wv: one side is several rows
whose statistics are combined) against one dict per pair, and the one-to-one pairs' layers against the loop."""
from __future__ import annotations

import math
import random

import pytest


def _combined_side_by_dicts(rows: list[dict]) -> dict:
    """A fused tensor's side from its parts' row dicts, as one dict per pair made it (match_combine before round
    14): the reference the whole-column combination is held to, value for value."""
    from workbench.dumps.match_calls import known

    def number(value):
        return math.nan if not known(value) else float(value)

    def fsum(values):
        try:
            return math.fsum(values)
        except (ValueError, OverflowError):
            return sum(values)

    def square(value):
        try:
            return value ** 2
        except OverflowError:
            return math.inf

    def counts(values):
        values = list(values)
        return None if not all(known(v) for v in values) else int(sum(int(v) for v in values))

    joined = {k: "+".join(str(r.get(k) or "") for r in rows) for k in ("name", "op", "module_path", "shape",
                                                                      "stack_id", "source")}
    numels = [number(r["numel"]) for r in rows]
    total = fsum(numels)
    mean = fsum([number(r["mean"]) * n for r, n in zip(rows, numels, strict=False)]) / total if total else math.nan
    return {**joined, "dtype": rows[0].get("dtype"), "max": max(number(r["max"]) for r in rows),
            "min": min(number(r["min"]) for r in rows), "mean": mean,
            "l2norm": math.sqrt(fsum([square(number(r["l2norm"])) for r in rows])),
            "numel": int(total) if math.isfinite(total) else None,
            "nan_count": counts(r["nan_count"] for r in rows), "inf_count": counts(r["inf_count"] for r in rows)}


def _fused_pair_by_dicts(builder, index_f, indexes_p, call_a, call_b, logical, layer, swap) -> dict:
    """One fused pair as the dict per pair made it before the columns were built whole (the reference)."""
    from workbench.dumps.match_calls import known
    from workbench.dumps.match_rows import SIDE_FIELDS, _logical_text

    side_f, side_p = ("B", "A") if swap else ("A", "B")
    row_f = builder.rows(side_f).rows_at([index_f])[index_f]
    found = builder.rows(side_p).rows_at(sorted(set(indexes_p)))
    parts = [found[i] for i in indexes_p]
    side_a = {k: row_f.get(k) for k in SIDE_FIELDS}
    side_b = {k: parts[0].get(k) for k in SIDE_FIELDS} if len(parts) == 1 else _combined_side_by_dicts(parts)
    if swap:
        side_a, side_b, call_a, call_b = side_b, side_a, call_b, call_a
    first = row_f if not swap else parts[0]
    if layer is None or not known(layer):
        layer = first.get("layer")
    return {"rank": first["rank"], "step": first["step"], "order": min(r["order"] for r in ([row_f] if not swap
                                                                                            else parts)),
            "level": "module", "relation": "fused", "logical_module": _logical_text(logical),
            "layer": layer if known(layer) else None, "pass": first["pass"], "io": first["io"], "slot": first["slot"],
            "call_a": call_a, "call_b": call_b, **{f"a_{k}": v for k, v in side_a.items()},
            **{f"b_{k}": v for k, v in side_b.items()}}


def _fused_side(rng: random.Random, side: str, size: int) -> list[dict]:
    floats = [0.0, -0.0, 1.5, -2.25, 1e308, math.inf, -math.inf, math.nan, None, 5e-324, 0.1, 1 / 3, 2.0 ** 60]
    return [{"side": side, "rank": rng.choice([0, 3]), "step": 0, "order": rng.randrange(50),
             "name": rng.choice(["m.wq.forward.output.0", "ünï.层.input.0", None, ""]), "op": rng.choice(["Linear", None]),
             "module_path": rng.choice(["a.b", "", None]), "pass": rng.choice(["forward", "backward"]),
             "io": rng.choice(["input", "output", "parameter"]), "slot": rng.randrange(3),
             "dtype": rng.choice(["float32", None]), "shape": rng.choice(["4,2", "", None, "٣"]),
             "numel": rng.choice([None, 0, 1, 8, 3, 2**53, 2**53 + 1, 2**62]), "max": rng.choice(floats),
             "min": rng.choice(floats), "mean": rng.choice(floats), "l2norm": rng.choice(floats),
             "nan_count": rng.choice([None, 0, 2, 2**62]), "inf_count": rng.choice([None, 0, 5]),
             "layer": rng.choice([None, 0, 7]),
             "stack_id": rng.choice([None, 1, 2]), "source": rng.choice([None, "x.py:3"])} for _ in range(size)]


def _fused_table(rng: random.Random, side: str, size: int, dtypes: str, known_only: bool):
    """A table of fused rows: the schema's column types, or object columns (any column type a caller may hand
    matching); ``known_only``: no missing number, so typed columns stay typed."""
    import pandas as pd

    from workbench.dumps.schema import as_table

    rows = _fused_side(rng, side, size)
    if known_only:
        for row in rows:
            row.update({k: rng.choice([1, 8, 3]) for k in ("numel", "nan_count", "inf_count") if row[k] is None})
            row.update({k: rng.choice([1.5, 0.1, -0.0]) for k in ("max", "min", "mean", "l2norm") if row[k] is None})
    table = as_table(rows)
    if dtypes == "object":
        for column in ("numel", "max", "nan_count", "name", "order"):
            table[column] = pd.Series([row[column] for row in rows], dtype=object)
    return table


@pytest.mark.parametrize("dtypes", ["schema", "object"])
@pytest.mark.parametrize("known_only", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fused_columns_are_the_dict_per_pair(seed, known_only, dtypes):
    """The fused pairs' columns, built for all pairs at once, are typed as the list of the values of one dict per
    pair (the reference) would be, with those values and their Python types: fused on A and on B, one part (a
    forward input) and several (combined statistics with missing, nan, signed zero, infinite and huge values, sums
    past int64 and 2**53), rows shared by several pairs, given layers known and not, schema and object columns."""
    import numpy as np

    from workbench.dumps.match_columns import PLAIN, listed
    from workbench.dumps.match_rows import PAIR_COLUMNS, PairBuilder

    rng = random.Random(seed)
    builder = PairBuilder(_fused_table(rng, "A", 40, dtypes, known_only), _fused_table(rng, "B", 40, dtypes,
                                                                                       known_only))
    entries = []
    for _ in range(300):
        parts = [rng.randrange(40) for _ in range(rng.choice([1, 1, 2, 3, 4, 6]))]
        entry = (rng.randrange(40), parts, "fused.0", "+".join(map(str, parts)), rng.choice([("q", "k", "v"), ()]),
                 rng.choice([None, 2, math.nan]), rng.random() < 0.5)
        builder.add_fused(*entry)
        entries.append(entry)
    columns = builder._fused_columns()
    expected = [_fused_pair_by_dicts(builder, *entry) for entry in entries]
    for name in PAIR_COLUMNS:
        (values, kind), (want, want_kind) = columns[name], listed([pair[name] for pair in expected])
        assert kind == want_kind, name
        if kind == PLAIN:
            assert values.dtype == want.dtype, name
        as_list = [values.tolist() if isinstance(values, np.ndarray) else list(values) for values in (values, want)]
        assert [(type(v), repr(v)) for v in as_list[0]] == [(type(v), repr(v)) for v in as_list[1]], name
    if dtypes == "schema":                   # the typed paths were taken, not only the list's inference
        assert columns["a_mean"][1] == columns["b_max"][1] == PLAIN and columns["b_shape"][1] == "text"


@pytest.mark.parametrize("layers", ["Int64", "object"])
def test_plain_pairs_layers_are_the_loops(layers):
    """The one-to-one pairs' layers (a call's known layer, else the A row's own, else None) chosen by whole arrays
    for an Int64 column are the per-pair loop's, for calls with no, nan and integer layers, rows with missing
    layers; any other column type goes through the loop itself."""
    import numpy as np
    import pandas as pd

    from workbench.dumps.match_rows import PairBuilder, _layer
    from workbench.dumps.schema import as_table

    rng = random.Random(layers)
    table = as_table(_fused_side(rng, "A", 60))
    if layers == "object":
        table["layer"] = pd.Series([rng.choice([None, math.nan, 4, "x"]) for _ in range(60)], dtype=object)
    builder = PairBuilder(table, as_table(_fused_side(rng, "B", 60)))
    index_a, calls = [], []
    for _ in range(200):                       # call pairs as add_calls records them, with 0-3 row pairs each
        builder._calls.append(("s", "s", "call", "", rng.choice([None, math.nan, 0, 9, pd.NA])))
        for _ in range(rng.randint(0, 3)):
            index_a.append(rng.randrange(60))
            calls.append(len(builder._calls) - 1)
    index_a, calls = np.asarray(index_a, dtype=np.int64), np.asarray(calls, dtype=np.int64)
    given = builder._call_field(4)[calls].tolist()
    expected = [_layer(layer, own) for layer, own in zip(given, builder.rows_a.take("layer", index_a), strict=True)]
    found = builder._plain_layers(index_a, calls)
    assert [(type(v), repr(v)) for v in found] == [(type(v), repr(v)) for v in expected]


@pytest.mark.parametrize("seed", [0, 1])
def test_expanded_is_each_group_laid_out_by_a_loop(seed):
    """The one expansion of groups the pair rows, the unmatched calls and the fused parts share: empty groups, one
    group, none at all."""
    import numpy as np

    from workbench.dumps.match_columns import expanded

    rng = random.Random(seed)
    for sizes in ([], [0], [3], [2, 0, 3], [rng.randrange(0, 5) for _ in range(200)]):
        owner, within = expanded(np.asarray(sizes, dtype=np.int64))
        loop = [(g, k) for g, size in enumerate(sizes) for k in range(size)]
        assert list(zip(owner.tolist(), within.tolist(), strict=True)) == loop
        assert owner.dtype == within.dtype == np.int64
