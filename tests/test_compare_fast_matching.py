"""The batch paths of matching (issue 11's speed round 4) give what the per-item ones give: call stems of a whole
name column by one substitution against :func:`call_stem` one name at a time, on fuzzed and hostile names."""
from __future__ import annotations

import random

import pytest

from workbench.dumps.match_names import call_stem, stems_of

TOKENS = [".", "input", "output", "parameters", "parameters_grad", "0", "12", "x", "_", ".input", ".output.",
          ".parameters_grad.", "٣", "", "forward", "Module.", "Functional.linear", "\r", ".parameters"]


def _one_by_one(names: list) -> list[str]:
    return [call_stem("<NA>" if name is None else str(name)) for name in names]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stems_of_a_column_equal_one_name_at_a_time(seed):
    rng = random.Random(seed)
    names = ["".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 9))) for _ in range(20_000)]
    assert stems_of(names) == _one_by_one(names)


@pytest.mark.parametrize("names", [
    [], [""], ["x"], [".input.0"], [".input"], ["x.input"], ["a.input.output.0"], [".input.output.1"],
    ["Module.a.parameters_grad.3.x", "Functional.linear.0.forward.output.0"], ["a.parameters_grad.12b.c"],
    ["a\n.input.0", "b.input.0"], ["b.output.0", "a\nb.input.0"], ["a.inputs.0", "a.input_0", "a.Input.0"],
    ["ünïcødé.层.input.0", "Функция.output.٣"], [None, "a.input.0"], ["a.input.0", 3], ["a..input..0", "..."],
    ["Cell.m.Linear.forward.0.parameters.weight", "MatMul-op12"]])
def test_stems_of_hostile_names(names):
    assert stems_of(names) == _one_by_one(names)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "longdouble"])
@pytest.mark.parametrize("shape", ["all_missing", "few", "distinct", "signed_zeros", "one_row", "empty"])
def test_float_cells_formatted_once_per_bit_pattern_are_pandas_text(dtype, shape):
    """Float columns whose values repeat (one tolerance, all missing) are formatted once per distinct bit pattern:
    the same text as ``to_csv``, -0.0 apart from 0.0, nan empty, in blocks and a column at a time."""
    import math
    import struct

    import numpy as np
    import pandas as pd

    from workbench.report.csv_text import BLOCK, frame_csv

    rng = random.Random(dtype + shape)
    rows = {"one_row": 1, "empty": 0}.get(shape, BLOCK + 7)
    pool = {"all_missing": [math.nan], "few": [1e-4, math.nan, 5e-324, math.inf, -math.inf, 1e16, 0.1 + 0.2],
            "signed_zeros": [0.0, -0.0, math.nan, -5e-324]}.get(shape)
    if pool is None:
        values = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(rows)]
    else:
        values = [rng.choice(pool) for _ in range(rows)]
    with np.errstate(over="ignore"):
        column = np.asarray(values, dtype=dtype)
    frame = pd.DataFrame({"x": column, "tag": ["a"] * rows, "y": column[::-1].copy()})
    assert frame_csv(frame) == frame.to_csv(index=False)


def _dump_column(rng: random.Random, kind: str, size: int):
    """A dump-table column of ``kind`` (the table's own dtypes) and its values as row dicts give them."""
    import math

    import pandas as pd

    if kind == "string":
        values = [rng.choice(["a", "", "ü,x", None, "MatMul-op1"]) if rng.random() < 0.9 else None for _ in range(size)]
        return pd.Series(values, dtype="string"), values
    if kind in ("Int64", "Int64_full", "Int64_none"):
        values = [None if kind == "Int64_none" else rng.choice([0, 3, -2**63, 2**63 - 1, None if kind == "Int64" else 7])
                  for _ in range(size)]
        return pd.Series(values, dtype="Int64"), values
    if kind == "int64":
        values = [rng.randint(-2**63, 2**63 - 1) for _ in range(size)]
        return pd.Series(values, dtype="int64"), values
    if kind == "float64":
        values = [rng.choice([0.0, -0.0, math.nan, math.inf, 1.5, 5e-324]) for _ in range(size)]
        return pd.Series(values, dtype="float64"), values
    values = [rng.random() < 0.5 for _ in range(size)]
    return pd.Series(values, dtype="bool"), values


EXTRA = [[], [1, 2], [1, None], [1.5, float("nan")], [None], ["x", None], [True], [2**70], [1, 2.5], ["a", 1],
         [(1, 2)], [-0.0]]


