"""Matching of dump tables across frameworks (workbench/dumps/match*.py)."""
from __future__ import annotations

import math
from collections import namedtuple

import pytest
from dump_tables import msprobe_table
from workbench_testing import fixtures_dir

from workbench.dumps.match import match_dumps
from workbench.dumps.match_combine import combine
from workbench.dumps.match_mapping import load_mapping
from workbench.dumps.match_ops import load_operators
from workbench.dumps.schema import as_table
from workbench.errors import InputError

# The contract of workbench/spec/modules.py (dumpspec builds the real one): module path -> ModuleRef | None.
ModuleRef = namedtuple("ModuleRef", "logical layer kind")


def _row(side, order, name, module, io, slot, shape, values, op="linear", pass_="forward"):
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    return {"side": side, "rank": 0, "step": 0, "order": order, "name": name, "op": op, "module_path": module,
            "logical_module": "", "layer": 0, "pass": pass_, "io": io, "slot": slot, "dtype": "float32",
            "shape": shape, "numel": data.size, "max": data.max(), "min": data.min(), "mean": data.mean(),
            "l2norm": float(np.linalg.norm(data)), "nan_count": 0, "inf_count": 0, "md5": "", "stack_id": "",
            "source": "test"}


def test_fused_qkv_compared_on_combined_statistics_exactly():
    import numpy as np

    rng = np.random.default_rng(0)
    q, k, v, x = rng.normal(size=8), rng.normal(size=4), rng.normal(size=4), rng.normal(size=6)
    fused = np.concatenate([q, k, v])
    a = as_table([_row("A", 0, "Module.decoder.layers.0.self_attention.linear_qkv.Linear.forward.0.input.0",
                       "decoder.layers.0.self_attention.linear_qkv", "input", 0, "6", x),
                  _row("A", 1, "Module.decoder.layers.0.self_attention.linear_qkv.Linear.forward.0.output.0",
                       "decoder.layers.0.self_attention.linear_qkv", "output", 0, "16", fused)])
    b = as_table([_row("B", 2 * i + j, f"Cell.model.layers.0.attention.{n}.Linear.forward.0.{io}.0",
                       f"model.layers.0.attention.{n}", io, 0, str(len(t if io == 'output' else x)),
                       t if io == "output" else x)
                  for i, (n, t) in enumerate((("wq", q), ("wk", k), ("wv", v))) for j, io in enumerate(("input", "output"))])
    resolve_a = {"decoder.layers.0.self_attention.linear_qkv":
                 ModuleRef(("layers.0.attn.q", "layers.0.attn.k", "layers.0.attn.v"), 0, "fused")}.get
    resolve_b = {f"model.layers.0.attention.w{n}": ModuleRef((f"layers.0.attn.{n}",), 0, "same") for n in "qkv"}.get
    matching = match_dumps(a, b, resolve_a=resolve_a, resolve_b=resolve_b)
    out = matching.pairs[matching.pairs["io"] == "output"]
    assert len(out) == 1 and out.iloc[0]["relation"] == "fused"
    row = out.iloc[0]
    assert row["b_max"] == fused.max() and row["b_min"] == fused.min()
    assert math.isclose(row["b_mean"], fused.mean(), rel_tol=1e-15)
    assert math.isclose(row["b_l2norm"], float(np.linalg.norm(fused)), rel_tol=1e-15)
    assert row["b_numel"] == 16 and row["logical_module"] == "layers.0.attn.q,layers.0.attn.k,layers.0.attn.v"
    assert (matching.pairs["io"] == "input").sum() == 3          # the shared input against each part's
    assert matching.unmatched.empty


