"""MindSpore "MindFormers-style" reference decoder (legacy ``LlamaForCausalLM`` names and conventions).

The math is ``config.MATH``; names follow MindFormers legacy (docs/framework-facts.md §1)::

    model.tok_embeddings.embedding_weight            [V, h]
    model.layers.{i}.ffn_norm.weight                  (MindFormers defines ffn_norm before attention_norm,
    model.layers.{i}.attention_norm.weight             so that is the parameter / optimizer order too)
    model.layers.{i}.attention.wq|wk|wv.weight (+ .bias with qkv_bias) | attention.w_qkv.* (qkv_concat)
    model.layers.{i}.attention.wo.weight
    model.layers.{i}.attention.q_norm.weight | k_norm.weight   [d]   (qk_norm; our choice of names)
    model.layers.{i}.feed_forward.w1|w2|w3.weight      gate|down|up  | feed_forward.w_gate_hidden.weight
    MoE:    feed_forward.ffn.w1|w2|w3.weight [E, out, in], feed_forward.router.dense.weight [E, h] (fp32)
    shared: feed_forward.routed_experts.{ffn.*, router.dense.weight}, feed_forward.shared_experts.w1|w2|w3.weight
            (MindFormers ``LlamaFeedForwardWithMoE``; the shared expert is ungated)
    model.norm_out.weight, lm_head.weight

Input contract (legacy): ``construct(input_ids [b, s+1], labels=None)``; tokens = ids[:, :-1]; labels =
ids[:, 1:] or labels[:, 1:]; loss mask = labels != -100 (times tokens != pad_token_id when one is set, as
MindFormers does). Attention is causal only. bf16 *compute* is impossible on CPU: bf16 knobs compute fp32
(a RuntimeWarning says so); bf16 *storage* of parameters works.

The Cells live in :mod:`.ms_layers`; the fused layouts (``w_qkv`` grouped per kv group, the same layout
as Megatron's ``linear_qkv``; ``w_gate_hidden`` row-interleaved) in :mod:`.layouts`.
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from .config import ModelConfig, PrecisionConfig
from .layouts import deinterleave_rows, fuse_grouped_qkv, interleave_rows, split_grouped_qkv
from .ms_layers import (Attention, Embedding, FeedForward, Linear, MoEWithShared, RMSNorm, RoutedExperts,
                        resolve_precision)

IGNORE_TOKEN_ID = -100


# ---------------------------------------------------------------- names and layouts ----------------

_FUSABLE_FFN = re.compile(r"\.feed_forward\.(ffn\.)?w([13])\.weight$")


def fuse_weights(weights: Mapping[str, np.ndarray], cfg: ModelConfig) -> dict[str, np.ndarray]:
    """qkv_concat=False names -> qkv_concat=True names (w_qkv grouped, w_gate_hidden interleaved)."""
    heads = (cfg.num_attention_heads, cfg.num_kv_heads, cfg.head_dim)
    out = {}
    for name, value in weights.items():
        ffn = _FUSABLE_FFN.search(name)
        if ".attention.wq." in name:
            k, v = (weights[name.replace(".wq.", f".{x}.")] for x in ("wk", "wv"))
            out[name.replace(".wq.", ".w_qkv.")] = fuse_grouped_qkv(value, k, v, *heads)
        elif ffn and ffn.group(2) == "1":
            out[name.replace(".w1.", ".w_gate_hidden.")] = interleave_rows(value, weights[name.replace(".w1.", ".w3.")])
        elif not (".attention.wk." in name or ".attention.wv." in name or ffn):
            out[name] = value
    return out


def unfuse_weights(weights: Mapping[str, np.ndarray], cfg: ModelConfig) -> dict[str, np.ndarray]:
    """Inverse of :func:`fuse_weights`."""
    heads = (cfg.num_attention_heads, cfg.num_kv_heads, cfg.head_dim)
    out = {}
    for name, value in weights.items():
        if ".attention.w_qkv." in name:
            for part, array in zip(("wq", "wk", "wv"), split_grouped_qkv(value, *heads), strict=True):
                out[name.replace(".w_qkv.", f".{part}.")] = array
        elif ".w_gate_hidden." in name:
            gate, up = deinterleave_rows(value)
            out[name.replace(".w_gate_hidden.", ".w1.")] = gate
            out[name.replace(".w_gate_hidden.", ".w3.")] = up
        else:
            out[name] = value
    return out


def _linear(prefix: str, shape: tuple, bias: bool) -> dict:
    return {f"{prefix}.weight": shape, **({f"{prefix}.bias": shape[:1]} if bias else {})}


def _ffn_shapes(prefix: str, hidden: int, ffn: int, fused: bool, experts: int = 0) -> dict:
    lead = (experts,) if experts else ()
    first = {f"{prefix}.w_gate_hidden.weight": lead + (2 * ffn, hidden)} if fused else \
        {f"{prefix}.w1.weight": lead + (ffn, hidden)}
    rest = {f"{prefix}.w2.weight": lead + (hidden, ffn)}
    return {**first, **rest, **({} if fused else {f"{prefix}.w3.weight": lead + (ffn, hidden)})}


def _moe_shapes(prefix: str, cfg: ModelConfig, fused: bool) -> dict:
    return {**_ffn_shapes(f"{prefix}.ffn", cfg.hidden_size, cfg.expert_ffn_size, fused, cfg.num_experts),
            f"{prefix}.router.dense.weight": (cfg.num_experts, cfg.hidden_size)}


def parameter_shapes(cfg: ModelConfig, qkv_concat: bool = False) -> dict[str, tuple]:
    """Every parameter name -> shape, in MindFormers' definition (= optimizer) order."""
    h, d, n, nkv = cfg.hidden_size, cfg.head_dim, cfg.num_attention_heads, cfg.num_kv_heads
    shapes = {"model.tok_embeddings.embedding_weight": (cfg.vocab_size, h)}
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}"
        shapes.update({f"{p}.ffn_norm.weight": (h,), f"{p}.attention_norm.weight": (h,)})
        if qkv_concat:
            shapes.update(_linear(f"{p}.attention.w_qkv", ((n + 2 * nkv) * d, h), cfg.qkv_bias))
        else:
            for part, rows in (("wq", n * d), ("wk", nkv * d), ("wv", nkv * d)):
                shapes.update(_linear(f"{p}.attention.{part}", (rows, h), cfg.qkv_bias))
        shapes[f"{p}.attention.wo.weight"] = (h, n * d)
        if cfg.qk_norm:
            shapes.update({f"{p}.attention.q_norm.weight": (d,), f"{p}.attention.k_norm.weight": (d,)})
        if not cfg.num_experts:
            shapes.update(_ffn_shapes(f"{p}.feed_forward", h, cfg.ffn_hidden_size, qkv_concat))
        elif cfg.shared_expert_size:
            shapes.update(_moe_shapes(f"{p}.feed_forward.routed_experts", cfg, False))
            shapes.update(_ffn_shapes(f"{p}.feed_forward.shared_experts", h, cfg.shared_expert_size, False))
        else:
            shapes.update(_moe_shapes(f"{p}.feed_forward", cfg, qkv_concat))
    shapes.update({"model.norm_out.weight": (h,), "lm_head.weight": (cfg.vocab_size, h)})
    return shapes


