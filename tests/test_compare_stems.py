"""The compiled call-stem pass (workbench/native/callstems.c through workbench/dumps/match_stems.py) gives what the
Python stems give: the same stem for every name and the same numbering of the distinct stems (order of first
appearance), on fuzzed and hostile names; names it does not take (not str, line breaks, outside ASCII) go to the
Python path; the C function refuses a table too small or a line count that is not the text's; and the calls of a
table are the same with the library and with ``WORKBENCH_NATIVE=0``."""
from __future__ import annotations

import ctypes
import random

import numpy as np
import pandas as pd
import pytest

from workbench.dumps import match_stems
from workbench.dumps.match_calls import Rows, calls_of
from workbench.dumps.match_names import call_stem
from workbench.dumps.schema import as_table

TOKENS = [".", "input", "output", "parameters", "parameters_grad", "0", "12", "x", "_", ".input", ".output.",
          ".parameters_grad.", "", "forward", "Module.", "Functional.linear", "\r", ".parameters", "7", ".9", "a.b",
          "\t", " ", "Input", ".inputs"]


def _function():
    function = match_stems._function()
    if function is None:
        pytest.skip("the callstems library is not built (python workbench/native/build.py)")
    return function


def _same_as_python(names: list) -> None:
    _function()
    found = match_stems._compiled(names)
    assert found is not None
    want = [call_stem(name) for name in names]
    assert found.at(list(range(len(names)))) == want
    backwards = np.arange(len(names) - 1, -1, -1, dtype=np.int64)
    one = found.one_at(backwards)
    assert [one(k) for k in range(len(names))] == want[::-1]
    assert found.keys.tolist() == pd.factorize(np.asarray(want, dtype=object))[0].tolist()
    digits = found.digit_ends(np.arange(len(names), dtype=np.int64)).tolist()
    assert digits == [stem[-1:] in tuple("0123456789") and stem != "" for stem in want]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fuzzed_names_give_the_python_stems_and_numbering(seed):
    rng = random.Random(seed)
    _same_as_python(["".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 9))) for _ in range(30_000)])


@pytest.mark.parametrize("names", [
    [""], ["x"], [".input.0"], [".input"], ["x.input"], ["a.input.output.0"], [".input.output.1"], ["", "", "x", ""],
    ["Module.a.parameters_grad.3.x", "Module.a.parameters_grad.3.y", "Functional.linear.0.forward.output.0"],
    ["a.parameters_grad.12b.c", "a.parameters_grad.7", "a.parameters_grad.", "a.parameters_grad..1", ".parameters_grad"],
    ["a.parameters_grad.input.0", "a.input.parameters_grad", "a.parameters_gradx.input.1", "a.parameters.grad"],
    ["a.inputs.0", "a.input_0", "a.Input.0", "a..input..0", "...", "a.input.", "a.output"],
    ["Cell.m.Linear.forward.0.parameters.weight", "MatMul-op12", "a.input.0", "a.output.0", "b.input.0"]])
def test_edge_names_give_the_python_stems(names):
    _same_as_python(names)


@pytest.mark.parametrize("names", [
    [None, "a.input.0"], ["a.input.0", 3], ["a\n.input.0", "b.input.0"], ["ünïcødé.层.input.0"],
    ["a.parameters_grad.٣.x"], []])
def test_names_it_does_not_take_go_to_the_python_path(names):
    assert match_stems._compiled(names) is None
    found = match_stems.call_stems(names)
    text = [call_stem("<NA>" if name is None else str(name)) for name in names]
    assert found.at(list(range(len(names)))) == text
    one = found.one_at(np.arange(len(names), dtype=np.int64))
    assert [one(k) for k in range(len(names))] == text
    assert found.digit_ends is None             # not checked ASCII: the module pattern is tried on every stem


def _call(function, data: bytes, lines: int, slots: int) -> int:
    arrays = [np.zeros(max(lines, 1), dtype=np.int64) for _ in range(4)] + [np.zeros(max(slots, 1), dtype=np.int64)]
    pointer = ctypes.POINTER(ctypes.c_int64)
    return function(data, len(data), lines, *(array.ctypes.data_as(pointer) for array in arrays), slots)


def test_the_c_function_refuses_what_python_did_not_size():
    function = _function()
    assert _call(function, b"a.input.0\nb.output.0", 2, 4) == 2
    assert _call(function, b"a.input.0\nb.output.0", 2, 3) == -1          # not a power of two
    assert _call(function, b"a.input.0\nb.output.0", 2, 2) == -1          # fewer slots than twice the lines
    assert _call(function, b"a.input.0\nb.output.0", 3, 8) == -1          # fewer lines than said
    assert _call(function, b"a.input.0\nb.output.0", 1, 8) == -1          # more lines than said
    assert _call(function, "é.input.0".encode(), 1, 2) == -1               # outside ASCII
    assert _call(function, b"", 0, 2) == -1


def _table(names: list[str], rng: random.Random):
    return as_table([{"side": "A", "rank": rng.randint(0, 1), "step": 0, "order": n, "name": name, "op": "x",
                      "module_path": "m", "pass": rng.choice(["forward", "backward"]),
                      "io": rng.choice(["input", "output", "parameter"]), "slot": rng.randint(0, 2)}
                     for n, name in enumerate(names)])


def test_calls_are_the_same_with_and_without_the_library(monkeypatch):
    _function()
    rng = random.Random(7)
    names = [f"{rng.choice(['Functional.linear', 'Tensor.add', 'Module.m.Linear'])}.{rng.randint(0, 40)}."
             f"{rng.choice(['forward', 'backward'])}.{rng.choice(['input', 'output', 'parameters_grad', 'parameters'])}"
             f".{rng.randint(0, 2)}" for _ in range(3000)]
    table = _table(names, rng)

    def described():
        return [(c.rank, c.step, c.stem, c.op, c.module_path, c.pass_, c.is_module, c.order, c.rows, c.by_io)
                for c in calls_of(Rows(table))]

    native = described()
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    assert match_stems._function() is None
    assert described() == native
