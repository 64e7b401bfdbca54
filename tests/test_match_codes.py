"""Rows numbered by value (workbench/dumps/match_codes.py) as pd.factorize and a dict would number them: a text
column of a few values compared value by value, constant integer columns skipped in a tuple, io codes."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from workbench.dumps.match_codes import IOS, few_codes, io_codes, tuple_codes


@pytest.mark.parametrize("values", [[], ["forward"], ["forward"] * 5, ["b", "a", "b", "c", "a"], ["", "x", ""],
                                    ["backward", "forward", "forward", "backward"]])
def test_few_codes_are_factorize_codes(values):
    texts = np.asarray(values, dtype=object)
    assert few_codes(texts).tolist() == pd.factorize(texts, use_na_sentinel=False)[0].tolist()


def test_few_codes_give_up_past_the_limit():
    texts = np.asarray([str(i % 9) for i in range(100)], dtype=object)
    assert few_codes(texts, limit=8) is None
    assert few_codes(texts, limit=9).tolist() == pd.factorize(texts)[0].tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tuple_codes_number_tuples_in_order_of_first_appearance(seed):
    rng = random.Random(seed)
    size = 2000
    constant = np.full(size, rng.randint(-3, 3), dtype=np.int64)
    ranks = np.asarray([rng.randint(0, 2) for _ in range(size)], dtype=np.int64)
    stems = [rng.choice(["a", "b", "c", None]) for _ in range(size)]
    passes = np.asarray([rng.choice(["forward", "backward"]) for _ in range(size)], dtype=object)
    columns = (constant, ranks, stems, few_codes(passes), constant)
    numbered: dict = {}
    want = [numbered.setdefault(key, len(numbered)) for key in zip(constant.tolist(), ranks.tolist(), stems,
                                                                   passes.tolist(), strict=True)]
    assert tuple_codes(columns).tolist() == want
    assert tuple_codes((constant,)).tolist() == [0] * size


def test_io_codes_place_each_io_and_any_other_value_last():
    ios = np.asarray(["input", "output", "parameter", "inputs", None, 3, "output"], dtype=object)
    assert io_codes(ios).tolist() == [0, 1, 2, 3, 3, 3, 1]
    assert IOS == ("input", "output", "parameter")


def test_rows_strings_only_for_a_string_column_without_missing_values():
    from workbench.dumps.match_calls import Rows, calls_of
    from workbench.dumps.schema import as_table

    records = [{"side": "A", "rank": 0, "step": 0, "order": n, "name": f"op{n % 3}.forward.input.0", "op": "x",
                "module_path": "", "pass": [None, "forward", "backward"][n % 3] if n > 2 else "forward",
                "io": "input", "slot": 0} for n in range(12)]
    full, holed = Rows(as_table(records[:3])), Rows(as_table(records))
    assert full.strings("pass").tolist() == ["forward"] * 3
    assert holed.strings("pass") is None and full.strings("slot") is None
    assert sorted((call.stem, call.pass_) for call in calls_of(holed)) == [
        ("op0.forward", "<NA>"), ("op0.forward", "forward"), ("op1.forward", "forward"), ("op2.forward", "backward"),
        ("op2.forward", "forward")]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_calls_come_in_rank_step_and_execution_order_whatever_the_rows_order(seed):
    from workbench.dumps.match_calls import Rows, _ordered, calls_of
    from workbench.dumps.schema import as_table

    rng = random.Random(seed)
    for size in (0, 1, 2, 5, 40):
        keys = [np.asarray([rng.randint(0, 2) for _ in range(size)], dtype=np.int64) for _ in range(3)]
        tuples = list(zip(*(key.tolist() for key in keys), strict=True))
        assert _ordered(*keys) == (tuples == sorted(tuples))
    orders = list(range(300))
    if seed:                                              # seed 0: rows in execution order, one rank
        rng.shuffle(orders)
    records = [{"side": "A", "rank": 0 if not seed else rng.randint(0, 1), "step": 0, "order": order,
                "name": f"op{rng.randint(0, 60)}.forward.{rng.choice(['input', 'output'])}.0", "op": "x",
                "module_path": "", "pass": "forward", "io": "input", "slot": 0} for order in orders]
    table = as_table(records)
    earliest: dict = {}
    for record in records:
        key = (record["rank"], record["name"].rsplit(".", 2)[0])
        earliest[key] = min(earliest.get(key, record["order"]), record["order"])
    assert [(call.rank, call.stem) for call in calls_of(Rows(table))] == sorted(earliest, key=lambda k: (k[0],
                                                                                                         earliest[k]))
