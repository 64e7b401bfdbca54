"""The parent of `workbench compare --workers N` only joins what the units hand back (workbench/dumps/unit_join.py,
compare_result.Digest): each join is held equal to the straightforward path on the whole table — ``pd.concat``,
the report's CSV of the joined pairs, the first divergence, suspects and tree found on the joined pairs — with
units that diverge, change precision, have all-missing object columns, other column sets, or no pairs at all."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from workbench_testing import fixtures_dir

from workbench.cli.main import main
from workbench.dumps.compare_result import compare_result, detail_columns, digest, joined_digests
from workbench.dumps.compare_run import compare_unit
from workbench.dumps.match import Matching
from workbench.dumps.unit_join import joined, joined_csv, unit_csv
from workbench.report.csv_text import as_text, frame_csv

# pandas warns when it joins a unit without pairs (object columns) to typed ones; the report keeps pandas' join there
pytestmark = pytest.mark.filterwarnings("ignore:The behavior of DataFrame concatenation:FutureWarning")


def _scaled_output(entry: dict, factor: float) -> None:
    tensor = entry["output"][0]
    tensor.update(Max=tensor["Max"] * factor, Min=tensor["Min"] * factor, Mean=tensor["Mean"] * factor,
                  Norm=tensor["Norm"] * factor)


PLANTS = {                                      # rank -> what B's dump changes there (rank 0: nothing)
    1: lambda data: _scaled_output(data["Functional.gelu.0.forward"], 3.0),                 # a diverging call
    2: lambda data: data["Functional.linear.1.forward"]["output"][0].update(dtype="torch.float16"),  # precision
    3: lambda data: (_scaled_output(data["Functional.linear.0.forward"], 1.5),
                     data["Tensor.pow.0.forward"]["output"][0].update(dtype="torch.bfloat16")),
}


def dump_tree(root: Path, side: str, ranks: range, plant: bool) -> Path:
    """The torch fixture as ``step0/rank{r}/`` for each rank; on the planted side each rank's faults applied."""
    source = fixtures_dir("dumps", "msprobe_pytorch", "out_statistics_mix")
    for rank in ranks:
        folder = root / side / "step0" / f"rank{rank}"
        folder.mkdir(parents=True)
        document = json.loads((source / "dump.full.json").read_text())
        if plant and rank in PLANTS:
            PLANTS[rank](document["data"])
        (folder / "dump.json").write_text(json.dumps(document))
        shutil.copy(source / "construct.full.json", folder / "construct.json")
    return root / side


@pytest.fixture
def units(tmp_path):
    """Each unit compared as a pool's worker compares it for a whole report, with the CSV rows it writes for a CSV
    report (where it leaves out the per-call totals: no tree there); B lacks rank 4 (no pairs there)."""
    a, b = dump_tree(tmp_path, "a", range(5), False), dump_tree(tmp_path, "b", range(4), True)
    found = [compare_unit(a / "step0" / f"rank{r}", b / "step0" / f"rank{r}" if r < 4 else None, None, None, None)
             for r in range(5)]
    return [outcome._replace(csv=unit_csv(outcome.evaluated)) for outcome in found]


def whole_result(outcomes):
    """The straightforward path: the units' tables concatenated by pandas, the report found on them."""
    evaluated = pd.concat([o.evaluated for o in outcomes], ignore_index=True)
    unmatched = pd.concat([o.unmatched for o in outcomes], ignore_index=True)
    sizes = [sum(o.sizes[side] for o in outcomes) for side in (0, 1)]
    return compare_result(Matching(evaluated, unmatched), evaluated, {"A": "a", "B": "b"}, *sizes)


def test_units_digests_joined_are_the_joined_pairs_digest(units):
    outcomes = units[:4]
    whole = pd.concat([o.evaluated for o in outcomes], ignore_index=True)
    found = joined_digests([o.digest for o in outcomes])
    assert repr(found) == repr(digest(whole))
    assert len(found.calls.diverging) >= 2 and found.calls.precision is not None     # the plants are found
    assert {c["rank"] for c in found.calls.diverging} >= {1, 3}
    assert found.calls.precision[0][1] == 2                   # the earliest precision change: rank 2's
    assert found.pairs == len(whole) and found.differing.errors == int((whole["status"] == "error").sum()) > 0
    later = joined_digests([o.digest for o in reversed(outcomes)])      # the earliest found whatever the unit order
    assert later.differing.key == found.differing.key and later.differing.where == found.differing.where