@pytest.mark.parametrize("kind", ["string", "Int64", "Int64_full", "Int64_none", "int64", "float64", "bool"])
def test_typed_columns_are_the_inference_of_a_list(kind):
    """A pair-table column made from the dump table's typed column and a list of Python values (fused pairs) has
    the values and the dtype ``pd.Series`` of the whole list infers, reordered; and the rows' order is pandas'
    stable sort."""
    import numpy as np
    import pandas as pd

    from workbench.dumps.match_calls import Rows
    from workbench.dumps.match_columns import joined, listed, reordered, series, sort_order, taken

    rng = random.Random(kind)
    for size in (0, 1, 40):
        column, values = _dump_column(rng, kind, size)
        rows = Rows(pd.DataFrame({"x": column}))
        positions = np.asarray([rng.randrange(size) for _ in range(size)] if size else [], dtype=np.int64)
        for extra in EXTRA:
            python = [values[i] for i in positions.tolist()] + list(extra)
            if not python:
                continue
            order = np.asarray(sorted(range(len(python)), key=lambda _: rng.random()), dtype=np.int64)
            expected = pd.Series([python[i] for i in order.tolist()])
            found = series(reordered(joined([taken(rows, "x", positions), listed(list(extra))]),
                                     np.arange(len(python))), order, pd.RangeIndex(len(python)))
            assert found.dtype == expected.dtype, (kind, extra)
            pd.testing.assert_series_equal(found, expected, check_exact=True)
            keys = [joined([taken(rows, "x", positions), listed(list(extra))]), (np.asarray(order), "plain")]
            fast = sort_order(keys)
            if fast is not None:
                frame = pd.DataFrame({"k": pd.Series(python), "o": order})
                assert fast.tolist() == frame.sort_values(["k", "o"], kind="stable").index.tolist()


def _tree_rows(node, depth=0) -> list:
    found = [(depth, node.name, node.rows, repr(node.worst), node.status)]
    for child in node.children.values():
        found += _tree_rows(child, depth + 1)
    return found


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tree_hung_by_totals_is_the_tree_added_call_by_call(seed):
    """Parents totalled from their children once give the tree that adding each call down from the root gives:
    counts, worst (negative, -0.0 and nan worst values never above the start), statuses, first-appearance order,
    a call repeated, names shared across levels, and None labels."""
    import math

    from workbench.dumps.hierarchy import STATUS_RANK, Node, hang

    def hang_one_by_one(totals: list) -> Node:            # each total added to every node of its path
        root, status_of = Node("model"), {rank: status for status, rank in STATUS_RANK.items()}
        for (layer, module, call), count, high, rank in totals:
            path = [root]
            for name in (layer, module, call):
                if name is not None:                      # None: the level is skipped
                    path.append(path[-1].children.setdefault(name, Node(name)))
            for node in path:
                node.rows += count
                node.worst = high if high > node.worst else node.worst
                node.status = status_of[rank] if rank > STATUS_RANK[node.status] else node.status
        return root

    rng = random.Random(seed)
    names = ["layer 0", "layer 1", "(no layer)", "m", "attention", "a ↔ b", "x"]
    totals = [((rng.choice(names[:3]), rng.choice(names[2:5]), rng.choice(names[3:])), rng.randint(0, 5),
               rng.choice([0.0, -0.0, 0.5, 3.0, -1.0, math.nan, 1e308]), rng.randint(0, 2)) for _ in range(300)]
    for case in (totals, totals[:1], [], [((None, "m", "c"), 2, 1.0, 1), *totals[:20]],
                 [(("layer 0", None, None), 3, 2.0, 2), *totals[:20], (("layer 0", "m", None), 1, math.nan, 0)]):
        assert _tree_rows(hang(case)) == _tree_rows(hang_one_by_one(case))
        assert hang(case).rows == sum(count for _, count, _, _ in case)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_call_totals_are_the_rows_labels_numbered_row_by_row(seed):
    """Rows numbered by their raw values and labelled once per distinct one give the totals of labelling every
    row: integer, float (nan) and object layers (None, 1 and 1.0 alike), missing logical modules (None, "",
    nan), call names whose pairs print alike ("a ↔ b" + "c" and "a" + "b ↔ c"), statuses outside the ranks."""
    import math

    import numpy as np
    import pandas as pd

    from workbench.dumps.hierarchy import STATUS_RANK, call_totals

    def totals_row_by_row(evaluated):
        layers = [("(no layer)" if v is None or v != v else f"layer {int(v)}") for v in evaluated["layer"].tolist()]
        modules = [logical or module or "(no module)" for logical, module in
                   zip(evaluated["logical_module"].tolist(), evaluated["a_module_path"].tolist(), strict=True)]
        calls = [f"{a} ↔ {b}" for a, b in zip(evaluated["call_a"].tolist(), evaluated["call_b"].tolist(), strict=True)]
        found: dict = {}
        for key, high, status in zip(zip(layers, modules, calls, strict=True), evaluated["worst_rel"].tolist(),
                                     evaluated["status"].tolist(), strict=True):
            count, worst, rank = found.get(key, (0, 0.0, 0))
            found[key] = (count + 1, high if math.isfinite(high) and high > worst else worst,
                          max(rank, STATUS_RANK.get(status, 0)))
        return [(key, *values) for key, values in found.items()]

    rng = random.Random(seed)
    rows = 500
    layer_kinds = {"int": lambda: rng.randint(0, 3), "float": lambda: rng.choice([0.0, 1.0, 2.5, math.nan]),
                   "object": lambda: rng.choice([None, 1, 1.0, True, 2, math.nan])}
    for kind, layer in layer_kinds.items():
        table = pd.DataFrame({
            "layer": [layer() for _ in range(rows)],
            "logical_module": [rng.choice([None, "", "attn", "mlp", math.nan]) for _ in range(rows)],
            "a_module_path": [rng.choice(["", "m.0", "m.1", None]) for _ in range(rows)],
            "call_a": [rng.choice(["a ↔ b", "a", "x"]) for _ in range(rows)],
            "call_b": [rng.choice(["c", "b ↔ c", "y"]) for _ in range(rows)],
            "worst_rel": [rng.choice([0.5, 2.0, math.nan, math.inf, -1.0, 0.0]) for _ in range(rows)],
            "status": [rng.choice(["pass", "warning", "error", None, "other"]) for _ in range(rows)]})
        if kind == "int":
            assert table["layer"].dtype == np.int64
        assert call_totals(table) == totals_row_by_row(table), kind