# ---------------------------------------------------------------- planted faults -------------------

@dataclass(frozen=True)
class PlantedFaults:
    """Deliberate bugs of the kind a migration introduces, for testing the comparison tools.

    Off by default (``None``); each leaves every other layer exact:
    ``softmax_fp16_layer``: that layer's attention softmax is computed in fp16 (scores cast to fp16);
    ``norm_epsilon_layer``: that layer's ``attention_norm`` uses ``wrong_norm_epsilon`` (the classic
    1e-6 vs 1e-5 confusion) instead of ``model.norm_epsilon``;
    ``rotary_base``: every layer's RoPE tables use this base instead of ``model.rotary_base`` (a
    hard-coded 10000 where the model says otherwise). The catalog of named faults built on these is
    ``datasets/demo_faults.yaml`` (:mod:`workbench.demo.catalog`).
    """

    softmax_fp16_layer: int | None = None
    norm_epsilon_layer: int | None = None
    wrong_norm_epsilon: float = 1e-6
    rotary_base: float | None = None

    def softmax_dtype(self, layer: int):
        return ms.float16 if layer == self.softmax_fp16_layer else None

    def attention_norm_epsilon(self, layer: int, epsilon: float) -> float:
        return self.wrong_norm_epsilon if layer == self.norm_epsilon_layer else epsilon

    def rope_base(self, base: float) -> float:
        return base if self.rotary_base is None else self.rotary_base