def test_report_from_units_is_the_report_of_the_joined_pairs(units):
    for outcomes in (units[:4], units):                       # with and without the unit that has no pairs
        whole = whole_result(outcomes)
        evaluated, unmatched = joined([o.evaluated for o in outcomes]), joined([o.unmatched for o in outcomes])
        sizes = [sum(o.sizes[side] for o in outcomes) for side in (0, 1)]
        parts = compare_result(Matching(evaluated, unmatched), evaluated, {"A": "a", "B": "b"}, *sizes,
                               found=joined_digests([o.digest for o in outcomes]))
        assert parts.verdict == whole.verdict == "DIVERGED"
        assert json.dumps(parts.to_dict(), default=str) == json.dumps(whole.to_dict(), default=str)
        assert "rank 1" in parts.summary[1]                    # the earliest divergence: the gelu of rank 1
        pieces = joined_csv(parts.main_table, [o.csv for o in outcomes])
        assert "".join(map(as_text, pieces)) == frame_csv(whole.main_table)    # the units' rows after one header
        if len(outcomes) == 5:       # a unit without pairs has object columns, so pandas joins rank, order... as
            assert str(parts.main_table["rank"].dtype) == "object"          # objects, written as the ints were


def test_cli_csv_and_json_are_the_same_with_one_or_two_workers(tmp_path):
    a, b = dump_tree(tmp_path, "a", range(4), False), dump_tree(tmp_path, "b", range(4), True)
    texts = {}
    for workers in ("1", "2"):
        for suffix in ("csv", "json"):
            out = tmp_path / f"w{workers}.{suffix}"
            assert main(["compare", str(a), str(b), "--workers", workers, "--out", str(out)]) == 1
            texts[workers, suffix] = out.read_text()
    assert texts["1", "csv"] == texts["2", "csv"] and texts["1", "json"] == texts["2", "json"]
    whole = pd.DataFrame(json.loads(texts["1", "json"])["tables"]["pairs"])
    assert texts["1", "csv"].splitlines()[0] == ",".join(whole.columns)
    assert len(texts["1", "csv"].splitlines()) == len(whole) + 1


# ---------------------------------------------------------------- the joins on built tables ----------

def unit_tables() -> list[pd.DataFrame]:
    """Tables like the units' pairs: numbers, text with characters the csv module quotes, NaN, an object column
    all missing in one unit (``pd.concat`` walks it), nullable integers and strings."""
    first = pd.DataFrame({"status": ["pass", "error"], "order": [3, 4], "worst_rel": [0.1, np.nan],
                          "a_name": ['x,"y"', "z\nw"], "a_nan_count": [None, None],
                          "layer": pd.array([1, None], dtype="Int64"), "note": pd.array(["a", None], dtype="string")})
    second = pd.DataFrame({"status": ["warning"], "order": [7], "worst_rel": [1e-17], "a_name": ["plain"],
                           "a_nan_count": pd.Series([2], dtype=object), "layer": pd.array([2], dtype="Int64"),
                           "note": pd.array(["b"], dtype="string")})
    return [first, second]


@pytest.mark.parametrize("case", ["same", "all_missing_float", "other_columns", "empty_unit", "one"])
def test_joined_is_pd_concat(case):
    tables = unit_tables()
    if case == "all_missing_float":                 # an all-NaN float column where another unit has objects
        tables[1] = tables[1].assign(a_nan_count=np.nan)
    elif case == "other_columns":
        tables[1] = tables[1].drop(columns="note").assign(extra=[1.5])
    elif case == "empty_unit":
        tables.insert(1, tables[0].iloc[:0].astype(object))
    elif case == "one":
        tables = tables[:1]
    expected = pd.concat(tables, ignore_index=True)
    found = joined(tables)
    pd.testing.assert_frame_equal(found, expected)
    assert list(found.dtypes) == list(expected.dtypes)
    assert frame_csv(found) == frame_csv(expected)


