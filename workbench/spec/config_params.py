"""Size parameters from a model config: HF ``config.json``, a Megatron config, a MindFormers yaml.

HF configs are read directly (their keys are the sizes) and their values checked where they are
read: a size must be a positive integer (``null`` means "not stated", as in transformers), every
number finite. Megatron and MindFormers configs go through :func:`workbench.config.read_config` +
``resolve`` (canonical keys such as ``model.num_attention_heads``), so every form those readers
accept works here too. :func:`read_model_config` is the one dispatch; the HF-folder writer reads
the same object for ``config.json`` (``workbench/spec/hf_config.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..input_files import expect, expect_count, read_json

# canonical key -> spec parameter
_CANONICAL = {"model.num_layers": "num_layers", "model.hidden_size": "hidden", "model.num_attention_heads": "num_heads",
              "model.num_kv_heads": "num_kv_heads", "model.head_dim": "head_dim", "model.ffn_hidden_size": "ffn",
              "model.padded_vocab_size": "vocab", "moe.shared_expert_size": "shared_ffn"}
# raw argument / yaml path (first present wins) -> spec parameter
_RAW = {"moe_ffn": ("moe_ffn_hidden_size", "model.model_config.moe_ffn_hidden_size",
                    "model.model_config.moe_intermediate_size"),
        "first_dense_layers": ("model.model_config.first_k_dense_replace",),
        "q_lora_rank": ("q_lora_rank", "model.model_config.q_lora_rank"),
        "kv_lora_rank": ("kv_lora_rank", "model.model_config.kv_lora_rank"),
        "qk_nope_dim": ("qk_head_dim", "model.model_config.qk_nope_head_dim", "model.model_config.qk_head_dim"),
        "qk_rope_dim": ("qk_pos_emb_head_dim", "model.model_config.qk_rope_head_dim",
                        "model.model_config.qk_pos_emb_head_dim"),
        "v_head_dim": ("v_head_dim", "model.model_config.v_head_dim")}
_HF = {"num_hidden_layers": "num_layers", "hidden_size": "hidden", "vocab_size": "vocab",
       "num_attention_heads": "num_heads", "num_key_value_heads": "num_kv_heads", "head_dim": "head_dim",
       "intermediate_size": "ffn", "moe_intermediate_size": "moe_ffn", "first_k_dense_replace": "first_dense_layers",
       "q_lora_rank": "q_lora_rank", "kv_lora_rank": "kv_lora_rank", "qk_nope_head_dim": "qk_nope_dim",
       "qk_rope_head_dim": "qk_rope_dim", "v_head_dim": "v_head_dim",
       "shared_expert_intermediate_size": "shared_ffn"}
_HF_EXPERTS = ("num_local_experts", "n_routed_experts", "num_experts")


# HF sizes that may be 0 (all others must be positive)
_HF_ZERO_OK = {"first_k_dense_replace", "n_shared_experts"}
_HF_MAX_DEPTH = 32                    # config.json nests 2-3 levels (text_config, rope_scaling)


@dataclass
class ModelConfigFile:
    """One model config as read: an HF ``config.json`` (``hf``) or a Megatron / MindFormers config
    (``raw`` + ``canonical``)."""

    path: Path
    hf: dict | None = None
    raw: Any = None
    canonical: Any = None


def params_from_config(path: Path | str, framework: str | None = None) -> dict[str, int]:
    """Spec parameters a config states (only those it states); ``framework`` forces the reader."""
    config = read_model_config(path, framework)
    if config.hf is not None:
        return hf_params(config.hf, str(config.path))
    return _canonical_params(config.raw, config.canonical)


def read_model_config(path: Path | str, framework: str | None = None) -> ModelConfigFile:
    """Read a model config once; ``framework`` ``hf`` / ``megatron`` / ``mindformers`` forces the reader."""
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file() and framework in (None, "hf"):
        path = path / "config.json"
    if framework == "hf" or (framework is None and path.suffix == ".json"):
        data = read_hf_config(path)
        if framework == "hf" or "model_type" in data or "num_hidden_layers" in data:
            return ModelConfigFile(path, hf=data)
    if framework is not None:
        return _canonical(path, framework)
    if path.suffix not in (".yaml", ".yml"):
        return _canonical(path, "megatron")
    try:                                  # a yaml is a MindFormers config or a Megatron --yaml-cfg / flat args
        return _canonical(path, "mindformers")
    except InputError as mindformers_error:
        try:
            return _canonical(path, "megatron")
        except InputError:
            raise mindformers_error from None


def read_hf_config(path: Path) -> dict:
    """An HF ``config.json``: a JSON object whose sizes are positive integers and numbers finite."""
    data = read_json(path, what="JSON config")
    if not isinstance(data, dict):
        raise InputError(str(path), f"expected a JSON object, found {type(data).__name__}", "pass the model's config.json")
    check_hf_values(data, str(path))
    return data


def check_hf_values(config: dict, where: str) -> None:
    """Sizes (keys this module reads) positive integers or null; every number finite, at any depth."""
    text = config.get("text_config")
    if text is not None:
        expect(text, dict, where, "text_config", "text_config must be a JSON object")
    for scope, prefix in ((config, ""), (text or {}, "text_config.")):
        for key in (*_HF, *_HF_EXPERTS, "n_shared_experts"):
            if scope.get(key) is not None:
                expect_count(scope[key], where, prefix + key, minimum=0 if key in _HF_ZERO_OK else 1,
                             fix=f"{prefix + key} must be a positive integer (or null when not used)")
    _check_finite(config, where, "", 0)


def _check_finite(value: Any, where: str, key: str, depth: int) -> None:
    if depth > _HF_MAX_DEPTH:
        raise InputError(where, f"{key} nests deeper than {_HF_MAX_DEPTH} levels", "pass the model's config.json")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(where, f"{key} is {value}, expected a finite number", f"write a finite value for {key}")
    if isinstance(value, dict):
        for child, item in value.items():
            _check_finite(item, where, f"{key}.{child}" if key else str(child), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, where, f"{key}.{index}", depth + 1)


def hf_params(config: dict[str, Any], where: str = "config.json") -> dict[str, int]:
    """HF config.json keys -> spec parameters (Mixtral's intermediate_size is the expert size)."""
    check_hf_values(config, where)
    config = {**config, **(config.get("text_config") or {})}
    out = {param: config[key] for key, param in _HF.items() if config.get(key) is not None}
    experts = next((config[k] for k in _HF_EXPERTS if config.get(k)), 0)
    if experts:
        out["num_experts"] = experts
        out.setdefault("moe_ffn", out.get("ffn", 0))
        if config.get("n_shared_experts") and "moe_ffn" in out:
            out["shared_ffn"] = config["n_shared_experts"] * out["moe_ffn"]
    if "num_heads" in out:
        out.setdefault("num_kv_heads", out["num_heads"])
        if "hidden" in out and "head_dim" not in out and "kv_lora_rank" not in out:
            out["head_dim"] = out["hidden"] // out["num_heads"]
    return out


def canonical_params(path: Path, framework: str) -> dict[str, int]:
    """Megatron / MindFormers config -> spec parameters, via the canonical config readers."""
    config = _canonical(Path(path), framework)
    return _canonical_params(config.raw, config.canonical)


def _canonical(path: Path, framework: str) -> ModelConfigFile:
    from ..config import read_config, resolve

    raw = read_config(path, framework)
    return ModelConfigFile(path, raw=raw, canonical=resolve(raw))


def _canonical_params(raw: Any, config: Any) -> dict[str, int]:
    out = {param: int(config.value(key)) for key, param in _CANONICAL.items() if _is_int(config.value(key))}
    if "vocab" not in out and _is_int(config.value("model.vocab_size")):
        out["vocab"] = int(config.value("model.vocab_size"))
    experts = config.value("moe.num_experts")
    if _is_int(experts) and experts > 1:
        out["num_experts"] = int(experts)
    for param, keys in _RAW.items():
        value = next((_to_int(raw.values[k].value) for k in keys
                      if k in raw.values and _to_int(raw.values[k].value) is not None), None)
        if value is not None:
            out[param] = value
    if out.get("num_experts") and "moe_ffn" not in out and "ffn" in out:
        out["moe_ffn"] = out["ffn"]          # Megatron: --moe-ffn-hidden-size defaults to --ffn-hidden-size
    if not out.get("shared_ffn"):
        out.pop("shared_ffn", None)
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _to_int(value: Any) -> int | None:
    """An int as written (``32`` or ``"32"`` from a script); None for anything else."""
    if _is_int(value):
        return int(value)
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None