def test_fused_module_on_either_side_pairs_alike_and_leftovers_stay_unmatched():
    """The fused module pairs with its parts whichever side holds it (the B side's fused calls: the second
    direction), a fused call whose parts are not all there and a module without counterpart are unmatched with
    their reasons, once each."""
    import numpy as np

    rng = np.random.default_rng(1)
    q, k, v, x = rng.normal(size=4), rng.normal(size=2), rng.normal(size=2), rng.normal(size=3)
    qkv = "decoder.layers.{}.self_attention.linear_qkv"
    a = as_table([_row("A", 2 * layer + j, f"Module.{qkv.format(layer)}.Linear.forward.0.{io}.0", qkv.format(layer),
                       io, 0, "8", np.concatenate([q, k, v]) if io == "output" else x)
                  for layer in (0, 1) for j, io in enumerate(("input", "output"))]
                 + [_row("A", 9, "Module.extra.Linear.forward.0.output.0", "extra", "output", 0, "3", x)])
    b = as_table([_row("B", 2 * i + j, f"Cell.model.layers.0.attention.{n}.Linear.forward.0.{io}.0",
                       f"model.layers.0.attention.{n}", io, 0, "4", t if io == "output" else x)
                  for i, (n, t) in enumerate((("wq", q), ("wk", k), ("wv", v))) for j, io in enumerate(("input", "output"))]
                 + [_row("B", 7, "Cell.model.layers.1.attention.wq.Linear.forward.0.output.0",
                         "model.layers.1.attention.wq", "output", 0, "4", q)])
    resolve_a = {qkv.format(n): ModuleRef(tuple(f"layers.{n}.attn.{p}" for p in "qkv"), n, "fused") for n in (0, 1)}
    resolve_a["extra"] = ModuleRef(("extra",), None, "same")
    resolve_b = {f"model.layers.{n}.attention.w{p}": ModuleRef((f"layers.{n}.attn.{p}",), n, "same")
                 for n in (0, 1) for p in "qkv"}
    forward = match_dumps(a, b, resolve_a=resolve_a.get, resolve_b=resolve_b.get)
    backward = match_dumps(b, a, resolve_a=resolve_b.get, resolve_b=resolve_a.get)
    for matching, fused_side in ((forward, "a"), (backward, "b")):
        pairs = matching.pairs
        assert (pairs["relation"] == "fused").all() and len(pairs) == 4        # the output and three inputs
        out = pairs[pairs["io"] == "output"].iloc[0]
        parts = "b" if fused_side == "a" else "a"
        assert out[f"{parts}_numel"] == 8 and out[f"{parts}_max"] == max(q.max(), k.max(), v.max())
        assert out[f"{parts}_name"].count("+") == 2 and out[f"{fused_side}_numel"] == 8
        reasons = sorted(matching.unmatched["reason"])
        assert reasons == ["module 'decoder.layers.1.self_attention.linear_qkv' has no counterpart in "
                           + ("B" if fused_side == "a" else "A")] * 2 + [
            "module 'extra' has no counterpart in " + ("B" if fused_side == "a" else "A"),
            "module 'model.layers.1.attention.wq' has no counterpart in " + ("A" if fused_side == "a" else "B")]
    columns = [c for c in forward.pairs.columns if c[:2] in ("a_", "b_")]
    swapped = backward.pairs.rename(columns={c: ("b_" if c[0] == "a" else "a_") + c[2:] for c in columns})
    keys = ["io", "b_name"]                          # the rows' order follows each run's own orders
    assert (forward.pairs.sort_values(keys)[columns].reset_index(drop=True)
            .equals(swapped.sort_values(keys)[columns].reset_index(drop=True)))


def test_combine_of_parts_equals_statistics_of_concatenation():
    import numpy as np

    parts = [np.arange(3.0), np.array([-7.0, 2.5])]
    rows = [{"numel": p.size, "max": p.max(), "min": p.min(), "mean": p.mean(), "l2norm": np.linalg.norm(p),
             "nan_count": 0, "inf_count": 1} for p in parts]
    whole = np.concatenate(parts)
    got = combine(rows)
    assert (got["max"], got["min"], got["numel"], got["inf_count"]) == (2.5, -7.0, 5, 2)
    assert math.isclose(got["mean"], whole.mean()) and math.isclose(got["l2norm"], np.linalg.norm(whole))