@pytest.mark.parametrize("case", ["same", "all_missing_float", "other_columns", "empty_unit"])
def test_units_csv_joined_is_the_csv_of_the_joined_table(case):
    tables = unit_tables()
    if case == "all_missing_float":
        tables[0] = tables[0].assign(a_nan_count=np.nan)
    elif case == "other_columns":
        tables[1] = tables[1].drop(columns="note").assign(extra=[1.5])
    elif case == "empty_unit":
        tables.insert(1, tables[0].iloc[:0])
    whole = pd.concat(tables, ignore_index=True)
    pieces = joined_csv(whole, [unit_csv(t) for t in tables])
    if case in ("same", "empty_unit"):
        assert "".join(map(as_text, pieces)) == frame_csv(whole) == whole.to_csv(index=False)  # rows written apart
        assert len(pieces) == 1 + len(tables) - (case == "empty_unit")       # header, then each unit with rows
    else:
        assert pieces is None                        # another column set or type: the joined table is written


def test_report_columns_put_the_verdict_first():
    assert detail_columns(["x", "status", "a_name"])[:2] == ["status", "worst_rel"]
    assert detail_columns(["x", "status", "a_name"])[-1] == "x"


def test_pairs_in_report_order_share_their_columns(units):
    """The same table as ``evaluated[detail_columns(...)]``, its columns the evaluated table's own arrays; a
    table already in order as it is, one with a repeated label copied by pandas."""
    from workbench.dumps.compare_result import in_report_order

    evaluated = units[0].evaluated
    shuffled = evaluated[list(reversed(evaluated.columns))]
    ordered = in_report_order(shuffled)
    pd.testing.assert_frame_equal(ordered, shuffled[detail_columns(shuffled.columns)], check_exact=True)
    assert all(np.shares_memory(ordered[c].to_numpy(), shuffled[c].to_numpy()) for c in ordered.columns)
    assert in_report_order(evaluated) is evaluated
    repeated = pd.concat([shuffled, shuffled[["step"]]], axis=1)
    pd.testing.assert_frame_equal(in_report_order(repeated), repeated[detail_columns(repeated.columns)])


def test_report_csv_is_the_units_rows_when_asked_for_csv(tmp_path):
    from workbench.dumps.compare_run import CompareOptions, compare_dumps
    from workbench.report.emit import render

    a, b = dump_tree(tmp_path, "a", range(3), False), dump_tree(tmp_path, "b", range(3), True)
    for workers in (1, 2):
        result = compare_dumps(a, b, CompareOptions(workers=workers, output_format="csv"))
        whole = compare_dumps(a, b, CompareOptions(workers=workers))
        assert "csv" in result.renderers and "csv" not in whole.renderers      # written by the units, joined here
        assert len(result.main_table) == 0 and list(result.main_table.columns) == list(whole.main_table.columns)
        assert len(whole.main_table) == result.facts["matched"] > 0            # the rows stayed in the units
        assert render(result, "csv") == frame_csv(whole.main_table)


def test_units_that_wrote_their_rows_with_other_types_are_compared_again_whole(tmp_path, monkeypatch):
    """A CSV report's units send back no pairs; when the units with rows wrote them with different column types
    (ranks that record different statistics: a column all missing in one of them) their pieces cannot be joined,
    and the comparison runs again with the rows sent back, written whole. The types are skewed here in the
    units' own writer (a mock, said why: dumps whose ranks differ so would test the readers, not this join);
    with a fork the workers inherit it."""
    from workbench.dumps import unit_join
    from workbench.dumps.compare_run import CompareOptions, compare_dumps
    from workbench.report.emit import render

    real = unit_join.unit_csv

    def skewed(detail):
        text, names, kinds = real(detail)
        if len(detail) and int(detail["rank"].iloc[0]) == 1:
            kinds = [np.dtype(object) if name == "order" else kind for name, kind in zip(names, kinds, strict=True)]
        return text, names, kinds

    monkeypatch.setattr(unit_join, "unit_csv", skewed)
    a, b = dump_tree(tmp_path, "a", range(3), False), dump_tree(tmp_path, "b", range(3), True)
    for workers in (1, 2):
        result = compare_dumps(a, b, CompareOptions(workers=workers, output_format="csv"))
        whole = compare_dumps(a, b, CompareOptions(workers=workers))
        assert "csv" not in result.renderers and len(result.main_table) == len(whole.main_table) > 0
        assert render(result, "csv") == render(whole, "csv") and result.summary == whole.summary


