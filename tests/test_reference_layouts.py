"""The fused-tensor layouts of the reference models, on hand-built numpy arrays and torch tensors."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.reference.config import ModelConfig
from workbench.reference.layouts import (deinterleave_rows, fuse_gate_up, fuse_grouped_qkv, interleave_rows,
                                         split_gate_up, split_grouped_qkv)

GATE, UP = np.array([[1.], [2.], [3.]]), np.array([[10.], [20.], [30.]])    # rows g0 g1 g2, u0 u1 u2


def assert_all_equal(got, want):
    got, want = list(got), list(want)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=False):
        assert a.shape == b.shape and np.array_equal(np.asarray(a), np.asarray(b))


# ----------------------------------------------------------------------------- grouped q/k/v

def test_grouped_qkv_by_hand_with_one_row_per_head():
    """nh=4 heads, ng=2 groups, d=1, h=1:  rows = [q0 q1 k0 v0 | q2 q3 k1 v1]."""
    q, k, v = np.array([[10.], [11.], [12.], [13.]]), np.array([[20.], [21.]]), np.array([[30.], [31.]])
    fused = fuse_grouped_qkv(q, k, v, num_heads=4, num_groups=2, head_dim=1)
    assert fused[:, 0].tolist() == [10, 11, 20, 30, 12, 13, 21, 31]
    assert_all_equal(split_grouped_qkv(fused, 4, 2, 1), (q, k, v))
    bias = fuse_grouped_qkv(q[:, 0], k[:, 0], v[:, 0], 4, 2, 1)          # 1-D biases use the same layout
    assert bias.tolist() == [10, 11, 20, 30, 12, 13, 21, 31]
    assert_all_equal(split_grouped_qkv(bias, 4, 2, 1), (q[:, 0], k[:, 0], v[:, 0]))


def test_grouped_qkv_by_hand_with_wide_heads():
    """nh=4, ng=2, d=2, h=3: each head is d consecutive rows."""
    nh, ng, d, h = 4, 2, 2, 3
    q = np.arange(nh * d * h, dtype=np.float32).reshape(nh * d, h)
    k = 100 + np.arange(ng * d * h, dtype=np.float32).reshape(ng * d, h)
    v = 200 + np.arange(ng * d * h, dtype=np.float32).reshape(ng * d, h)
    fused = np.concatenate([q[0:4], k[0:2], v[0:2], q[4:8], k[2:4], v[2:4]])
    assert np.array_equal(fuse_grouped_qkv(q, k, v, nh, ng, d), fused)
    assert_all_equal(split_grouped_qkv(fused, nh, ng, d), (q, k, v))
    assert np.array_equal(split_grouped_qkv(fused[:, 0], nh, ng, d)[1], k[:, 0])


@pytest.mark.parametrize("nh, ng", [(4, 2), (4, 4), (6, 1)], ids=["gqa", "mha", "mqa"])
def test_grouped_qkv_round_trips_and_infers_head_dim(nh, ng):
    d, h = 4, 5
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(nh * d, h)), rng.normal(size=(ng * d, h)), rng.normal(size=(ng * d, h))
    fused = fuse_grouped_qkv(q, k, v, nh, ng)                            # head_dim inferred from k
    assert fused.shape == ((nh + 2 * ng) * d, h)
    assert np.array_equal(fused, fuse_grouped_qkv(q, k, v, nh, ng, d))
    assert_all_equal(split_grouped_qkv(fused, nh, ng), (q, k, v))       # head_dim inferred from the rows
    assert np.array_equal(fuse_grouped_qkv(*split_grouped_qkv(fused, nh, ng, d), nh, ng, d), fused)


def test_grouped_qkv_on_torch_tensors():
    torch = pytest.importorskip("torch")
    fused = torch.arange(16 * 3, dtype=torch.float32).reshape(16, 3)   # nh=4, ng=2, d=2
    parts = split_grouped_qkv(fused, 4, 2)
    assert all(isinstance(p, torch.Tensor) for p in parts)
    assert torch.equal(parts[1], torch.cat([fused[4:6], fused[12:14]]))
    assert torch.equal(fuse_grouped_qkv(*parts, 4, 2, 2), fused)


def hand_built_megatron_qkv(q, k, v, num_groups):
    """Megatron ``linear_qkv`` written out block by block: per group g its query heads, then k_g, then v_g."""
    q_rows, kv_rows = q.shape[0] // num_groups, k.shape[0] // num_groups
    blocks = []
    for g in range(num_groups):
        blocks += [q[g * q_rows:(g + 1) * q_rows], k[g * kv_rows:(g + 1) * kv_rows], v[g * kv_rows:(g + 1) * kv_rows]]
    return np.concatenate(blocks)


def test_mindformers_w_qkv_splits_like_the_megatron_linear_qkv_of_the_same_q_k_v():
    ms_model = pytest.importorskip("workbench.reference.ms_model")        # needs mindspore
    cfg = ModelConfig(qkv_bias=True, num_attention_heads=8, num_kv_heads=2)
    nh, ng, d, h = cfg.num_attention_heads, cfg.num_kv_heads, cfg.head_dim, cfg.hidden_size
    rng = np.random.default_rng(4)
    prefix = "model.layers.0.attention."
    separate = {}
    for part, rows in (("wq", nh * d), ("wk", ng * d), ("wv", ng * d)):
        separate[f"{prefix}{part}.weight"] = rng.normal(size=(rows, h)).astype(np.float32)
        separate[f"{prefix}{part}.bias"] = rng.normal(size=rows).astype(np.float32)
    fused = ms_model.fuse_weights(separate, cfg)                         # MindFormers qkv_concat names
    for kind in ("weight", "bias"):
        q, k, v = (separate[f"{prefix}{part}.{kind}"] for part in ("wq", "wk", "wv"))
        w_qkv, linear_qkv = fused[f"{prefix}w_qkv.{kind}"], hand_built_megatron_qkv(q, k, v, ng)
        assert np.array_equal(w_qkv, linear_qkv)
        mindformers, megatron = split_grouped_qkv(w_qkv, nh, ng, d), split_grouped_qkv(linear_qkv, nh, ng, d)
        assert_all_equal(mindformers, megatron)
        assert_all_equal(mindformers, (q, k, v))


# ----------------------------------------------------------------------------- gate/up blocks

def test_gate_up_by_hand():
    """linear_fc1 rows = [g0 g1 g2 | u0 u1 u2]."""
    fused = fuse_gate_up(GATE, UP)
    assert fused[:, 0].tolist() == [1, 2, 3, 10, 20, 30]
    assert_all_equal(split_gate_up(fused), (GATE, UP))


def test_gate_up_round_trips_on_numpy_and_torch():
    fused = np.random.default_rng(1).normal(size=(8, 5))
    assert np.array_equal(fuse_gate_up(*split_gate_up(fused)), fused)
    torch = pytest.importorskip("torch")
    tensor = torch.from_numpy(fused)
    gate, up = split_gate_up(tensor)
    assert torch.equal(gate, tensor[:4]) and torch.equal(up, tensor[4:])
    assert torch.equal(fuse_gate_up(gate, up), tensor)


# ----------------------------------------------------------------------------- row interleave

def test_interleave_rows_by_hand():
    """gate [g0 g1 g2], up [u0 u1 u2] -> w_gate_hidden rows [g0 u0 g1 u1 g2 u2]."""
    fused = interleave_rows(GATE, UP)
    assert fused[:, 0].tolist() == [1, 10, 2, 20, 3, 30]
    assert_all_equal(deinterleave_rows(fused), (GATE, UP))


def test_interleave_rows_of_stacked_experts_round_trips():
    experts = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)        # [E, F, h]
    stacked = interleave_rows(experts, -experts)
    assert stacked.shape == (2, 6, 4)
    assert np.array_equal(stacked[1, 2], experts[1, 1]) and np.array_equal(stacked[1, 3], -experts[1, 1])
    gate, up = deinterleave_rows(stacked)
    assert_all_equal((gate, up), (experts, -experts))
    assert gate.flags.owndata and up.flags.owndata                       # copies, not views of the fused array


def test_interleave_rows_on_torch_tensors():
    torch = pytest.importorskip("torch")
    gate, up = torch.ones(3, 2), torch.full((3, 2), 2.0)
    fused = interleave_rows(gate, up)
    assert fused[:, 0].tolist() == [1, 2, 1, 2, 1, 2]
    back = deinterleave_rows(fused)
    assert torch.equal(back[0], gate) and torch.equal(back[1], up)
