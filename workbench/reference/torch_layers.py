"""The torch layers of the Megatron-core-style reference GPT (see :mod:`.torch_model` for the names and the
dtypes each computes in): ``RMSNorm``, ``Linear`` (:func:`accelerator_matmul`), rotary tables, causal
``SelfAttention`` (GQA, fused ``linear_qkv``, optional q/k norm), the SwiGLU ``MLP`` and the MoE layer
(``TopKRouter``, ``SequentialMLP``, shared experts). The MindSpore side's Cells are :mod:`.ms_layers`.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig, PrecisionConfig

TORCH_DTYPES = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16,
                "float16": torch.float16, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}


def torch_dtype(name: str) -> torch.dtype:
    """``"fp32" | "fp16" | "bf16"`` (or the long spellings) to a torch dtype."""
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype {name!r} is not one of {sorted(TORCH_DTYPES)}") from None


# --- building blocks ----------------------------------------------------------------------
class Dtypes:
    """The torch dtypes of one ``PrecisionConfig``."""

    def __init__(self, precision: PrecisionConfig):
        self.param = torch_dtype(precision.param_dtype)
        self.compute = torch_dtype(precision.compute_dtype)
        self.embedding = torch_dtype(precision.embedding_dtype)
        self.softmax = torch_dtype(precision.softmax_dtype)
        self.norm = torch_dtype(precision.norm_dtype)
        self.rotary = torch_dtype(precision.rotary_dtype)
        self.residual = torch_dtype(precision.residual_dtype)


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float, dtypes: Dtypes):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size, dtype=dtypes.param))
        self.eps, self.dtypes = eps, dtypes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """RMSNorm of x in norm dtype: mean of squares and rsqrt in fp32, x * rsqrt cast back to the norm
        dtype, times the weight in the norm dtype (``torch.nn.RMSNorm``, which Megatron-core's local spec uses:
        its ``rms_norm`` upcasts half inputs to fp32 for the statistics; an fp16 rsqrt overflows in backward
        at small activations); the result is returned in compute dtype."""
        x = x.to(self.dtypes.norm)
        wide = x.float()
        y = (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps)).to(self.dtypes.norm)
        return (y * self.weight.to(self.dtypes.norm)).to(self.dtypes.compute)


def accelerator_matmul(op, *operands):
    """``op`` (a matmul) on fp16/bf16 operands as GPUs and NPUs compute it: products accumulated in fp32, the
    result rounded once to the operands' dtype (pytorch aten/src/ATen/cuda/CUDABlas.cpp
    ``gemm_internal_cublas_half_helper``: ``cublasGemmEx`` with compute type ``CUDA_R_32F``; the Ascend Cube
    unit accumulates fp16 in fp32). fp32 operands: ``op`` as is. Also 5-10x faster than CPU half kernels."""
    dtype = operands[0].dtype
    if dtype == torch.float32:
        return op(*operands)
    return op(*(None if operand is None else operand.float() for operand in operands)).to(dtype)


class Linear(nn.Module):
    """``y = x W^T (+ b)`` in compute dtype; W [out, in] stored in param dtype."""

    def __init__(self, in_size: int, out_size: int, dtypes: Dtypes, bias: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_size, in_size, dtype=dtypes.param))
        self.bias = nn.Parameter(torch.zeros(out_size, dtype=dtypes.param)) if bias else None
        self.dtypes = dtypes
        self.split_reduction = False     # True: the reduction over ``in`` in two halves (another summation order)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cd = self.dtypes.compute
        bias = None if self.bias is None else self.bias.to(cd)
        x, weight = x.to(cd), self.weight.to(cd)
        if not self.split_reduction:
            return accelerator_matmul(F.linear, x, weight, bias)
        half = x.shape[-1] // 2          # split-K: what a GPU GEMM chooses by itself, run to run
        return (accelerator_matmul(F.linear, x[..., :half], weight[:, :half], bias)
                + accelerator_matmul(F.linear, x[..., half:], weight[:, half:], None))


def rotary_tables(seq_length: int, head_dim: int, base: float, rotary_dtype: torch.dtype):
    """cos/sin [s, d] of rotate-half RoPE: emb = cat(f, f), f = pos x 1/base**(arange(0,d,2)/d)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_length, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1).to(rotary_dtype)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = torch.chunk(x, 2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [b, s, n, d]; cos/sin [s, d] cast to x's dtype."""
    cos, sin = cos.to(x.dtype)[None, :, None, :], sin.to(x.dtype)[None, :, None, :]
    return x * cos + rotate_half(x) * sin


def causal_attention(q, k, v, softmax_dtype: torch.dtype) -> torch.Tensor:
    """q [b,s,nh,d], k/v [b,s,ng,d] -> context [b,s,nh,d]; query head j uses kv group j // (nh/ng)."""
    repeats = q.shape[2] // k.shape[2]
    q, k, v = q.transpose(1, 2), k.repeat_interleave(repeats, 2).transpose(1, 2), v.repeat_interleave(
        repeats, 2).transpose(1, 2)
    scores = accelerator_matmul(torch.matmul, q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    seq = q.shape[2]
    future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    scores = scores.to(softmax_dtype).masked_fill(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(v.dtype)
    return accelerator_matmul(torch.matmul, probs, v).transpose(1, 2)


class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, dtypes: Dtypes):
        super().__init__()
        d, nh, ng = cfg.head_dim, cfg.num_attention_heads, cfg.num_kv_heads
        self.heads, self.groups, self.head_dim, self.dtypes = nh, ng, d, dtypes
        self.linear_proj = Linear(nh * d, cfg.hidden_size, dtypes)       # Attention.__init__ builds it first
        self.linear_qkv = Linear(cfg.hidden_size, ng * (nh // ng + 2) * d, dtypes, bias=cfg.qkv_bias)
        if cfg.qk_norm:
            self.q_layernorm = RMSNorm(d, cfg.norm_epsilon, dtypes)
            self.k_layernorm = RMSNorm(d, cfg.norm_epsilon, dtypes)
        self.qk_norm = cfg.qk_norm

    def project_qkv(self, x: torch.Tensor):
        """x [b,s,h] -> q [b,s,nh,d], k/v [b,s,ng,d] (Megatron ``get_query_key_value_tensors``)."""
        b, s, _ = x.shape
        per_group, d = self.heads // self.groups, self.head_dim
        mixed = self.linear_qkv(x).view(b, s, self.groups, (per_group + 2) * d)
        q, k, v = torch.split(mixed, [per_group * d, d, d], dim=-1)
        return q.reshape(b, s, self.heads, d), k, v

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        q, k, v = self.project_qkv(x)
        if self.qk_norm:
            q, k = self.q_layernorm(q), self.k_layernorm(k)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        context = causal_attention(q, k, v, self.dtypes.softmax)
        return self.linear_proj(context.reshape(x.shape[0], x.shape[1], self.heads * self.head_dim))


class MLP(nn.Module):
    """SwiGLU: ``linear_fc2(silu(gate) * up)`` with ``[gate; up] = linear_fc1(x)``."""

    def __init__(self, hidden: int, ffn: int, dtypes: Dtypes):
        super().__init__()
        self.linear_fc1 = Linear(hidden, 2 * ffn, dtypes)
        self.linear_fc2 = Linear(ffn, hidden, dtypes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = torch.chunk(self.linear_fc1(x), 2, dim=-1)
        return self.linear_fc2(F.silu(gate) * up)


class TopKRouter(nn.Module):
    def __init__(self, cfg: ModelConfig, dtypes: Dtypes):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.num_experts, cfg.hidden_size, dtype=dtypes.param))
        self.topk = cfg.moe_router_topk

    def forward(self, tokens: torch.Tensor):
        """tokens [n,h] -> (expert ids [n,k], fp32 weights [n,k]): top-k logits, softmax over them."""
        logits = F.linear(tokens.float(), self.weight.float())
        top_logits, top_ids = torch.topk(logits, self.topk, dim=-1)
        return top_ids, torch.softmax(top_logits, dim=-1)


class SequentialMLP(nn.Module):
    def __init__(self, cfg: ModelConfig, dtypes: Dtypes):
        super().__init__()
        self.local_experts = nn.ModuleList(
            MLP(cfg.hidden_size, cfg.expert_ffn_size, dtypes) for _ in range(cfg.num_experts))

    def forward(self, tokens: torch.Tensor, top_ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Weighted sum over each token's experts, accumulated in fp32 (no capacity, no drop)."""
        out = torch.zeros(tokens.shape, dtype=torch.float32)
        for expert_id, expert in enumerate(self.local_experts):
            token_ids, slots = torch.nonzero(top_ids == expert_id, as_tuple=True)
            if token_ids.numel():
                routed = expert(tokens[token_ids]).float() * weights[token_ids, slots, None]
                out = out.index_add(0, token_ids, routed)
        return out


class MoELayer(nn.Module):
    def __init__(self, cfg: ModelConfig, dtypes: Dtypes):
        super().__init__()
        self.router = TopKRouter(cfg, dtypes)
        self.experts = SequentialMLP(cfg, dtypes)
        self.shared_experts = MLP(cfg.hidden_size, cfg.shared_expert_size, dtypes) if cfg.shared_expert_size else None
        self.dtypes = dtypes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.reshape(-1, x.shape[-1])
        top_ids, weights = self.router(tokens)
        out = self.experts(tokens, top_ids, weights).to(self.dtypes.compute)
        if self.shared_experts is not None:
            out = out + self.shared_experts(tokens)
        return out.reshape(x.shape)
