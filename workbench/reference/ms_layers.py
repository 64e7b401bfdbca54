"""The MindSpore Cells of the MindFormers-style reference decoder (see :mod:`.ms_model` for the names).

``Linear`` (weight [out, in], or [E, out, in] for stacked experts), ``RMSNorm``, ``Embedding``,
``Attention`` (GQA, rotate-half RoPE, causal additive mask, optional q/k norm, separate ``wq|wk|wv`` or
fused ``w_qkv``), ``FeedForward`` (SwiGLU, separate ``w1|w3`` or row-interleaved ``w_gate_hidden``),
``Router``, ``RoutedExperts`` and ``MoEWithShared``. Each Cell takes the dtypes of
:func:`resolve_precision`; the fused layouts are sketched in :mod:`workbench.reference.layouts`.
"""
from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops

from .config import ModelConfig, PrecisionConfig

MASK_VALUE = -10000.0  # MindFormers' additive causal mask (LowerTriangularMaskWithDynamic)
_DTYPES = {"fp32": ms.float32, "float32": ms.float32, "fp16": ms.float16, "float16": ms.float16,
           "bf16": ms.bfloat16, "bfloat16": ms.bfloat16}


def resolve_precision(precision: PrecisionConfig) -> tuple[dict, list[str]]:
    """MindSpore dtypes per knob; bf16 compute knobs fall back to fp32 (CPU), with one note each."""
    dtypes, notes = {}, []
    for knob, name in vars(precision).items():
        dtype = _DTYPES[name]
        if dtype == ms.bfloat16 and knob != "param_dtype":
            notes.append(f"{knob}=bf16 cannot compute on MindSpore CPU: computing in fp32")
            dtype = ms.float32
        dtypes[knob] = dtype
    return dtypes, notes


def accelerator_matmul(a, b):
    """``a @ b`` on fp16/bf16 operands as the Ascend Cube unit computes it: products accumulated in fp32, the
    result rounded once to the operands' dtype (the torch side's ``torch_layers.accelerator_matmul``)."""
    if a.dtype == ms.float32:
        return ops.matmul(a, b)
    return ops.cast(ops.matmul(ops.cast(a, ms.float32), ops.cast(b, ms.float32)), a.dtype)


class Linear(nn.Cell):
    """MindFormers ``Linear``: weight [out, in] (or [E, out, in] for stacked experts), y = x W^T (+ b)."""

    def __init__(self, shape: tuple, bias: bool, dtypes: dict, compute=None):
        super().__init__()
        self.compute = compute or dtypes["compute_dtype"]
        self.weight = Parameter(Tensor(np.zeros(shape), dtypes["param_dtype"]), name="weight")
        self.has_bias = bias
        if bias:
            self.bias = Parameter(Tensor(np.zeros(shape[0]), dtypes["param_dtype"]), name="bias")

    def construct(self, x):
        weight = ops.cast(self.weight, self.compute)
        if not self.has_bias:
            return accelerator_matmul(ops.cast(x, self.compute), weight.swapaxes(-1, -2))
        y = ops.matmul(ops.cast(x, ms.float32), ops.cast(weight, ms.float32).swapaxes(-1, -2))
        return ops.cast(y + ops.cast(ops.cast(self.bias, self.compute), ms.float32), self.compute)


class RMSNorm(nn.Cell):
    """y = x * rsqrt(mean(x**2) + eps) * w on x in the norm dtype; output in ``out_dtype``.

    The mean of squares and the rsqrt are computed in fp32, ``x * rsqrt`` is cast back to the norm dtype
    and multiplied by the weight there: MindFormers ``LlamaRMSNorm`` (llama_layer.py) runs the fused
    ``RmsNorm`` kernel (fp32 statistics) or casts to ``layernorm_compute_type`` (default fp32) and casts
    back before the weight. An fp16 rsqrt overflows in backward at small activations (nan gradients).
    """

    def __init__(self, dim: int, eps: float, dtypes: dict):
        super().__init__()
        self.weight = Parameter(Tensor(np.ones(dim), dtypes["param_dtype"]), name="weight")
        self.eps, self.norm_dtype, self.out_dtype = eps, dtypes["norm_dtype"], dtypes["compute_dtype"]

    def construct(self, x):
        wide = ops.cast(ops.cast(x, self.norm_dtype), ms.float32)
        variance = ops.mean(wide * wide, -1, True)
        y = ops.cast(wide * ops.rsqrt(variance + self.eps), self.norm_dtype)
        return ops.cast(y * ops.cast(self.weight, self.norm_dtype), self.out_dtype)