NO_FAULTS = PlantedFaults()


# ---------------------------------------------------------------- network --------------------------

class DecoderLayer(nn.Cell):
    """``LLamaDecodeLayer``: pre-norm residual blocks; the residual stream is kept in the residual dtype."""

    def __init__(self, cfg: ModelConfig, dtypes: dict, qkv_concat: bool, layer: int = 0,
                 faults: PlantedFaults = NO_FAULTS):
        super().__init__()
        self.ffn_norm = RMSNorm(cfg.hidden_size, cfg.norm_epsilon, dtypes)
        self.attention_norm = RMSNorm(cfg.hidden_size, faults.attention_norm_epsilon(layer, cfg.norm_epsilon), dtypes)
        self.attention = Attention(cfg, dtypes, qkv_concat, softmax_dtype=faults.softmax_dtype(layer),
                                   rotary_base=faults.rope_base(cfg.rotary_base))
        if not cfg.num_experts:
            self.feed_forward = FeedForward(cfg.hidden_size, cfg.ffn_hidden_size, dtypes, qkv_concat)
        elif cfg.shared_expert_size:
            self.feed_forward = MoEWithShared(cfg, dtypes)
        else:
            self.feed_forward = RoutedExperts(cfg, dtypes, qkv_concat)
        self.residual = dtypes["residual_dtype"]

    def construct(self, h):
        h = h + ops.cast(self.attention(self.attention_norm(h)), self.residual)
        return h + ops.cast(self.feed_forward(self.ffn_norm(h)), self.residual)


class LlamaModel(nn.Cell):
    def __init__(self, cfg: ModelConfig, dtypes: dict, qkv_concat: bool, faults: PlantedFaults = NO_FAULTS):
        super().__init__()
        self.tok_embeddings = Embedding(cfg.vocab_size, cfg.hidden_size, dtypes)
        self.layers = nn.CellList([DecoderLayer(cfg, dtypes, qkv_concat, i, faults) for i in range(cfg.num_layers)])
        self.norm_out = RMSNorm(cfg.hidden_size, cfg.norm_epsilon, dtypes)
        self.residual = dtypes["residual_dtype"]

    def construct(self, tokens):
        h = ops.cast(self.tok_embeddings(tokens), self.residual)
        for layer in self.layers:
            h = layer(h)
        return self.norm_out(h)


class LlamaForCausalLM(nn.Cell):
    """Loss-returning causal LM with the legacy MindFormers input contract (see module docstring)."""

    def __init__(self, cfg: ModelConfig, dtypes: dict, qkv_concat: bool, pad_token_id: int | None,
                 faults: PlantedFaults = NO_FAULTS):
        super().__init__()
        self.model = LlamaModel(cfg, dtypes, qkv_concat, faults)
        self.lm_head = Linear((cfg.vocab_size, cfg.hidden_size), False, dtypes)
        self.vocab, self.pad_token_id = cfg.vocab_size, pad_token_id
        self.config, self.qkv_concat, self.precision_notes = cfg, qkv_concat, []

    def logits(self, tokens):
        """fp32 logits [b, s, V] for tokens [b, s] (no slicing)."""
        return ops.cast(self.lm_head(self.model(tokens)), ms.float32)

    def construct(self, input_ids, labels=None):
        tokens = input_ids[:, :-1]
        labels = input_ids[:, 1:] if labels is None else labels[:, 1:]
        mask = ops.cast(labels != IGNORE_TOKEN_ID, ms.float32)
        if self.pad_token_id is not None:
            mask = mask * ops.cast(tokens != self.pad_token_id, ms.float32)
        logits = self.logits(tokens).reshape(-1, self.vocab)
        safe_labels = ops.select(labels != IGNORE_TOKEN_ID, labels, ops.zeros_like(labels)).reshape(-1)
        one_hot = ops.one_hot(safe_labels, self.vocab, Tensor(1.0, ms.float32), Tensor(0.0, ms.float32))
        ce = -(ops.log_softmax(logits, -1) * one_hot).sum(-1)
        mask = mask.reshape(-1)
        return (ce * mask).sum() / mask.sum()


