"""The pair and unmatched tables' columns gathered from the sides' own arrays (workbench/dumps/match_gather.py) are
the columns taken, joined and reordered through Python values (workbench/dumps/match_columns.py): the same values and
the same column type, or not gathered at all."""
from __future__ import annotations

import random

import pytest

from tests.test_compare_fast_matching import EXTRA, _dump_column


@pytest.mark.parametrize("kind", ["string", "Int64", "Int64_full", "Int64_none", "int64", "float64", "bool"])
def test_gathered_columns_are_the_joined_ones(kind):
    import numpy as np
    import pandas as pd

    from workbench.dumps.match_calls import Rows
    from workbench.dumps.match_columns import joined, listed, reordered, series, taken
    from workbench.dumps.match_gather import Layout, gathered, plain_part, resolved, source, typed_part

    rng = random.Random(kind)
    made = 0
    for size in (0, 1, 40):
        column, _ = _dump_column(rng, kind, size)
        rows = Rows(pd.DataFrame({"x": column}))
        positions = np.asarray([rng.randrange(size) for _ in range(size)] if size else [], dtype=np.int64)
        typed = source(rows, "x")
        for extra in EXTRA:
            total = size + len(extra)
            if not total:
                continue
            within = np.asarray(rng.sample(range(total), total), dtype=np.int64)     # the parts' rows mixed
            fused = listed(list(extra))
            expected_whole = reordered(joined([taken(rows, "x", positions), fused]), within)
            part = plain_part(typed, positions) if typed is not None else None
            found = gathered([part, typed_part(fused)], Layout([size, len(extra)], within))
            if found is None:
                continue
            made += 1
            assert found[1] == expected_whole[1], extra
            for order in (np.arange(total), np.asarray(rng.sample(range(total), total), dtype=np.int64)):
                index = pd.RangeIndex(total)
                expected = series(expected_whole, order, index)
                got = series(found, order, index)
                assert got.dtype == expected.dtype, extra
                pd.testing.assert_series_equal(got, expected, check_exact=True)
            values, _ = resolved(found)
            assert [type(v) for v in values.tolist()] == [type(v) for v in expected_whole[0].tolist()]
            assert pd.Series(values).equals(pd.Series(expected_whole[0]))
            by_part = gathered([part, typed_part(fused)], Layout([size, len(extra)]))    # runs: slices
            pd.testing.assert_series_equal(series(by_part, np.arange(total), pd.RangeIndex(total)),
                                           series(joined([taken(rows, "x", positions), fused]), np.arange(total),
                                                  pd.RangeIndex(total)), check_exact=True)
    assert made or kind == "Int64"      # a column with a missing integer is gathered only when nothing else is in it


def test_mixed_parts_are_not_gathered():
    import numpy as np

    from workbench.dumps.match_gather import Layout, constant, gathered, typed_part

    layout = Layout([2, 1])
    assert gathered([constant(None, 2), typed_part((np.asarray([1]), "plain"))], layout) is None
    assert gathered([typed_part((np.asarray([1, 2]), "plain")), typed_part((np.asarray([1.5]), "plain"))],
                    layout) is None
    assert gathered([None, constant("x", 1)], layout) is None
    assert gathered([], Layout([])) is None
