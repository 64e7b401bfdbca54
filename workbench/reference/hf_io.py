"""Write the reference model as a Hugging Face folder: safetensors weights + ``config.json``.

Input: a full (unsharded) state dict with Megatron-core local-spec names. Output names:

==============================================  ============================================
Megatron                                         Hugging Face (Llama / Qwen2 / Qwen3 / Mixtral)
==============================================  ============================================
embedding.word_embeddings.weight                 model.embed_tokens.weight
decoder.layers.N.input_layernorm.weight          model.layers.N.input_layernorm.weight
...self_attention.linear_qkv.weight (+bias)      ...self_attn.{q,k,v}_proj.weight (+bias, Qwen2)
...self_attention.{q,k}_layernorm.weight         ...self_attn.{q,k}_norm.weight (Qwen3)
...self_attention.linear_proj.weight             ...self_attn.o_proj.weight
decoder.layers.N.pre_mlp_layernorm.weight        model.layers.N.post_attention_layernorm.weight
...mlp.linear_fc1.weight = [gate; up]            ...mlp.{gate,up}_proj.weight
...mlp.linear_fc2.weight                         ...mlp.down_proj.weight
...mlp.router.weight                             ...block_sparse_moe.gate.weight (Mixtral)
...mlp.experts.local_experts.E.linear_fc1/2      ...block_sparse_moe.experts.E.{w1,w3}/w2
decoder.final_layernorm.weight                   model.norm.weight
output_layer.weight                              lm_head.weight
==============================================  ============================================

The fused layouts are split by :mod:`workbench.reference.layouts`. This is the fixed reference
writer; the general, spec-driven converter lives elsewhere. torch and safetensors are imported
inside the functions.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..report.output import atomic_path, write_text_atomic
from .config import ModelConfig
from .layouts import split_gate_up, split_grouped_qkv

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"


# ----------------------------------------------------------------------------- names

def hf_architecture(model: ModelConfig) -> tuple[str, str]:
    """(model_type, architecture class) of the HF family that computes exactly this model."""
    if model.num_experts:
        if model.shared_expert_size or model.qkv_bias or model.qk_norm:
            raise InputError("model", "HF Mixtral has no shared expert, qkv bias or q/k norm "
                             "(Qwen2-MoE gates its shared expert, this model does not)",
                             "export a MoE model without those features")
        return "mixtral", "MixtralForCausalLM"
    if model.qkv_bias and model.qk_norm:
        raise InputError("model", "no HF family has q/k/v bias without o_proj bias together with q/k norm",
                         "enable only one of qkv_bias (Qwen2) and qk_norm (Qwen3)")
    if model.qk_norm:
        return "qwen3", "Qwen3ForCausalLM"
    if model.qkv_bias:
        return "qwen2", "Qwen2ForCausalLM"
    return "llama", "LlamaForCausalLM"


def _attention_tensors(source: dict, model: ModelConfig, mg: str, hf: str) -> dict:
    out = {}
    q, k, v = split_grouped_qkv(source[f"{mg}.linear_qkv.weight"], model.num_attention_heads, model.num_kv_heads)
    out.update({f"{hf}.q_proj.weight": q, f"{hf}.k_proj.weight": k, f"{hf}.v_proj.weight": v})
    if model.qkv_bias:
        qb, kb, vb = split_grouped_qkv(source[f"{mg}.linear_qkv.bias"], model.num_attention_heads,
                                       model.num_kv_heads)
        out.update({f"{hf}.q_proj.bias": qb, f"{hf}.k_proj.bias": kb, f"{hf}.v_proj.bias": vb})
    if model.qk_norm:
        out[f"{hf}.q_norm.weight"] = source[f"{mg}.q_layernorm.weight"]
        out[f"{hf}.k_norm.weight"] = source[f"{mg}.k_layernorm.weight"]
    out[f"{hf}.o_proj.weight"] = source[f"{mg}.linear_proj.weight"]
    return out


def _dense_mlp_tensors(source: dict, mg: str, hf: str) -> dict:
    gate, up = split_gate_up(source[f"{mg}.linear_fc1.weight"])
    return {f"{hf}.gate_proj.weight": gate, f"{hf}.up_proj.weight": up,
            f"{hf}.down_proj.weight": source[f"{mg}.linear_fc2.weight"]}


def _mixtral_moe_tensors(source: dict, model: ModelConfig, mg: str, hf: str) -> dict:
    out = {f"{hf}.gate.weight": source[f"{mg}.router.weight"]}
    for expert in range(model.num_experts):
        local = f"{mg}.experts.local_experts.{expert}"
        gate, up = split_gate_up(source[f"{local}.linear_fc1.weight"])
        out[f"{hf}.experts.{expert}.w1.weight"] = gate
        out[f"{hf}.experts.{expert}.w3.weight"] = up
        out[f"{hf}.experts.{expert}.w2.weight"] = source[f"{local}.linear_fc2.weight"]
    return out


def _layer_tensors(source: dict, model: ModelConfig, layer: int) -> dict:
    mg, hf = f"decoder.layers.{layer}", f"model.layers.{layer}"
    out = {f"{hf}.input_layernorm.weight": source[f"{mg}.input_layernorm.weight"]}
    out.update(_attention_tensors(source, model, f"{mg}.self_attention", f"{hf}.self_attn"))
    out[f"{hf}.post_attention_layernorm.weight"] = source[f"{mg}.pre_mlp_layernorm.weight"]
    if model.num_experts:
        out.update(_mixtral_moe_tensors(source, model, f"{mg}.mlp", f"{hf}.block_sparse_moe"))
    else:
        out.update(_dense_mlp_tensors(source, f"{mg}.mlp", f"{hf}.mlp"))
    return out


def hf_state_dict(state_dict_megatron: dict, model: ModelConfig) -> dict:
    """Megatron local-spec names -> HF names, in HF's module order (views; not yet copied)."""
    hf_architecture(model)
    source = state_dict_megatron
    try:
        out = {"model.embed_tokens.weight": source["embedding.word_embeddings.weight"]}
        for layer in range(model.num_layers):
            out.update(_layer_tensors(source, model, layer))
        out["model.norm.weight"] = source["decoder.final_layernorm.weight"]
        out["lm_head.weight"] = source["output_layer.weight"]
    except KeyError as missing:
        raise InputError(f"state_dict[{missing.args[0]}]", "missing from the Megatron state dict",
                         "pass the full, unsharded state dict of a model built from this ModelConfig") from None
    return out


