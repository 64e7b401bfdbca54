"""The batch paths of matching (issue 11's speed round 4) give what the per-item ones give: call stems of a whole
name column by one substitution against :func:`call_stem` one name at a time, on fuzzed and hostile names."""
from __future__ import annotations

import random

import pytest

from workbench.dumps.match_calls import call_stem, stems_of

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
