"""Write the reference model as a Hugging Face folder: safetensors weights + ``config.json``.

Input: a full (unsharded) state dict with Megatron-core local-spec names. The names and layouts
come from the converter specs (``converters/<family>.yaml``, formats ``megatron`` -> ``hf``): one
mapping for the project, checked against real ``transformers`` models by tests/test_reference_hf.py.
This module only chooses the HF family for a reference config and writes ``config.json``.
torch is imported inside the functions.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError
from ..fileio import write_text
from .config import ModelConfig

SINGLE_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
HF_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


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


def spec_params(model: ModelConfig):
    """The converter specs' size parameters of a reference config."""
    from ..spec import ModelParams

    return ModelParams(num_layers=model.num_layers, hidden=model.hidden_size, vocab=model.vocab_size,
                       num_heads=model.num_attention_heads, num_kv_heads=model.num_kv_heads, head_dim=model.head_dim,
                       ffn=model.ffn_hidden_size, num_experts=model.num_experts,
                       moe_ffn=model.expert_ffn_size if model.num_experts else 0)


def hf_plan(state_dict_megatron: dict, model: ModelConfig):
    """(plan, numpy arrays by Megatron name): the spec's megatron -> hf plan for this state dict."""
    from ..spec import build_plan, load_arch
    from ..tensors.base import TensorMeta
    from ..tensors.torch_io import TORCH_DTYPES, tensor_to_numpy

    arrays = {name: tensor_to_numpy(tensor.detach().contiguous()) for name, tensor in state_dict_megatron.items()}
    metas = {name: TensorMeta(name, tuple(tensor.shape), TORCH_DTYPES[str(tensor.dtype).removeprefix("torch.")])
             for name, tensor in state_dict_megatron.items()}
    arch = load_arch(hf_architecture(model)[0])
    return build_plan(metas, "megatron", "hf", arch, spec_params(model)), arrays


def hf_state_dict(state_dict_megatron: dict, model: ModelConfig) -> dict:
    """Megatron local-spec names -> HF names and layouts (numpy; bf16 as raw uint16 bits)."""
    from ..spec import materialize

    plan, arrays = hf_plan(state_dict_megatron, model)
    return {step.target.name: materialize(step, arrays.__getitem__) for step in plan.steps}


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


def save_hf_safetensors(state_dict_megatron: dict, model: ModelConfig, path: Path,
                        shard_bytes: int | None = None) -> list[Path]:
    """Write ``path/`` as an HF model folder; returns the files written (weights, index, config).

    ``shard_bytes`` None: one ``model.safetensors``. Otherwise ``model-0000k-of-0000n.safetensors``
    files of at most ``shard_bytes`` each plus ``model.safetensors.index.json``. Streams one tensor
    at a time through the spec plan.
    """
    from ..spec import materialize
    from ..tensors.safetensors_io import SafetensorsSink

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    plan, arrays = hf_plan(state_dict_megatron, model)
    target = folder if shard_bytes is not None else folder / SINGLE_FILE
    sink = SafetensorsSink(target, plan.targets, shard_bytes=shard_bytes, metadata={"format": "pt"})
    with sink:
        for step in plan.steps:
            sink.write(step.target.name, materialize(step, arrays.__getitem__))
        written = sink.finish()
    embed = next(step.target for step in plan.steps if step.target.name == "model.embed_tokens.weight")
    write_text(folder / CONFIG_FILE, json.dumps(hf_config(model, embed.shape[0], HF_DTYPE[embed.dtype]),
                                                       indent=2, sort_keys=True) + "\n")
    return [*written, folder / CONFIG_FILE]