@pytest.mark.parametrize("seed", [0, 1])
def test_flat_table_is_the_tree_walked_node_by_node(seed):
    """The tree's table (a module's calls taken a column at a time, the columns typed as pandas infers them) is
    the table of a depth-first walk one node at a time: model names empty or not, leaves at every depth."""
    import math

    import pandas as pd

    from workbench.dumps.hierarchy import flat, hang

    def flat_node_by_node(root):
        rows, stack = [], [(root, 0, "")]
        while stack:
            node, depth, path = stack.pop()
            here = f"{path}/{node.name}" if path else node.name
            rows.append((depth, here, node.worst, node.status, node.rows))
            stack += [(child, depth + 1, here) for child in reversed(node.children.values())]
        return pd.DataFrame(dict(zip(("depth", "path", "worst_rel", "status", "rows"),
                                     map(list, zip(*rows, strict=True)), strict=True)))

    rng = random.Random(seed)
    names = ["layer 0", "layer 1", "(no layer)", "m", "attention", "a ↔ b", "x", None]
    totals = [((rng.choice(names), rng.choice(names), rng.choice(names)), rng.randint(0, 5),
               rng.choice([0.0, 0.5, 3.0, math.nan, 1e308]), rng.randint(0, 2)) for _ in range(400)]
    for model in ("model", ""):
        for case in (totals, totals[:3], []):
            tree = hang(case, model)
            pd.testing.assert_frame_equal(flat(tree), flat_node_by_node(tree), check_exact=True)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_alignment_table_by_rows_is_the_loops_table(seed):
    """The gap's dynamic programming table made a row at a time with numpy is the Python loop's, cell for cell, on
    fuzzed features (classes that never pair, equal and different sizes, levels nan/inf/huge/zero), and the
    alignment made with it pairs the same calls."""
    import math

    from workbench.dumps import match_align
    from workbench.dumps.match_align import Feature, _best, _best_loop, _scores, align

    rng = random.Random(seed)

    def feature() -> Feature:
        return Feature(rng.choice(["linear", "softmax", "add", "cast"]), rng.choice(["forward", "forward", "backward"]),
                       tuple(rng.choice([4, 8, 16]) for _ in range(rng.randint(0, 3))),
                       rng.choice([math.nan, math.inf, 1e308, -1e308, 0.0, -0.0, 1.5, 2.5, 1e-300]))

    for _ in range(60):
        a = [feature() for _ in range(rng.randint(0, 40))]
        b = [feature() for _ in range(rng.randint(0, 40))]
        scores = _scores(a, b)
        assert _best(scores, len(a) + 1, len(b) + 1) == _best_loop(scores, len(a) + 1, len(b) + 1)
        fast = align(a, b)
        small, match_align.SMALL = match_align.SMALL, 10 ** 9          # every gap through the loop
        try:
            assert align(a, b) == fast
        finally:
            match_align.SMALL = small