def test_combine_of_huge_and_opposite_infinite_statistics_is_ieee():
    """Statistics a dump can hold that ``math.fsum`` and ``** 2`` refuse (squares past the largest double, +inf
    and -inf means, sums that overflow) combine to IEEE inf and nan: the comparison goes on instead of crashing."""
    rows = [{"numel": 2**62, "max": 1e308, "min": -math.inf, "mean": math.inf, "l2norm": 1e308, "nan_count": 0,
             "inf_count": 1},
            {"numel": 2**62, "max": math.nan, "min": 0.0, "mean": -math.inf, "l2norm": 1e300, "nan_count": None,
             "inf_count": 1}]
    got = combine(rows)
    assert got["l2norm"] == math.inf and math.isnan(got["mean"]) and got["numel"] == 2**63
    assert (got["max"], got["min"], got["nan_count"], got["inf_count"]) == (1e308, -math.inf, None, 2)
    huge = [{**rows[0], "mean": 1e308, "l2norm": 1.0}, {**rows[0], "mean": 1e308, "l2norm": 1.0}]
    assert combine(huge)["mean"] == math.inf and combine(huge)["l2norm"] == math.sqrt(2.0)

def _fixture_pair():
    folder = fixtures_dir("dumps")
    return (msprobe_table(folder / "msprobe_pytorch" / "out_statistics_mix", "A"),
            msprobe_table(folder / "msprobe_mindspore" / "out_statistics_mix", "B"))


def test_fixtures_torch_vs_mindspore_modules_matched_without_mapping():
    a, b = _fixture_pair()
    matching = match_dumps(a, b)
    module_rows_b = b[b["name"].str.startswith("Cell.")]
    matched_b = set(matching.pairs["b_name"])
    # msprobe compare: 0 of 28 module rows without a mapping, 19 with a cell mapping (all "error" on dtype)
    # here: every module row of B but the GELU cell's (torch calls gelu as a function: no module to pair)
    missed = set(module_rows_b["name"]) - matched_b
    assert len(matched_b & set(module_rows_b["name"])) >= 20 and all(n.startswith("Cell.gelu.") for n in missed)
    # gamma/beta <-> weight/bias through converters/operators.yaml
    assert "Cell.ln.LayerNorm.forward.0.parameters.gamma" in matched_b
    # every row is either paired or listed with its reason
    assert set(b["name"]) == matched_b | set(matching.unmatched.loc[matching.unmatched["side"] == "B", "name"])
    gelu = matching.unmatched[matching.unmatched["name"].str.startswith("Cell.gelu")]
    assert not gelu.empty and gelu["reason"].str.contains("no counterpart in A").all()
    assert (matching.unmatched["reason"].str.len() > 0).all()
    # operators inside matched modules align through the equivalence table
    ops = matching.pairs[matching.pairs["level"] == "operator"]
    assert {"Functional.layer_norm.0.forward", "Functional.linear.0.forward"} <= set(ops["call_a"])


@pytest.mark.parametrize("which", ["both", "a only", "none"])
def test_unmatched_sides_are_the_side_column_of_the_unmatched_table(which):
    """What a CSV report keeps of the unmatched rows (their side, counted without their reasons) is the table's
    ``side`` column: the same values, type and index, also when a side or both are empty."""
    a, b = _fixture_pair()
    a, b = {"both": (a, b), "a only": (a, b.iloc[:0]), "none": (a.iloc[:0], b.iloc[:0])}[which]
    whole = match_dumps(a, b)
    slim = match_dumps(a, b, unmatched_sides=True)
    assert list(slim.unmatched.columns) == ["side"] and slim.unmatched.equals(whole.unmatched[["side"]])
    assert slim.unmatched["side"].dtype == whole.unmatched["side"].dtype
    assert slim.unmatched.index.equals(whole.unmatched.index) and slim.pairs.equals(whole.pairs)
    assert which == "none" or set(whole.unmatched["side"]) >= {"A"}


