"""Named transforms, chained pipelines, shape expressions and name templates (workbench.spec)."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.reference.layouts import (fuse_row_blocks, rope_halves_to_pairs, rope_pairs_to_halves,
                                         split_row_blocks)
from workbench.spec.expr import Expr, ExprError, parse, solve_one
from workbench.spec.pipeline import Pipeline
from workbench.spec.templates import Template, TemplateError, skeleton_of, split_parts_key
from workbench.spec.transforms import TRANSFORM_NAMES, DtypeCast, VocabPad, expand, resize_rows
from workbench.tensors.base import bf16_bits_to_fp32, fp32_to_bf16_bits

RNG = np.random.default_rng(0)


def column(values):
    return np.array(values, dtype=np.float32)[:, None]


def fuse(names, parts, groups=1, args=None, reshape=None):
    return Pipeline(expand(names)).fuse(parts, groups, args or {}, reshape)


def split(names, array, shapes, groups=1, args=None, reshape=None):
    pipeline = Pipeline(expand(names), None if reshape is None else tuple(Expr.const(d) for d in reshape))
    return pipeline.split(array, shapes, groups, args or {})


# ----------------------------------------------------------------------------- each transform by hand

def test_concat0_and_plain_qkv_blocks_are_row_blocks():
    gate, up = column([1, 2]), column([10, 20])
    assert fuse(["concat0"], [gate, up])[:, 0].tolist() == [1, 2, 10, 20]
    q, k, v = column([1, 2, 3, 4]), column([5, 6]), column([7, 8])
    fused = fuse(["plain_qkv_blocks"], [q, k, v])
    assert fused[:, 0].tolist() == [1, 2, 3, 4, 5, 6, 7, 8]                 # [Q; K; V], no grouping
    back = split(["plain_qkv_blocks"], fused, [q.shape, k.shape, v.shape])
    assert [b[:, 0].tolist() for b in back] == [[1, 2, 3, 4], [5, 6], [7, 8]]


def test_grouped_qkv_groups_rows_per_kv_group():
    q, k, v = column([10, 11, 12, 13]), column([20, 21]), column([30, 31])        # nh=4, ng=2, d=1
    args = {"heads": 4, "groups": 2}
    fused = fuse(["grouped_qkv"], [q, k, v], args=args)
    assert fused[:, 0].tolist() == [10, 11, 20, 30, 12, 13, 21, 31]
    assert [p[:, 0].tolist() for p in split(["grouped_qkv"], fused, [(4, 1), (2, 1), (2, 1)], args=args)] == \
        [[10, 11, 12, 13], [20, 21], [30, 31]]


def test_row_interleave_alternates_gate_and_up():
    fused = fuse(["row_interleave"], [column([1, 2, 3]), column([10, 20, 30])])
    assert fused[:, 0].tolist() == [1, 10, 2, 20, 3, 30]
    gate, up = split(["row_interleave"], fused, [(3, 1), (3, 1)])
    assert gate[:, 0].tolist() == [1, 2, 3] and up[:, 0].tolist() == [10, 20, 30]


def test_rope_permute_moves_rotate_half_rows_to_adjacent_pairs():
    hub = column(range(8))                                  # one head, d=8: x = rows 0..3, y = rows 4..7
    meta = fuse(["rope_permute"], [hub], args={"heads": 1})
    assert meta[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    assert np.array_equal(split(["rope_permute"], meta, [hub.shape], args={"heads": 1})[0], hub)
    two_heads = column(range(16))
    assert rope_halves_to_pairs(two_heads, 2)[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7,
                                                                 8, 12, 9, 13, 10, 14, 11, 15]


def test_rope_permute_matches_hf_convert_llama_permute():
    """HF convert_llama_weights_to_hf: permute(w) = w.view(n, d/2, 2, h).transpose(1, 2).reshape(n*d, h)."""
    n, d, h = 3, 8, 5
    meta = RNG.normal(size=(n * d, h))
    hf = meta.reshape(n, d // 2, 2, h).transpose(0, 2, 1, 3).reshape(n * d, h)
    assert np.array_equal(rope_pairs_to_halves(meta, n), hf)
    assert np.array_equal(rope_halves_to_pairs(hf, n), meta)


def test_transpose_and_stack_experts():
    experts = [RNG.normal(size=(3, 2)) for _ in range(4)]
    stacked = fuse(["stack_experts"], experts, groups=4)
    assert stacked.shape == (4, 3, 2) and np.array_equal(stacked[2], experts[2])
    stacked_t = fuse(["stack_experts_transposed"], experts, groups=4)
    assert stacked_t.shape == (4, 2, 3) and np.array_equal(stacked_t[1], experts[1].T)
    back = split(["stack_experts_transposed"], stacked_t, [(3, 2)], groups=4)
    assert all(np.array_equal(a, b) for a, b in zip(back, experts, strict=False))


def test_grouped_gemm_weight1_is_megatron_view_of_per_expert_fc1_transposed():
    """Megatron GroupedMLP: w1 = weight1.view(E, h, -1); expert e computes x @ w1[e] = x @ [gate_e; up_e]^T."""
    experts, hidden, ffn = 3, 4, 2
    gates = [RNG.normal(size=(ffn, hidden)) for _ in range(experts)]
    ups = [RNG.normal(size=(ffn, hidden)) for _ in range(experts)]
    parts = [array for pair in zip(gates, ups, strict=False) for array in pair]
    weight1 = fuse(["concat0", "transpose", "stack"], parts, groups=experts, reshape=(hidden, experts * 2 * ffn))
    view = weight1.reshape(experts, hidden, -1)
    x = RNG.normal(size=(5, hidden))
    for e in range(experts):
        assert np.allclose(x @ view[e], np.concatenate([x @ gates[e].T, x @ ups[e].T], axis=1))
    back = split(["concat0", "transpose", "stack"], weight1, [(ffn, hidden), (ffn, hidden)], groups=experts,
                 reshape=(hidden, experts * 2 * ffn))
    assert all(np.array_equal(a, b) for a, b in zip(back, parts, strict=False))


def test_stacked_row_interleave_per_expert():
    parts = [column([1, 2]), column([10, 20]), column([3, 4]), column([30, 40])]      # e0 gate/up, e1 gate/up
    fused = fuse(["row_interleave", "stack"], parts, groups=2)
    assert fused[:, :, 0].tolist() == [[1, 10, 2, 20], [3, 30, 4, 40]]


def test_vocab_pad_adds_zero_rows_and_cuts_back():
    embed = RNG.normal(size=(5, 3)).astype(np.float32)
    padded = VocabPad().fuse([embed], {"rows": 8})
    assert padded.shape == (8, 3) and not padded[5:].any() and np.array_equal(padded[:5], embed)
    assert np.array_equal(VocabPad().split(padded, [(5, 3)], {})[0], embed)
    assert resize_rows(padded, 5).shape == (5, 3)


def test_dtype_cast_round_trips_widening_and_rounds_narrowing():
    bits = fp32_to_bf16_bits(RNG.normal(size=7).astype(np.float32))
    widen = DtypeCast("bf16", "fp32")
    assert np.array_equal(widen.split(widen.fuse([bits]))[0], bits)
    assert np.array_equal(widen.fuse([bits]), bf16_bits_to_fp32(bits))


def test_every_transform_is_bit_exact_on_bf16_raw_bits():
    bits = RNG.integers(0, 2 ** 16, size=(12, 3), dtype=np.uint16)        # includes NaN / inf patterns
    cases = {"rename": [bits], "transpose": [bits], "concat0": [bits, bits[:4]], "plain_qkv_blocks": [bits, bits[:4],
             bits[:4]], "grouped_qkv": [bits, bits[:6], bits[:6]], "row_interleave": [bits, bits],
             "rope_permute": [bits]}
    for name, parts in cases.items():
        args = {"heads": 4, "groups": 2} if name == "grouped_qkv" else {"heads": 2}
        fused = fuse([name], parts, args=args)
        back = split([name], fused, [p.shape for p in parts], args=args)
        assert all(a.dtype == np.uint16 and np.array_equal(a, b) for a, b in zip(back, parts, strict=False)), name
    assert set(TRANSFORM_NAMES) >= set(cases) | {"stack", "stack_experts", "stack_experts_transposed", "vocab_pad"}


def test_row_blocks_layout_helpers():
    parts = [column([1]), column([2, 3]), column([4, 5, 6])]
    fused = fuse_row_blocks(parts)
    assert [p[:, 0].tolist() for p in split_row_blocks(fused, [1, 2, 3])] == [[1], [2, 3], [4, 5, 6]]
    with pytest.raises(ValueError):
        split_row_blocks(fused, [1, 2])


def test_symbolic_shapes_compose_like_numbers():
    heads, groups, d, hidden = (parse(n, {"num_heads", "num_kv_heads", "head_dim", "hidden"}) for n in
                                ("num_heads", "num_kv_heads", "head_dim", "hidden"))
    pipeline = Pipeline(expand(["grouped_qkv"]))
    shape = pipeline.shape([(heads * d, hidden), (groups * d, hidden), (groups * d, hidden)], 1, {})
    env = {"num_heads": 8, "num_kv_heads": 2, "head_dim": 4, "hidden": 32}
    assert [dim.evaluate(env) for dim in shape] == [48, 32]


# ----------------------------------------------------------------------------- expressions and templates

def test_expressions_parse_evaluate_and_solve():
    known = {"num_heads", "num_kv_heads", "head_dim"}
    expr = parse("(num_heads+2*num_kv_heads)*head_dim", known)
    assert expr.evaluate({"num_heads": 32, "num_kv_heads": 8, "head_dim": 128}) == 6144
    assert str(expr) == "(num_heads+2*num_kv_heads)*head_dim"
    assert solve_one(expr, 6144, {"num_heads": 32, "head_dim": 128}, "num_kv_heads") == 8
    assert solve_one(expr, 6145, {"num_heads": 32, "head_dim": 128}, "num_kv_heads") is None
    for bad in ("num_heads/2", "num_heads-1", "nheads", "f(x)", True):
        with pytest.raises(ExprError):
            parse(bad, known)


def test_templates_are_anchored_and_exact():
    template = Template.parse("decoder.layers.{i}.mlp.experts.linear_fc1.weight{e}")
    assert template.match("decoder.layers.12.mlp.experts.linear_fc1.weight7") == {"i": 12, "e": 7}
    assert template.match("x.decoder.layers.1.mlp.experts.linear_fc1.weight7") is None     # anchored start
    assert template.match("decoder.layers.1.mlp.experts.linear_fc1.weight7.bias") is None  # anchored end
    assert template.match("decoder.layers.01.mlp.experts.linear_fc1.weight7") is None      # no leading zeros
    assert template.format({"i": 3, "e": 0}) == "decoder.layers.3.mlp.experts.linear_fc1.weight0"
    assert skeleton_of("decoder.layers.3.mlp.experts.linear_fc1.weight0") == template.skeleton
    assert split_parts_key("layers.{i}.attn.[q,k,v]") == ("layers.{i}.attn.q", "layers.{i}.attn.k",
                                                          "layers.{i}.attn.v")


@pytest.mark.parametrize("text", ["a.{j}.b", "a.{i}.{i}", "a.{i}{e}.b", "a.w1{e}", "a.{i}1.b", "a.}b", "a.{i.b"])
def test_bad_templates_are_refused(text):
    with pytest.raises(TemplateError):
        Template.parse(text)