def get_weights(model: nn.Cell) -> dict[str, np.ndarray]:
    """name -> numpy copy (bf16 parameters come back as float32)."""
    out = {}
    for param in model.get_parameters():
        value = param if param.dtype != ms.bfloat16 else ops.cast(param, ms.float32)
        out[param.name] = value.asnumpy().copy()
    return out


def set_weights(model: nn.Cell, weights: Mapping[str, np.ndarray], strict: bool = True) -> None:
    """Load numpy arrays by name, cast to each parameter's dtype; shapes must match."""
    params = {p.name: p for p in model.get_parameters()}
    if strict and set(params) != set(weights):
        raise KeyError(f"weights do not match the model: only in model {sorted(set(params) - set(weights))}, "
                       f"only in weights {sorted(set(weights) - set(params))}")
    for name, value in weights.items():
        param = params[name]
        if tuple(param.shape) != tuple(np.shape(value)):
            raise ValueError(f"{name}: expected shape {tuple(param.shape)}, got {tuple(np.shape(value))}")
        param.set_data(Tensor(np.asarray(value, dtype=np.float32), param.dtype))


def initial_weights(cfg: ModelConfig, seed: int, qkv_concat: bool = False) -> dict[str, np.ndarray]:
    """Deterministic init: normal(0, init_std) matrices, ones for norms, zeros for biases (numpy RNG).

    Drawn in the unfused order and fused afterwards, so qkv_concat=True/False give the same network.
    """
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in parameter_shapes(cfg, qkv_concat=False).items():
        if name.endswith(".bias"):
            weights[name] = np.zeros(shape, np.float32)
        elif len(shape) == 1:
            weights[name] = np.ones(shape, np.float32)
        else:
            weights[name] = rng.normal(0.0, cfg.init_std, size=shape).astype(np.float32)
    return fuse_weights(weights, cfg) if qkv_concat else weights


def build_model(model: ModelConfig, precision: PrecisionConfig | None = None, seed: int = 1234,
                qkv_concat: bool = False, pad_token_id: int | None = None,
                faults: PlantedFaults = NO_FAULTS) -> LlamaForCausalLM:
    """The MindFormers-style network with deterministic weights.

    ``pad_token_id``: MindFormers multiplies ``tokens != pad_token_id`` into the loss mask (its
    LlamaConfig default is 0); ``None`` (default) disables that so the math equals Megatron's.
    ``faults``: deliberate bugs for testing the comparison tools (:class:`PlantedFaults`; none by default).
    """
    cfg = model.validate()
    dtypes, notes = resolve_precision(precision or PrecisionConfig())
    for note in notes:
        warnings.warn(note, RuntimeWarning, stacklevel=2)
    for layer in (faults.softmax_fp16_layer, faults.norm_epsilon_layer):
        if layer is not None and not 0 <= layer < cfg.num_layers:
            raise ValueError(f"planted fault in layer {layer}: the model has layers 0..{cfg.num_layers - 1}")
    network = LlamaForCausalLM(cfg, dtypes, qkv_concat, pad_token_id, faults)
    network.precision_notes = notes
    expected = parameter_shapes(cfg, qkv_concat)
    built = {p.name: tuple(p.shape) for p in network.get_parameters()}
    if list(built.items()) != list(expected.items()):
        raise AssertionError(f"parameter layout drifted from parameter_shapes: {built} != {expected}")
    set_weights(network, initial_weights(cfg, seed, qkv_concat))
    return network