def test_mapping_file_adds_pairs_and_bad_mapping_is_one_line_error(tmp_path):
    a, b = _fixture_pair()
    good = tmp_path / "map.yaml"
    good.write_text("calls:\n  Functional.gelu.0.forward: Functional.gelu.0.forward\n")
    matching = match_dumps(a, b, mapping=load_mapping(good))
    assert (matching.pairs["level"] == "mapping").sum() >= 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("modules:\n  fc1: [not, a, name]\n")
    with pytest.raises(InputError) as error:
        load_mapping(bad)
    assert "bad.yaml:2" in str(error.value) and "modules.fc1" in str(error.value)


def test_operator_table_rejects_a_name_in_two_classes(tmp_path):
    path = tmp_path / "operators.yaml"
    path.write_text("operators:\n  linear: [MatMul]\n  other: [matmul]\n")
    with pytest.raises(InputError) as error:
        load_operators(path)
    assert "operators.yaml:3" in str(error.value) and "already in class" in str(error.value)
    assert load_operators().op_class("Primitive.matmul.MatMul") == load_operators().op_class("Functional.linear")


@pytest.mark.parametrize("text, words", [
    ("operators:\n  linear: [MatMul]\nlayout_only: [reshape]\n", "expected a mapping dtype -> relative tolerance"),
    ("operators:\n  linear: [MatMul]\nlayout_only: [reshape]\ntolerances: {float32: 2, default: 1.0e-4}\n", "float32: expected a relative"),
    ("operators:\n  linear: [MatMul]\nlayout_only: [reshape]\ntolerances: {float32: 1.0e-4}\n", "with a `default`"),
])
def test_tolerances_are_validated_at_load(tmp_path, text, words):
    path = tmp_path / "operators.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        load_operators(path)
    assert "operators.yaml" in str(error.value) and words in str(error.value)
    assert load_operators().tolerances["bfloat16"] > load_operators().tolerances["float32"]


def test_spec_resolvers_resolving_many_paths_match_as_one_path_at_a_time(tmp_path):
    """match_dumps resolves a unit's distinct module paths at once where the resolver can (``resolve.many``); the
    same resolver called one path at a time (a plain function), a mapped path and an unresolvable one included,
    gives the same tables."""
    import pandas as pd

    from workbench.dumps.match import spec_resolver

    def layer_rows(side, path_of, layers):
        rows, order = [], 0
        for n in layers:
            for leaf in path_of(n):
                for io in ("input", "output"):
                    rows.append(_row(side, order, f"Module.{leaf}.Linear.forward.0.{io}.0", leaf, io, 0, "4",
                                     [n, 1.0, 2.0, order]))
                    order += 1
        return as_table(rows)

    a = layer_rows("A", lambda n: [f"decoder.layers.{n}.mlp.linear_fc2", f"decoder.layers.{n}.self_attention.linear_proj",
                                   f"decoder.layers.{n}.odd"], [0, 1, 2, 11, 12])
    b = layer_rows("B", lambda n: [f"model.layers.{n}.feed_forward.w2", f"model.layers.{n}.attention.wo"], [0, 1, 2, 12, 11])
    mapping = tmp_path / "map.yaml"
    mapping.write_text("modules:\n  decoder.layers.1.mlp.linear_fc2: model.layers.2.feed_forward.w2\n")
    resolve_a, resolve_b = spec_resolver("llama", "megatron"), spec_resolver("llama", "mindformers")
    assert resolve_a.many and resolve_b.many
    for mapped in (None, load_mapping(mapping)):
        batch = match_dumps(a, b, resolve_a=resolve_a, resolve_b=resolve_b, mapping=mapped)
        plain = match_dumps(a, b, resolve_a=lambda p: resolve_a(p), resolve_b=lambda p: resolve_b(p), mapping=mapped)
        pd.testing.assert_frame_equal(batch.pairs, plain.pairs)
        pd.testing.assert_frame_equal(batch.unmatched, plain.unmatched)
        assert len(batch.pairs) >= 16 and batch.unmatched["reason"].str.contains("odd").any()
