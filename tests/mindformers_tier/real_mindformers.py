"""Run REAL MindFormers 2.1.0 (legacy ``mindformers.models.llama.LlamaForCausalLM``) on CPU.

The reusable entry point is :func:`real_mindformers_logits`: a MindSpore checkpoint (``.ckpt`` written
by ``mindspore.save_checkpoint``) and a ``LlamaConfig`` dict (the ``model.model_config`` section of a
legacy MindFormers yaml) in, fp32 logits ``[batch, seq, vocab]`` of the real model out. Loading is
strict: a model parameter missing from the checkpoint, or a checkpoint entry the model does not use,
raises. conftest.py exposes the same functions as fixtures.

What running on CPU needs (forced by :data:`CPU_SETTINGS`): ``fused_rms_norm: False`` (no CPU
``RmsNorm`` kernel), ``use_rope_slice: True`` (the rotate-half path built from slices),
``use_flash_attention: False``, ``use_past: False``, PyNative mode (GRAPH mode works too, but compiles
for ~2 s per model and rounds differently in the 7th digit). MoE (``moe_config.expert_num > 1``) also
needs :func:`_broadcast_expert_matmuls`: CPU ``BatchMatMul`` does not broadcast the experts' input
``[1, E, T, h]`` against the stacked weight ``[E, out, h]``; the shim broadcasts the weight to
``[1, E, out, h]`` first (same math; Ascend broadcasts natively).

Eval mode (``set_train(False)``) takes ``input_ids [b, s]`` unshifted and returns
``(fp32 logits [b, s, V], tokens, input_mask)``; ``RUN_MODE=predict`` makes it return ``[b*s, V]``.
Train mode takes ``input_ids [b, s+1]`` and returns the masked mean cross entropy.

Importing this module imports mindformers: guard it with ``pytest.importorskip("mindformers")``.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

# MindFormers writes its logs under $LOCAL_DEFAULT_PATH (default ./output, i.e. into the checkout).
os.environ.setdefault("LOCAL_DEFAULT_PATH", os.path.join(tempfile.gettempdir(), "mindformers-tier-output"))

import mindspore as ms  # noqa: E402
from mindspore import nn, ops  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")

import mindformers  # noqa: E402
from mindformers.models.llama import LlamaConfig, LlamaForCausalLM  # noqa: E402
from mindformers.modules.layers import Linear as _MFLinear  # noqa: E402

MINDFORMERS_VERSION = mindformers.__version__

#: What the legacy Llama needs to run on CPU; applied over any model_config.
CPU_SETTINGS: dict[str, Any] = {
    "fused_rms_norm": False,
    "use_rope_slice": True,
    "use_flash_attention": False,
    "use_past": False,
    "is_dynamic": False,
}

#: fp32 everywhere (MindSpore CPU cannot compute in bf16); a model_config may override these.
FP32_DTYPES: dict[str, str] = {
    "compute_dtype": "float32",
    "param_init_type": "float32",
    "softmax_compute_type": "float32",
    "layernorm_compute_type": "float32",
    "rotary_dtype": "float32",
    "residual_dtype": "float32",
}

#: The project's tiny model (workbench.reference.config.ModelConfig defaults) as a LlamaConfig dict.
TINY_LLAMA_CONFIG: dict[str, Any] = {
    "batch_size": 1,
    "seq_length": 32,
    "hidden_size": 64,
    "num_layers": 2,
    "num_heads": 4,
    "n_kv_heads": 2,
    "intermediate_size": 176,
    "vocab_size": 128,
    "rms_norm_eps": 1e-5,
    "theta": 10000.0,
    "qkv_concat": False,
    "qkv_has_bias": False,
    "tie_word_embeddings": False,
    **FP32_DTYPES,
    **CPU_SETTINGS,
}


def llama_config_dict(model_config: Mapping[str, Any]) -> dict[str, Any]:
    """``model_config`` with the fp32 defaults below it and the CPU settings forced over it."""
    return {**FP32_DTYPES, **dict(model_config), **CPU_SETTINGS}


def llama_config_from_reference(cfg, qkv_concat: bool = False, **overrides: Any) -> dict[str, Any]:
    """The LlamaConfig dict of a ``workbench.reference.config.ModelConfig``.

    MoE: legacy Llama sizes every routed expert with ``intermediate_size`` (``moe_intermediate_size``
    is ignored) and the shared expert with ``intermediate_size * shared_expert_num``, so only
    configs with ``expert_ffn_size == ffn_hidden_size == shared_expert_size`` are expressible;
    ``capacity_factor = expert_num`` makes sure no token is dropped (the reference drops none).
    """
    out = dict(TINY_LLAMA_CONFIG, seq_length=cfg.seq_length, hidden_size=cfg.hidden_size,
               num_layers=cfg.num_layers, num_heads=cfg.num_attention_heads, n_kv_heads=cfg.num_kv_heads,
               intermediate_size=cfg.ffn_hidden_size, vocab_size=cfg.vocab_size, rms_norm_eps=cfg.norm_epsilon,
               theta=cfg.rotary_base, qkv_concat=qkv_concat, qkv_has_bias=cfg.qkv_bias)
    if cfg.qk_norm:
        raise ValueError("legacy LlamaForCausalLM has no q/k norm (LlamaConfig silently ignores qk_norm)")
    if cfg.num_experts:
        if cfg.expert_ffn_size != cfg.ffn_hidden_size or cfg.shared_expert_size not in (0, cfg.ffn_hidden_size):
            raise ValueError("legacy Llama MoE sizes experts (and the shared expert) with intermediate_size")
        out["moe_config"] = {"expert_num": cfg.num_experts, "num_experts_chosen": cfg.moe_router_topk,
                             "routing_policy": "TopkRouterV2", "norm_topk_prob": True,
                             "router_dense_type": "float32", "capacity_factor": float(cfg.num_experts),
                             "shared_expert_num": 1 if cfg.shared_expert_size else 0,
                             "moe_intermediate_size": cfg.expert_ffn_size}
    out.update(overrides)
    return out


class _BroadcastBatchMatMul(nn.Cell):
    """``BatchMatMul`` that broadcasts a stacked expert weight [E, ...] to the input's batch [B, E, ...]."""

    def __init__(self, transpose_b: bool):
        super().__init__()
        self.matmul = ops.BatchMatMul(transpose_b=transpose_b)

    def construct(self, x, weight):
        if weight.ndim < x.ndim:
            weight = ops.broadcast_to(weight.expand_dims(0), (x.shape[0],) + weight.shape)
        return self.matmul(x, weight)


