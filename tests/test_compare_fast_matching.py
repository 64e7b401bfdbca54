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
