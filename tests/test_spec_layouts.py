"""Layout transforms on both axes: weights fuse on rows (axis 0 / -2), activations on the last axis."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.spec import layouts

RNG = np.random.default_rng(1)


def _activation(weight_parts, fuse_weights):
    """The activation ``x @ W.T`` of a fused weight is the fused activations on the last axis."""
    x = RNG.standard_normal((3, 2, weight_parts[0].shape[1])).astype(np.float32)
    return x, [x @ part.T for part in weight_parts], x @ fuse_weights(weight_parts).T


def test_grouped_qkv_on_both_axes():
    q, k, v = (RNG.standard_normal((rows, 5)).astype(np.float32) for rows in (8, 4, 4))   # nh=4, ng=2, d=2
    fused_w = layouts.fuse_grouped_qkv(q, k, v, 4, 2)
    assert fused_w[:, 0].tolist() == [*q[:4, 0], *k[:2, 0], *v[:2, 0], *q[4:, 0], *k[2:, 0], *v[2:, 0]]
    x, acts, fused_act = _activation([q, k, v], lambda parts: layouts.fuse_grouped_qkv(*parts, 4, 2))
    assert np.array_equal(layouts.fuse_grouped_qkv(*acts, 4, 2, axis=-1), fused_act)
    back = layouts.split_grouped_qkv(fused_act, 4, 2, axis=-1)
    assert all(np.array_equal(b, a) for b, a in zip(back, acts, strict=True))
    assert all(np.array_equal(b, a) for b, a in zip(layouts.split_grouped_qkv(fused_w, 4, 2), (q, k, v), strict=True))


def test_gate_up_blocks_on_both_axes():
    gate, up = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)
    assert np.array_equal(layouts.fuse_gate_up(gate, up), np.vstack([gate, up]))
    x, acts, fused_act = _activation([gate, up], lambda parts: layouts.fuse_gate_up(*parts))
    assert np.array_equal(layouts.fuse_gate_up(*acts, axis=-1), fused_act)
    assert all(np.array_equal(b, a) for b, a in zip(layouts.split_gate_up(fused_act, axis=-1), acts, strict=True))


def test_row_interleave_on_both_axes():
    gate, up = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)
    fused_w = layouts.interleave_rows(gate, up)
    assert np.array_equal(fused_w[0::2], gate) and np.array_equal(fused_w[1::2], up)
    x, acts, fused_act = _activation([gate, up], lambda parts: layouts.interleave_rows(*parts))
    assert np.array_equal(layouts.interleave_rows(*acts, axis=-1), fused_act)
    assert fused_act[..., 1].tolist() == acts[1][..., 0].tolist()             # [g0 u0 g1 u1 ...] on the last axis
    assert all(np.array_equal(b, a) for b, a in zip(layouts.deinterleave_rows(fused_act, axis=-1), acts, strict=True))


def test_row_blocks_on_both_axes_and_refuse_bad_sizes():
    q, k, v = (RNG.standard_normal((rows, 4)).astype(np.float32) for rows in (4, 2, 2))
    x, acts, fused_act = _activation([q, k, v], layouts.fuse_row_blocks)
    assert np.array_equal(layouts.fuse_row_blocks(acts, axis=-1), fused_act)
    assert all(np.array_equal(b, a) for b, a in zip(layouts.split_row_blocks(fused_act, [4, 2, 2], axis=-1), acts,
                                                    strict=True))
    with pytest.raises(ValueError, match="do not add up to 8"):
        layouts.split_row_blocks(fused_act, [4, 2, 1], axis=-1)


def test_axis_works_on_torch_tensors():
    torch = pytest.importorskip("torch")
    q, k, v = (torch.randn(2, 3, rows) for rows in (8, 4, 4))
    fused = layouts.fuse_grouped_qkv(q, k, v, 4, 2, axis=-1)
    assert isinstance(fused, torch.Tensor) and fused.shape == (2, 3, 16)
    assert all(torch.equal(b, a) for b, a in zip(layouts.split_grouped_qkv(fused, 4, 2, axis=-1), (q, k, v), strict=True))
    gate, up = layouts.deinterleave_rows(layouts.interleave_rows(q, 2 * q, axis=-1), axis=-1)
    assert torch.equal(gate, q) and torch.equal(up, 2 * q)


def test_reference_layouts_is_the_spec_implementation():
    from workbench.reference import layouts as reference_layouts

    assert reference_layouts.split_grouped_qkv is layouts.split_grouped_qkv