def _broadcast_expert_matmuls(net: nn.Cell) -> int:
    """CPU shim for MoE (see the module docstring); returns how many expert Linears it patched."""
    patched = 0
    for _, cell in net.cells_and_names():
        if isinstance(cell, _MFLinear) and cell.expert_flag and not cell.use_gmm:
            cell.matmul = _BroadcastBatchMatMul(cell.transpose_b)
            patched += 1
    return patched


def build_real_llama(model_config: Mapping[str, Any]) -> LlamaForCausalLM:
    """Real ``mindformers.models.llama.LlamaForCausalLM`` (random init) for a LlamaConfig dict."""
    net = LlamaForCausalLM(LlamaConfig(**llama_config_dict(model_config)))
    _broadcast_expert_matmuls(net)
    return net


def real_parameter_shapes(model_config: Mapping[str, Any]) -> dict[str, tuple]:
    """name -> shape of the real model's parameters, in definition (= optimizer) order."""
    return {p.name: tuple(p.shape) for p in build_real_llama(model_config).get_parameters()}


def load_checkpoint_strict(net: nn.Cell, ckpt_path: str | os.PathLike) -> None:
    """``load_checkpoint`` + ``load_param_into_net``; raises unless every parameter and entry is used."""
    params = ms.load_checkpoint(str(ckpt_path))
    not_loaded, unused = ms.load_param_into_net(net, params)
    if not_loaded or unused:
        raise AssertionError(f"{ckpt_path}: model parameters not in the checkpoint {sorted(not_loaded)}; "
                             f"checkpoint entries the model does not use {sorted(unused)}")


def default_tokens(model_config: Mapping[str, Any], batch: int = 2, seed: int = 0,
                   length: int | None = None) -> np.ndarray:
    """Deterministic int32 ids [batch, length or seq_length] that never equal ``pad_token_id``.

    (MindFormers legacy masks attention to, and the loss of, every position whose token is the
    pad id: data containing it would not compute what HF / Megatron compute.)
    """
    config = llama_config_dict(model_config)
    vocab, pad = int(config["vocab_size"]), int(config.get("pad_token_id", 0))
    ids = np.random.default_rng(seed).integers(0, vocab - 1, size=(batch, length or int(config["seq_length"])))
    if 0 <= pad < vocab:
        ids = np.where(ids >= pad, ids + 1, ids)
    return ids.astype(np.int32)


def logits_of(net: LlamaForCausalLM, tokens: np.ndarray) -> np.ndarray:
    """fp32 logits [b, s, V] of a real LlamaForCausalLM for unshifted ids [b, s] (eval mode)."""
    tokens = np.asarray(tokens, dtype=np.int32)
    net.set_train(False)
    out = net(ms.Tensor(tokens, ms.int32))
    logits = out[0] if isinstance(out, (tuple, list)) else out
    return logits.asnumpy().astype(np.float32).reshape(tokens.shape + (-1,))


def real_mindformers_logits(ckpt_path: str | os.PathLike, model_config: Mapping[str, Any],
                            tokens: np.ndarray | None = None) -> np.ndarray:
    """fp32 logits [b, s, V] of real MindFormers' legacy LlamaForCausalLM loaded (strictly) from ``ckpt_path``.

    ``model_config``: a LlamaConfig dict (e.g. ``TINY_LLAMA_CONFIG`` or a yaml's ``model.model_config``);
    the CPU settings are forced over it. ``tokens``: ids [b, s]; default :func:`default_tokens`.
    """
    if not Path(ckpt_path).is_file():
        raise FileNotFoundError(ckpt_path)
    net = build_real_llama(model_config)
    load_checkpoint_strict(net, ckpt_path)
    return logits_of(net, default_tokens(model_config) if tokens is None else tokens)


def real_mindformers_loss(ckpt_path: str | os.PathLike, model_config: Mapping[str, Any],
                          input_ids: np.ndarray) -> float:
    """Training-mode loss of the real model for ``input_ids [b, s+1]`` (it shifts them itself)."""
    net = build_real_llama(model_config)
    load_checkpoint_strict(net, ckpt_path)
    net.set_train(True)
    return float(net(ms.Tensor(np.asarray(input_ids, np.int32), ms.int32)).asnumpy().reshape(-1)[0])


def save_numpy_checkpoint(weights: Mapping[str, np.ndarray], ckpt_path: str | os.PathLike) -> Path:
    """Write name -> array as a MindSpore checkpoint (``mindspore.save_checkpoint``)."""
    entries = [{"name": name, "data": ms.Tensor(np.ascontiguousarray(value))} for name, value in weights.items()]
    ms.save_checkpoint(entries, str(ckpt_path))
    return Path(ckpt_path)