def _rows(side: str, names: list, numel=4) -> list[dict]:
    return [{"side": side, "rank": 0, "step": 0, "order": i, "name": name, "op": name.split(".")[1] if "." in name
             else name, "module_path": "", "pass": "forward", "io": "output" if ".output." in name else "input",
             "slot": 0, "dtype": "float32", "shape": "4", "numel": numel, "max": 1.0 + i, "min": -1.0, "mean": 0.0,
             "l2norm": 2.0 + i} for i, name in enumerate(names)]


HOSTILE_SIDES = {
    "empty": ([], []),
    "one row": (["Functional.linear.0.forward.input.0"], ["Functional.matmul.0.forward.input.0"]),
    "every name unmatched": (["Functional.linear.0.forward.input.0", "Tensor.add.0.forward.output.0"],
                             ["Functional.softmax.0.forward.input.0", "Functional.gelu.0.forward.output.0"]),
    "names that are not calls": (["MatMul-op12", "", ".input.0", "a\nb.output.0"], ["MatMul-op3", "x", "y.z"]),
    "unicode names": (["Functional.线性.0.forward.input.0", "Functional.linear.٣.forward.output.0"],
                      ["Functional.линейный.0.forward.input.0", "Functional.matmul.٣.forward.output.0"]),
    "one side empty": (["Functional.linear.0.forward.input.0"], []),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SIDES))
def test_matched_tables_are_what_one_dict_per_row_gives(case):
    """On hostile tables (empty, one row, nothing that pairs, names that do not look like calls, unicode names, a
    side without rows), the pair and unmatched tables built from typed columns are the tables their own rows, as
    dicts, give to pandas: the same values, the same column types."""
    import pandas as pd

    from workbench.dumps.match import match_dumps
    from workbench.dumps.schema import as_table

    names_a, names_b = HOSTILE_SIDES[case]
    matching = match_dumps(as_table(_rows("A", names_a)), as_table(_rows("B", names_b)))
    for frame in (matching.pairs, matching.unmatched):
        if not len(frame):
            continue
        expected = pd.DataFrame(frame.to_dict("records"), columns=list(frame.columns))
        pd.testing.assert_frame_equal(frame, expected, check_exact=True)
    for side, names in (("A", names_a), ("B", names_b)):       # each row paired once or listed unmatched
        assert int((matching.unmatched["side"] == side).sum()) + len(matching.pairs) == len(names)


@pytest.mark.parametrize("seed", [0, 1])
def test_string_columns_taken_from_their_objects_are_pandas_take(seed):
    """``Rows.take``/``take_objects`` index a string column's own objects with its missing mask found once: the
    values ``object_values(series.take(positions))`` gives (NA as None), for every row, some rows in any order
    and repeated, a list or an array, none; before and after ``release``; a column with no missing value; other
    column types through pandas as before."""
    import numpy as np
    import pandas as pd

    from workbench.dumps.match_calls import Rows
    from workbench.dumps.schema import object_values

    rng = random.Random(seed)
    size = 3000
    table = pd.DataFrame({
        "text": pd.array([rng.choice([None, "", "a", "ünï", "x,y", "\n", "٣"] + TOKENS) for _ in range(size)],
                         dtype="string"),
        "full": pd.array([f"n{i}" for i in range(size)], dtype="string"),
        "count": pd.array([rng.choice([None, 0, 7, -2**63]) for _ in range(size)], dtype="Int64"),
        "flag": [rng.random() < 0.5 for _ in range(size)], "other": [rng.choice([None, 1.5, "t"]) for _ in range(size)]})
    before = {column: object_values(table[column]).tolist() for column in table.columns}
    rows = Rows(table)
    picks = [None, [], [0], [size - 1, 0, 5, 5], np.asarray([rng.randrange(size) for _ in range(500)], dtype=np.int64),
             np.arange(size, dtype=np.int64)]
    for release in (False, True):
        if release:
            rows.release()
        for column in table.columns:
            for positions in picks:
                series = table[column]
                expected = object_values(series if positions is None else series.take(positions))
                found = rows.take_objects(column, positions)
                assert found.dtype == object and found.tolist() == expected.tolist(), (column, positions)
                assert [type(v) for v in found.tolist()] == [type(v) for v in expected.tolist()]
                assert rows.take(column, positions) == expected.tolist()
    assert {column: object_values(table[column]).tolist() for column in table.columns} == before    # untouched
    assert table["text"].isna().any()
