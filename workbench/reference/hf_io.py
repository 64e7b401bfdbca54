"""Write the reference model as a Hugging Face folder: safetensors weights + ``config.json``.

Input: a full (unsharded) state dict with Megatron-core local-spec names. The names and layouts
come from the converter specs (``converters/<family>.yaml``, formats ``megatron`` -> ``hf``): one
mapping for the project, checked against real ``transformers`` models by tests/test_reference_hf.py.
This module only chooses the HF family for a reference config and states its settings; the folder
(``config.json`` from the family's ``hf_config`` block, safetensors) is written by the one HF-folder
writer, ``workbench/convert/hf_folder.py``.
torch is imported inside the functions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError
from .config import ModelConfig


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
    """The converter specs' size parameters of a reference config (by key: workbench/config/vocabulary.py)."""
    from ..config.vocabulary import canonical_values
    from ..spec import ModelParams
    from ..spec.config_params import spec_from_canonical

    return ModelParams(**spec_from_canonical(canonical_values(model)))


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
    """``config.json`` of the chosen HF family, from its spec's ``hf_config`` block (the one used by
    ``workbench convert --to hf``), with this reference config's settings."""
    from ..spec import load_arch
    from ..spec.hf_config import TORCH_DTYPES, build_config

    arch = load_arch(hf_architecture(model)[0])
    params = spec_params(model)
    if vocab_rows:
        params = params.with_values(vocab=vocab_rows)
    dtype = {name: key for key, name in TORCH_DTYPES.items()}.get(torch_dtype, "fp32")
    return build_config(arch.hf_config, params, hf_base=None, stated=_stated(model), dtype=dtype, tied=False,
                        arch_name=arch.name).config


def _stated(model: ModelConfig) -> dict[str, Any]:
    """The reference config's canonical values (the ``hf_config`` settings read them by key), and two facts
    of the reference model that no field states: RoPE computed for every position (no table longer than
    the sequence) and no auxiliary load-balancing loss (config.py MATH)."""
    from ..config.vocabulary import canonical_values

    return {**canonical_values(model), "model.max_position_embeddings": model.seq_length, "moe.aux_loss_coeff": 0.0}


def save_hf_safetensors(state_dict_megatron: dict, model: ModelConfig, path: Path,
                        shard_bytes: int | None = None) -> list[Path]:
    """Write ``path/`` as an HF model folder (replacing it); returns the files written (weights, index, config).

    Written by the one HF-folder writer (:class:`workbench.convert.hf_folder.FolderSink`): one
    ``model.safetensors`` when the tensors fit ``shard_bytes`` (default 5 GB), else
    ``model-0000k-of-0000n.safetensors`` files plus ``model.safetensors.index.json``. Streams one
    tensor at a time through the spec plan.
    """
    from ..convert.hf_folder import FolderSink
    from ..spec import materialize
    from ..spec.hf_config import TORCH_DTYPES

    plan, arrays = hf_plan(state_dict_megatron, model)
    embed = next(step.target for step in plan.steps if step.target.name == "model.embed_tokens.weight")
    config = hf_config(model, embed.shape[0], TORCH_DTYPES[embed.dtype])
    with FolderSink(Path(path), plan.targets, config=config, shard_bytes=shard_bytes, replace=True) as sink:
        for step in plan.steps:
            sink.write(step.target.name, materialize(step, arrays.__getitem__))
    return sink.files