class Embedding(nn.Cell):
    """``LlamaEmbedding``: rows of ``embedding_weight`` gathered in the embedding dtype."""

    def __init__(self, vocab: int, hidden: int, dtypes: dict):
        super().__init__()
        self.embedding_weight = Parameter(Tensor(np.zeros((vocab, hidden)), dtypes["param_dtype"]),
                                          name="embedding_weight")
        self.dtype = dtypes["embedding_dtype"]

    def construct(self, tokens):
        return ops.gather(ops.cast(self.embedding_weight, self.dtype), tokens, 0)


def rotary_tables(head_dim: int, seq_length: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin [s, d] of rotate-half RoPE, computed like MindFormers ``FreqsMgr`` (numpy float32)."""
    inv = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    freqs = np.outer(np.arange(seq_length, dtype=np.float32), inv.astype(np.float32))
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


class Attention(nn.Cell):
    """GQA self-attention, causal additive mask, optional q/k RMSNorm, fused or separate q/k/v."""

    def __init__(self, cfg: ModelConfig, dtypes: dict, qkv_concat: bool, softmax_dtype=None,
                 rotary_base: float | None = None):
        super().__init__()
        h, d, n, nkv = cfg.hidden_size, cfg.head_dim, cfg.num_attention_heads, cfg.num_kv_heads
        self.n, self.nkv, self.d, self.rep, self.qkv_concat = n, nkv, d, n // nkv, qkv_concat
        if qkv_concat:
            self.w_qkv = Linear(((n + 2 * nkv) * d, h), cfg.qkv_bias, dtypes)
        else:
            self.wq = Linear((n * d, h), cfg.qkv_bias, dtypes)
            self.wk = Linear((nkv * d, h), cfg.qkv_bias, dtypes)
            self.wv = Linear((nkv * d, h), cfg.qkv_bias, dtypes)
        self.wo = Linear((h, n * d), False, dtypes)
        self.qk_norm = cfg.qk_norm
        if cfg.qk_norm:
            self.q_norm = RMSNorm(d, cfg.norm_epsilon, dtypes)
            self.k_norm = RMSNorm(d, cfg.norm_epsilon, dtypes)
        cos, sin = rotary_tables(d, cfg.seq_length, cfg.rotary_base if rotary_base is None else rotary_base)
        self.cos, self.sin = Tensor(cos, dtypes["rotary_dtype"]), Tensor(sin, dtypes["rotary_dtype"])
        causal = np.triu(np.full((cfg.seq_length, cfg.seq_length), MASK_VALUE, np.float32), 1)
        self.mask = Tensor(causal, dtypes["compute_dtype"])
        self.scale = Tensor(1.0 / np.sqrt(d), dtypes["compute_dtype"])
        self.compute, self.rotary = dtypes["compute_dtype"], dtypes["rotary_dtype"]
        self.softmax_dtype = softmax_dtype or dtypes["softmax_dtype"]  # an override plants a fault (ms_model)

    def _project(self, x, b, s):
        if self.qkv_concat:
            qkv = self.w_qkv(x).reshape(b, s, self.nkv, (self.rep + 2) * self.d)
            q, k, v = ops.split(qkv, (self.rep * self.d, self.d, self.d), 3)
        else:
            q, k, v = self.wq(x), self.wk(x), self.wv(x)
        return q.reshape(b, s, self.n, self.d), k.reshape(b, s, self.nkv, self.d), v.reshape(b, s, self.nkv, self.d)

    def apply_rotary(self, x, s):
        """x' = x*cos + rotate_half(x)*sin with rotate_half(x) = cat(-x2, x1), in the rotary dtype."""
        x = ops.cast(x, self.rotary)
        half = self.d // 2
        rotated = ops.cat((-x[..., half:], x[..., :half]), -1)
        return ops.cast(x * self.cos[:s] + rotated * self.sin[:s], self.compute)

    def _repeat_kv(self, x, b, s):
        """[b, nkv, s, d] -> [b, n, s, d]; query head j reads kv group j // rep."""
        x = ops.broadcast_to(x.reshape(b, self.nkv, 1, s, self.d), (b, self.nkv, self.rep, s, self.d))
        return x.reshape(b, self.n, s, self.d)

    def construct(self, x):
        b, s, _ = x.shape
        q, k, v = self._project(x, b, s)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q = self.apply_rotary(q.transpose(0, 2, 1, 3), s)
        k = self._repeat_kv(self.apply_rotary(k.transpose(0, 2, 1, 3), s), b, s)
        v = self._repeat_kv(ops.cast(v, self.compute).transpose(0, 2, 1, 3), b, s)
        scores = accelerator_matmul(q, k.swapaxes(-1, -2)) * self.scale + self.mask[:s, :s]
        probs = ops.cast(ops.softmax(ops.cast(scores, self.softmax_dtype), -1), self.compute)
        context = accelerator_matmul(probs, v).transpose(0, 2, 1, 3).reshape(b, s, self.n * self.d)
        return self.wo(context)


class FeedForward(nn.Cell):
    """SwiGLU ``w2(silu(w1 x) * w3 x)``; ``experts`` > 0 stacks [E, out, in]; ``fused``: w_gate_hidden."""

    def __init__(self, hidden: int, ffn: int, dtypes: dict, fused: bool = False, experts: int = 0):
        super().__init__()
        lead = (experts,) if experts else ()
        self.fused, self.ffn = fused, ffn
        if fused:
            self.w_gate_hidden = Linear(lead + (2 * ffn, hidden), False, dtypes)
        else:
            self.w1 = Linear(lead + (ffn, hidden), False, dtypes)
        self.w2 = Linear(lead + (hidden, ffn), False, dtypes)
        if not fused:
            self.w3 = Linear(lead + (ffn, hidden), False, dtypes)

    def construct(self, x):
        if self.fused:  # rows interleaved [g0, u0, g1, u1, ...]
            gate_up = self.w_gate_hidden(x)
            gate_up = gate_up.reshape(gate_up.shape[:-1] + (self.ffn, 2))
            gate, up = gate_up[..., 0], gate_up[..., 1]
        else:
            gate, up = self.w1(x), self.w3(x)
        return self.w2(ops.silu(gate) * up)


class Router(nn.Cell):
    """``Router``: ``dense`` [E, h] kept and computed in fp32 (router_dense_type)."""

    def __init__(self, hidden: int, experts: int, dtypes: dict):
        super().__init__()
        self.dense = Linear((experts, hidden), False, dict(dtypes, param_dtype=ms.float32), compute=ms.float32)

    def construct(self, x):
        return self.dense(x)


class RoutedExperts(nn.Cell):
    """MoEV2-style: top-k of fp32 router logits, softmax over the k selected logits, no token drop.

    Every expert runs on every token; unselected experts get combine weight exactly 0.
    """

    def __init__(self, cfg: ModelConfig, dtypes: dict, fused: bool):
        super().__init__()
        self.ffn = FeedForward(cfg.hidden_size, cfg.expert_ffn_size, dtypes, fused, cfg.num_experts)
        self.router = Router(cfg.hidden_size, cfg.num_experts, dtypes)
        self.experts, self.topk, self.compute = cfg.num_experts, cfg.moe_router_topk, dtypes["compute_dtype"]

    def construct(self, x):
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        top_logits, top_index = ops.topk(self.router(tokens), self.topk)
        weights = ops.softmax(top_logits, -1)
        one_hot = ops.one_hot(top_index, self.experts, Tensor(1.0, ms.float32), Tensor(0.0, ms.float32))
        combine = (one_hot * weights.expand_dims(-1)).sum(1)                    # [T, E]
        expert_in = ops.broadcast_to(ops.cast(tokens, self.compute), (self.experts,) + tokens.shape)
        expert_out = self.ffn(expert_in)                                        # [E, T, h]
        weighted = ops.cast(expert_out, ms.float32) * combine.T.expand_dims(-1)  # accumulate in fp32
        return ops.cast(weighted.sum(0), self.compute).reshape(shape)


class MoEWithShared(nn.Cell):
    """``LlamaFeedForwardWithMoE``: routed experts + an ungated shared expert."""

    def __init__(self, cfg: ModelConfig, dtypes: dict):
        super().__init__()
        self.routed_experts = RoutedExperts(cfg, dtypes, False)
        self.shared_experts = FeedForward(cfg.hidden_size, cfg.shared_expert_size, dtypes, False)

    def construct(self, x):
        return self.routed_experts(x) + self.shared_experts(x)