def hf_config(model: ModelConfig, vocab_rows: int | None = None, torch_dtype: str = "float32") -> dict:
    """``config.json`` for the chosen HF family (LlamaConfig field names)."""
    model_type, architecture = hf_architecture(model)
    config = {
        "architectures": [architecture], "model_type": model_type,
        "hidden_size": model.hidden_size, "intermediate_size": model.expert_ffn_size if model.num_experts
        else model.ffn_hidden_size, "num_attention_heads": model.num_attention_heads,
        "num_key_value_heads": model.num_kv_heads, "head_dim": model.head_dim,
        "num_hidden_layers": model.num_layers, "vocab_size": vocab_rows or model.vocab_size,
        "max_position_embeddings": model.seq_length, "rms_norm_eps": model.norm_epsilon,
        "rope_theta": model.rotary_base, "hidden_act": "silu", "initializer_range": model.init_std,
        "tie_word_embeddings": False, "attention_bias": False, "attention_dropout": 0.0,
        "mlp_bias": False, "use_cache": True, "torch_dtype": torch_dtype,
    }
    if model.num_experts:
        config.update({"num_local_experts": model.num_experts, "num_experts_per_tok": model.moe_router_topk,
                       "router_aux_loss_coef": 0.0, "output_router_logits": False})
    return config


# ----------------------------------------------------------------------------- writing

def _contiguous_copies(tensors: dict) -> dict:
    """safetensors refuses tensors that share storage (q/k/v are views of one qkv)."""
    import torch

    return {name: tensor.detach().clone(memory_format=torch.contiguous_format) for name, tensor in tensors.items()}


def _byte_size(tensor: Any) -> int:
    return tensor.numel() * tensor.element_size()


def plan_shards(tensors: dict, shard_bytes: int) -> list[list[str]]:
    """Greedy packing of names (in order) into files of at most ``shard_bytes`` (a bigger tensor gets its own)."""
    shards: list[list[str]] = [[]]
    used = 0
    for name, tensor in tensors.items():
        size = _byte_size(tensor)
        if shards[-1] and used + size > shard_bytes:
            shards.append([])
            used = 0
        shards[-1].append(name)
        used += size
    return shards


def _write_safetensors(tensors: dict, path: Path) -> None:
    from safetensors.torch import save_file

    with atomic_path(path) as temporary:
        save_file(tensors, str(temporary), metadata={"format": "pt"})


def _write_json(payload: dict, path: Path) -> None:
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def _dtype_name(tensors: dict) -> str:
    first = next(iter(tensors.values()))
    return str(first.dtype).removeprefix("torch.")


def save_hf_safetensors(state_dict_megatron: dict, model: ModelConfig, path: Path,
                        shard_bytes: int | None = None) -> list[Path]:
    """Write ``path/`` as an HF model folder; returns the files written (weights, index, config).

    ``shard_bytes`` None: one ``model.safetensors``. Otherwise ``model-0000k-of-0000n.safetensors``
    files of at most ``shard_bytes`` each plus ``model.safetensors.index.json``.
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = _contiguous_copies(hf_state_dict(state_dict_megatron, model))
    written = []
    if shard_bytes is None:
        _write_safetensors(tensors, folder / SINGLE_FILE)
        written.append(folder / SINGLE_FILE)
    else:
        groups = plan_shards(tensors, shard_bytes)
        weight_map = {}
        for number, names in enumerate(groups, start=1):
            file_name = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
            _write_safetensors({name: tensors[name] for name in names}, folder / file_name)
            weight_map.update({name: file_name for name in names})
            written.append(folder / file_name)
        total = sum(_byte_size(tensor) for tensor in tensors.values())
        _write_json({"metadata": {"total_size": total}, "weight_map": weight_map}, folder / INDEX_FILE)
        written.append(folder / INDEX_FILE)
    vocab_rows = int(tensors["model.embed_tokens.weight"].shape[0])
    _write_json(hf_config(model, vocab_rows, _dtype_name(tensors)), folder / CONFIG_FILE)
    written.append(folder / CONFIG_FILE)
    return written