def test_csv_units_send_back_only_the_unmatched_side_and_the_summary_is_the_same(tmp_path):
    """With csv a unit hands back only the unmatched rows' side (the parent counts them); the summary, the facts and
    the CSV are those of the comparison that carries the unmatched rows whole."""
    import gc

    from workbench.dumps.compare_run import CompareOptions, compare_dumps
    from workbench.report.emit import render

    a, b = dump_tree(tmp_path, "a", range(3), False), dump_tree(tmp_path, "b", range(2), True)
    slim = compare_unit(a / "step0" / "rank0", b / "step0" / "rank0", None, None, None, csv=True)
    whole = compare_unit(a / "step0" / "rank0", b / "step0" / "rank0", None, None, None)
    assert list(slim.unmatched.columns) == ["side"] and len(whole.unmatched.columns) > 5
    assert slim.unmatched.equals(whole.unmatched[["side"]]) and slim.unmatched["side"].dtype == object
    assert slim.unmatched.index.equals(whole.unmatched.index)
    for workers in (1, 2):
        as_csv = compare_dumps(a, b, CompareOptions(workers=workers, output_format="csv"))
        plain = compare_dumps(a, b, CompareOptions(workers=workers))
        assert as_csv.facts["unmatched"]["A"] > 0 and gc.isenabled()      # the parent's pause is over
        assert (as_csv.summary, as_csv.facts, as_csv.verdict) == (plain.summary, plain.facts, plain.verdict)
        assert render(as_csv, "csv") == render(plain, "csv")
        assert "hierarchy" in plain.tables and "hierarchy" not in as_csv.tables       # no tree in a CSV report
    assert slim.digest.totals == [] and whole.digest.totals and slim.digest.calls == whole.digest.calls


def test_the_collector_is_back_after_a_comparison_that_fails(tmp_path):
    """The parent's pause of the cyclic collector ends with the comparison, also when it ends in an error."""
    import gc

    from workbench.dumps.compare_run import CompareOptions, compare_dumps
    from workbench.errors import InputError

    a, b = dump_tree(tmp_path, "a", range(2), False), dump_tree(tmp_path, "b", range(2), False)
    with pytest.raises(InputError, match="no \\(step, rank\\) to compare"):
        compare_dumps(a, b, CompareOptions(rank=7, workers=2))
    assert gc.isenabled()


def tree_row_by_row(evaluated):
    """The hierarchy as its definition reads: every pair row added to each node on its path."""
    from workbench.dumps.hierarchy import Node

    root = Node("model")
    for row in evaluated.to_dict("records"):
        layer = row["layer"]
        path = ("(no layer)" if layer is None or layer != layer else f"layer {int(layer)}",
                row["logical_module"] or row["a_module_path"] or "(no module)", f"{row['call_a']} ↔ {row['call_b']}")
        node = root
        root.add(float(row["worst_rel"]), row["status"])
        for name in path:
            node = node.children.setdefault(name, Node(name))
            node.add(float(row["worst_rel"]), row["status"])
    return root


def test_tree_from_units_totals_is_the_tree_of_the_rows(units):
    from workbench.dumps.hierarchy import flat, hang

    whole = pd.concat([o.evaluated for o in units[:4]], ignore_index=True)
    expected = flat(tree_row_by_row(whole))
    assert set(expected["status"]) >= {"pass", "error"} and len(expected) > 20
    found = flat(hang(joined_digests([o.digest for o in units[:4]]).totals))
    pd.testing.assert_frame_equal(found, expected)


def _unit_that_fails_or_waits(index: int) -> int:
    import time

    if index == 0:
        raise ValueError("unit 0 is malformed")
    time.sleep(60)
    return index


def test_a_failing_unit_stops_the_pool_at_once():
    """The first unit's error is raised without waiting for the other units (each would take a minute)."""
    import time

    from workbench.dumps.units import run_units

    start = time.perf_counter()
    with pytest.raises(ValueError, match="unit 0 is malformed"):
        run_units(_unit_that_fails_or_waits, [(i,) for i in range(4)], workers=2)
    assert time.perf_counter() - start < 30
