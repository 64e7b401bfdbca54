"""The fast paths of matching give what the straightforward ones give: call stems by search against the
anchored regex on fuzzed names, the pair/unmatched columns made from object arrays against the list a dict per
row would give, and the alignment features from per-row columns against reading each row."""
from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from workbench.dumps.match_align import Feature
from workbench.dumps.match_calls import Rows, calls_of, known
from workbench.dumps.match_features import CallFeatures
from workbench.dumps.match_names import _stem_of, call_stem
from workbench.dumps.match_ops import load_operators
from workbench.dumps.match_columns import joined_array, untyped_series
from workbench.dumps.schema import as_table

TOKENS = [".", "input", "output", "parameters", "parameters_grad", "0", "12", "\n", "x", "_", ".input", ".output.",
          ".parameters_grad.", "٣", "", "forward", "Module.", "Functional.linear"]


@pytest.mark.parametrize("seed", [0, 1])
def test_call_stems_by_search_equal_the_anchored_regex(seed):
    rng = random.Random(seed)
    names = ["".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 9))) for _ in range(50_000)]
    names += ["Functional.linear.0.forward.output.0", "Module.a.parameters_grad.3.x", "a\n.input.0", "x.input",
              "Module.m.Linear.parameters_grad", ".input.0", "a.parameters_grad.12b.c", "a.parameters_grad.7"]
    assert [_stem_of(name) for name in names] == [call_stem(name) for name in names]


@pytest.mark.parametrize("values", [
    ["a", None, "b"], [None, None], [1, 2, 3], [1, None, 3], [1.5, math.nan, None], [True, False],
    ["a", 1, None], [(1, 2), [3, 4], None], [pd.NA, "x", None], []])
def test_table_columns_keep_the_inference_of_a_list(values):
    order = np.arange(len(values))[::-1].copy()
    index = pd.RangeIndex(len(values))
    expected = pd.Series([values[i] for i in order.tolist()], index=index)
    half = len(values) // 2
    for given in (list(values), joined_array([values[:half], joined_array([values[half:]])])):    # a list, an object array
        found = untyped_series(given, order, index)
        assert found.dtype == expected.dtype
        assert found.tolist() == expected.tolist() or (found.isna() == expected.isna()).all()


def _plain_feature(rows: Rows, call, ops) -> Feature:
    """What the features were before the per-row columns: each row read and checked where it is used."""
    numel = rows["numel"]
    numels = tuple(int(numel[i]) if known(numel[i]) else -1 for io in ("input", "output") for i in call.by_io.get(io, ()))
    outputs = call.by_io.get("output")
    level = rows["l2norm"][min(outputs)] if outputs else None
    return Feature(ops.op_class(call.op), call.pass_, numels, float(level) if known(level) else float("nan"))


def test_features_from_row_columns_equal_reading_each_row():
    rng = random.Random(3)
    rows = []
    for call in range(400):
        op = rng.choice(["linear", "matmul", "softmax", "add"])
        for io in rng.sample(["input", "output", "parameter"], rng.randint(1, 3)):
            for slot in range(rng.randint(1, 3)):
                rows.append({"side": "A", "rank": 0, "step": 0, "module_path": "",
                             "name": f"Functional.{op}.{call}.forward.{io.replace('parameter', 'parameters')}.{slot}",
                             "op": op,
                             "pass": "forward", "io": io, "slot": slot, "order": len(rows),
                             "numel": rng.choice([None, 4, 8, 4096]),
                             "l2norm": rng.choice([None, math.nan, math.inf, 1.5, 0.0])})
    table = as_table(rows)
    ops = load_operators()
    found, other = Rows(table), Rows(table)
    calls = sorted(calls_of(found), key=lambda call: call.index)
    calls_of(other)
    assert len(calls) == 400
    plain = [_plain_feature(found, call, ops) for call in calls]
    features = CallFeatures(found, other, ops)              # the features as codes over both sides (match_features)
    features.aligned(calls[:1], calls[:1])
    (_, key, _, level), (_, key_b, _, level_b) = features._codes
    assert key.tolist() == key_b.tolist() and repr(level.tolist()) == repr(level_b.tolist())
    first: dict = {}
    assert key.tolist() == [first.setdefault(f.key, len(first)) for f in plain]      # numbered by first appearance
    assert [repr(v) for v in level.tolist()] == [repr(f.level) for f in plain]


def test_module_calls_are_what_the_msprobe_module_pattern_in_yaml_matches():
    """A call is a module call when its stem is a msprobe module entry as ``datasets/dump_formats.yaml`` writes it
    (``Module.<path>.<Class>.forward.<n>``), not whenever its name starts with ``Module.``."""
    names = ["Module.decoder.layers.0.mlp.MLP.forward.0.output.0", "Cell.fc1.Dense.parameters_grad.0.weight",
             "Module.oops.input.0", "Functional.linear.0.forward.output.0", "MatMul-op12.output.0",
             "Cell.gelu.GELU.backward.1.input.0"]
    table = as_table([{"side": "A", "rank": 0, "step": 0, "module_path": "", "name": name, "op": "x",
                       "pass": "forward", "io": "output", "slot": 0, "order": order}
                      for order, name in enumerate(names)])
    found = {call.stem: call.is_module for call in calls_of(Rows(table))}
    assert found == {"Module.decoder.layers.0.mlp.MLP.forward.0": True, "Cell.fc1.Dense.parameters_grad.0": True,
                     "Module.oops": False, "Functional.linear.0.forward": False, "MatMul-op12": False,
                     "Cell.gelu.GELU.backward.1": True}


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("module", [None, r"^(?:Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<pass>forward|backward)"
                                          r"(?:\.(?P<index>\d+))?$", r"^(?P<path>.+?)\.(?P<cls>[a-z]+)\.(?P<pass>forward)$",
                                    r"(?P<path>.*)(?P<cls>a|B)(?P<pass>.*)\.(?P<index>\d+)$"])
def test_module_calls_tried_by_their_last_byte_are_the_pattern_on_every_stem(monkeypatch, native, module):
    """Only the stems ending in a digit are tried against a module pattern whose every match ends in one; any other
    pattern (or names the compiled pass did not read) is tried on every stem: the same calls either way."""
    import dataclasses
    import re

    from workbench.dumps import match_calls

    monkeypatch.setenv("WORKBENCH_NATIVE", native)
    base = match_calls.load_dump_formats()
    pattern = re.compile(module) if module else base.msprobe["module_pattern"]
    formats = dataclasses.replace(base, msprobe={**base.msprobe, "module_pattern": pattern})
    monkeypatch.setattr(match_calls, "load_dump_formats", lambda: formats)
    rng = random.Random(5)
    pieces = ["Module", "Cell", "a", "B", "forward", "backward", "parameters_grad", "0", "17", "x1", ""]
    names = [".".join(rng.choice(pieces) for _ in range(rng.randint(1, 7))) + rng.choice([".input.0", ".output.1",
                                                                                       ".weight", ""])
             for _ in range(3000)] + ["", "7", "Module.a.B.forward.0.output.0"]
    table = as_table([{"side": "A", "rank": 0, "step": 0, "module_path": "", "name": name, "op": "x",
                       "pass": "forward", "io": "output", "slot": 0, "order": order}
                      for order, name in enumerate(names)])
    calls = calls_of(Rows(table))
    assert [call.is_module for call in calls] == [pattern.match(call.stem) is not None for call in calls]
    assert sum(call.is_module for call in calls) > 10
