"""The calls' alignment features as numbers (:mod:`workbench.dumps.match_features`) are the :class:`Feature` of each
call: equal codes exactly where the (class, pass), the (class, pass, element counts) and the last element count are
equal, the same levels, and the same pairs as :func:`align` of the Features, compiled and in Python, on fuzzed and
hostile tables (unknown and huge counts, other ios, calls without inputs or outputs, a hash collision forced); the
unmatched rows recorded as events are the dict of first reasons."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from workbench.dumps import match_align_native, match_features
from workbench.dumps.match_align import Feature, align
from workbench.dumps.match_calls import calls_of, known
from workbench.dumps.match_features import CallFeatures
from workbench.dumps.match_ops import load_operators
from workbench.dumps.match_rows import PairBuilder
from workbench.dumps.schema import as_table

OPS = ["Functional.linear", "Primitive.matmul.MatMul", "Tensor.__add__", "add", "Functional.softmax", "cast", "ünï"]
COUNTS = [4, 8, 16, None, 0, 2 ** 40]


def _side(rng: random.Random, side: str, calls: int, counts=COUNTS) -> list[dict]:
    rows = []
    for call in range(calls):
        op = rng.choice(OPS)
        module = rng.choice(["m", "m", "n", "ü.0"])
        pass_ = rng.choice(["forward", "forward", "backward", None])
        for position in range(rng.randint(0, 5)):
            io = rng.choice(["input", "input", "output", "output", "parameter", "other", None])
            slot = rng.randrange(3)
            rows.append({"side": side, "rank": 0, "step": 0, "order": call, "name": f"{op}.{call}.forward.{io}.{slot}",
                         "op": op, "module_path": module, "pass": pass_, "io": io, "slot": slot,
                         "dtype": "float32", "shape": "4", "numel": rng.choice(counts),
                         "max": 1.0, "min": -1.0, "mean": 0.0,
                         "l2norm": rng.choice([math.nan, 0.0, -0.0, 1.5, math.inf, 1e308, 5e-324, position + 0.25])})
    rng.shuffle(rows)                                      # rows of a call apart, slots out of order
    return rows


def _old_features(rows, calls, ops) -> list[Feature]:
    """What match._features made: the class, pass, counts of the inputs then the outputs (slot order), the l2norm of
    the first output row."""
    numel = [int(n) if known(n) else -1 for n in rows["numel"]]
    level = [float(v) if known(v) else math.nan for v in rows["l2norm"]]
    found = []
    for call in calls:
        inputs, outputs = call.by_io.get("input", ()), call.by_io.get("output", ())
        found.append(Feature(ops.op_class(call.op), call.pass_, (*(numel[i] for i in inputs),
                                                                 *(numel[i] for i in outputs)),
                             level[min(outputs)] if outputs else math.nan))
    return found


def _made(rows_a: list[dict], rows_b: list[dict], huge: int | None = None):
    ops = load_operators()
    table_a = as_table(rows_a)
    if huge is not None:                       # the schema's Int64 cannot hold it: an object column
        import pandas as pd

        table_a["numel"] = pd.Series([huge if k % 3 == 0 else n for k, n in enumerate(table_a["numel"].tolist())],
                                     dtype=object)
    builder = PairBuilder(table_a, as_table(rows_b))
    calls_a, calls_b = calls_of(builder.rows_a), calls_of(builder.rows_b)
    calls_a.sort(key=lambda c: c.index)
    calls_b.sort(key=lambda c: c.index)
    return builder, ops, calls_a, calls_b


def _same_relation(codes, values) -> None:
    codes = list(codes)
    for i in range(len(values)):
        for j in range(i, len(values)):
            assert (codes[i] == codes[j]) == (values[i] == values[j]), (values[i], values[j])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("collide", [False, True])
def test_codes_are_the_features(seed, collide, monkeypatch):
    if collide:                       # every hash equal to the first count: the codes must come from the bytes
        monkeypatch.setattr(match_features, "HASH_BASE", 0)
    rng = random.Random(seed)
    builder, ops, calls_a, calls_b = _made(_side(rng, "A", 60), _side(rng, "B", 60))
    features = CallFeatures(builder.rows_a, builder.rows_b, ops)
    features.aligned(calls_a[:1], calls_b[:1])
    (codes_a, codes_b) = features._codes
    old = _old_features(builder.rows_a, calls_a, ops) + _old_features(builder.rows_b, calls_b, ops)
    kind, key, last, level = (np.concatenate([a, b]) for a, b in zip(codes_a, codes_b, strict=True))
    _same_relation(kind, [(f.cls, f.pass_) for f in old])
    _same_relation(key, [f.key for f in old])
    _same_relation(last, [f.numels[-1:] for f in old])
    assert [str(v) for v in level.tolist()] == [str(f.level) for f in old]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("native", [True, False])
def test_groups_pair_as_align_of_their_features(seed, native, monkeypatch):
    if not native:
        monkeypatch.setattr(match_align_native, "_function", lambda: None)
    elif match_align_native._function() is None:
        pytest.skip("the callalign library is not built (python workbench/native/build.py)")
    rng = random.Random(100 + seed)
    builder, ops, calls_a, calls_b = _made(_side(rng, "A", 80, [4, 8, None]), _side(rng, "B", 80, [4, 8, None]))
    features = CallFeatures(builder.rows_a, builder.rows_b, ops)
    old_a, old_b = _old_features(builder.rows_a, calls_a, ops), _old_features(builder.rows_b, calls_b, ops)
    for _ in range(30):
        at_a = sorted(rng.sample(range(len(calls_a)), rng.randint(1, len(calls_a))))
        at_b = sorted(rng.sample(range(len(calls_b)), rng.randint(1, len(calls_b))))
        expected = align([old_a[i] for i in at_a], [old_b[j] for j in at_b])
        assert features.aligned([calls_a[i] for i in at_a], [calls_b[j] for j in at_b]) == expected


def test_counts_beyond_int64_are_numbered_as_tuples():
    rng = random.Random(7)
    builder, ops, calls_a, calls_b = _made(_side(rng, "A", 30), _side(rng, "B", 30), huge=2 ** 70)
    features = CallFeatures(builder.rows_a, builder.rows_b, ops)
    old_a, old_b = _old_features(builder.rows_a, calls_a, ops), _old_features(builder.rows_b, calls_b, ops)
    assert features.aligned(calls_a, calls_b) == align(old_a, old_b)
    kind, key, last, _ = (np.concatenate([a, b]) for a, b in zip(*features._codes, strict=True))
    _same_relation(key, [f.key for f in old_a + old_b])
    _same_relation(last, [f.numels[-1:] for f in old_a + old_b])


@pytest.mark.parametrize("seed", range(3))
def test_unmatched_events_are_the_dict_of_first_reasons(seed):
    """Rows and whole calls (one at a time, or many by number with one reason or a function of each call's op and
    module path) recorded unmatched, repeated and interleaved, come out as the dict ``{row: reason}`` filled by
    setdefault in the same order: each row once, at its first reason's place; the function called once per distinct
    (side, op, module path)."""
    from workbench.dumps.match_unmatched import Unmatched

    described = []

    def describe(side: str, op: str, module_path: str) -> str:
        described.append((side, op, module_path))
        return f"{op!r} of {module_path!r} ({side})" if op != OPS[0] else "r1"      # one text as a given reason's

    rng = random.Random(seed)
    builder, _, calls_a, calls_b = _made(_side(rng, "A", 40), _side(rng, "B", 40))
    unmatched = Unmatched()
    expected: dict[str, dict[int, str]] = {"A": {}, "B": {}}
    sizes = {"A": builder.rows_a.size, "B": builder.rows_b.size}
    for _ in range(300):
        side = rng.choice("AB")
        reason = rng.choice(["r1", "r2", "ü,3", ""])
        if rng.random() < 0.5 and sizes[side]:
            index = rng.randrange(sizes[side])
            unmatched.row(side, index, reason)
            expected[side].setdefault(index, reason)
        elif rng.random() < 0.5:
            call = rng.choice(calls_a if side == "A" else calls_b)
            unmatched.call(side, call, reason)
            for index in call.rows:
                expected[side].setdefault(index, reason)
        else:
            calls = calls_a if side == "A" else calls_b
            picked = [rng.choice(calls) for _ in range(rng.randint(0, 6))]
            given = rng.choice([reason, describe])
            unmatched.numbered(side, calls[0].table, np.asarray([c.index for c in picked], dtype=np.int64), given)
            for call in picked:
                text = given if isinstance(given, str) else describe(side, call.op, call.module_path)
                for index in call.rows:
                    expected[side].setdefault(index, text)
    described.clear()
    assert [unmatched.count(side) for side in "AB"] == [len(expected[side]) for side in "AB"]
    assert not described                        # counting makes no reason
    for side in "AB":
        positions, reasons = unmatched.found(side)
        assert list(zip(positions.tolist(), reasons.tolist(), strict=True)) == list(expected[side].items())
    assert len(described) == len(set(described))


def test_nothing_unmatched():
    from workbench.dumps.match_unmatched import Unmatched

    positions, reasons = Unmatched().found("A")
    assert positions.tolist() == [] and reasons.tolist() == [] and Unmatched().count("A") == 0


def _pair_side(rng: random.Random, side: str, calls: int, backward: bool) -> list[dict]:
    """Calls with inputs, outputs and parameters of varied counts (a few element counts that differ or are unknown,
    shapes empty or not), backward ones with a differing number of outputs."""
    rows = []
    for call in range(calls):
        pass_ = "backward" if backward and rng.random() < 0.4 else "forward"
        for io, count in (("input", rng.randint(0, 3)), ("output", rng.randint(0, 3)), ("parameter", rng.randint(0, 2))):
            for slot in range(count):
                name = rng.choice(["weight", "bias", "gamma"]) if io == "parameter" else str(slot)
                rows.append({"side": side, "rank": 0, "step": 0, "order": len(rows), "name": f"Module.m{call}.L.{pass_}"
                             f".0.{'parameters' if io == 'parameter' else io}.{name}", "op": "L", "module_path": "m",
                             "pass": pass_, "io": io, "slot": slot, "dtype": "float32",
                             "shape": rng.choice(["4", "", None]), "numel": rng.choice([4, 4, 4, 8, None]),
                             "max": 1.0, "min": -1.0, "mean": 0.0, "l2norm": 1.0})
    rng.shuffle(rows)
    return rows


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("counts", ["Int64", "int64", "object"])
def test_pending_pairs_are_pair_rows_per_pair(seed, counts):
    """Every call pair's rows paired at once (the arrays, or pair_rows per pair for an object count column) give the
    pairs and unmatched rows, in order, of one pair_rows per call pair in the order the pairs were made."""
    import pandas as pd

    from workbench.dumps.match_pairs import PendingPairs, pair_rows

    rng = random.Random(seed)
    rows_a, rows_b = _pair_side(rng, "A", 40, True), _pair_side(rng, "B", 40, True)
    ops = load_operators()
    table_a, table_b = as_table(rows_a), as_table(rows_b)
    for table in (table_a, table_b):
        if counts == "int64":
            table["numel"] = table["numel"].fillna(4).astype("int64")
        elif counts == "object":
            table["numel"] = pd.Series([None if v is pd.NA else v for v in table["numel"].tolist()], dtype=object)
    builder = PairBuilder(table_a, table_b)
    calls_a, calls_b = calls_of(builder.rows_a), calls_of(builder.rows_b)
    pending, expected_pairs, expected_unmatched = PendingPairs(), [], []
    for event in range(60):
        call_a, call_b = rng.choice(calls_a), rng.choice(calls_b)
        pending.add(2 * event, 3 * event, call_a, call_b, event)
        found, reasons = pair_rows(builder.rows_a, call_a, builder.rows_b, call_b, ops)
        expected_pairs += [(2 * event, x, y, event) for x, y in found]
        expected_unmatched += [(3 * event, side, index, reason) for side, index, reason in reasons]
    (event, place, index_a, index_b, number), (u_event, u_place, side, position, reasons) = pending.matched(
        builder.rows_a, builder.rows_b, ops)
    order = np.lexsort((place, event))
    assert list(zip(*(v[order].tolist() for v in (event, index_a, index_b, number)), strict=True)) == expected_pairs
    order = np.lexsort((u_place, u_event)).tolist()
    assert [(u_event[k], "AB"[side[k]], position[k], reasons[k]) for k in order] == expected_unmatched
    assert all(any(text in r for r in reasons) for text in ("backward outputs", "element counts", "has no", "parameter"))


def test_hash_powers_and_text_codes_are_numpy_and_pandas_own():
    """The hash's powers by one running product are np.power's (modulo 2 ** 64, past the wrap), and the text codes
    factorized without the missing-value pass are pd.factorize's with missing values kept, also where some are."""
    import pandas as pd

    places = np.arange(3000, dtype=np.uint64)
    assert np.array_equal(match_features._powers(3000)[places.astype(np.int64)],
                          np.power(np.uint64(match_features.HASH_BASE), places))
    for values in (["a", "b", "a"], ["a", None, "b", None], [None], [], [math.nan, "x", pd.NA, None, "x"]):
        array = np.empty(len(values), dtype=object)
        array[:] = values
        (codes, uniques), (want, distinct) = match_features._factorized(array), pd.factorize(array,
                                                                                              use_na_sentinel=False)
        assert np.array_equal(codes, want) and list(map(repr, uniques)) == list(map(repr, distinct))
