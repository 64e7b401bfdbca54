"""Size parameters from a model config: HF ``config.json``, a Megatron config, a MindFormers yaml.

HF configs are read directly (their keys are the sizes); Megatron and MindFormers configs go
through :func:`workbench.config.read_config` + ``resolve`` (canonical keys such as
``model.num_attention_heads``), so every form those readers accept works here too.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError
from ..input_files import expect, read_json

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


def params_from_config(path: Path | str, framework: str | None = None) -> dict[str, int]:
    """Spec parameters a config states (only those it states); ``framework`` forces the reader."""
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file() and framework in (None, "hf"):
        path = path / "config.json"
    if framework == "hf" or (framework is None and path.suffix == ".json" and _is_hf_config(path)):
        return hf_params(_read_json(path))
    if framework is not None:
        return canonical_params(path, framework)
    if path.suffix not in (".yaml", ".yml"):
        return canonical_params(path, "megatron")
    try:                                  # a yaml is a MindFormers config or a Megatron --yaml-cfg / flat args
        return canonical_params(path, "mindformers")
    except InputError as mindformers_error:
        try:
            return canonical_params(path, "megatron")
        except InputError:
            raise mindformers_error from None


def _read_json(path: Path) -> dict:
    return expect(read_json(path, what="JSON config"), dict, str(path), "the config", "pass the model's config.json")


def _is_hf_config(path: Path) -> bool:
    data = read_json(path, what="JSON config")      # unreadable or too deep: one line, not a guess
    return isinstance(data, dict) and ("model_type" in data or "num_hidden_layers" in data)


def hf_params(config: dict[str, Any]) -> dict[str, int]:
    """HF config.json keys -> spec parameters (Mixtral's intermediate_size is the expert size)."""
    config = {**config, **(config.get("text_config") or {})}
    out = {param: int(config[key]) for key, param in _HF.items() if isinstance(config.get(key), int)}
    experts = next((int(config[k]) for k in _HF_EXPERTS if isinstance(config.get(k), int)), 0)
    if experts:
        out["num_experts"] = experts
        out.setdefault("moe_ffn", out.get("ffn", 0))
        if isinstance(config.get("n_shared_experts"), int) and "moe_ffn" in out:
            out["shared_ffn"] = int(config["n_shared_experts"]) * out["moe_ffn"]
    if "num_heads" in out:
        out.setdefault("num_kv_heads", out["num_heads"])
        if "hidden" in out and "head_dim" not in out and "kv_lora_rank" not in out:
            out["head_dim"] = out["hidden"] // out["num_heads"]
    return {name: value for name, value in out.items() if value is not None}


def canonical_params(path: Path, framework: str) -> dict[str, int]:
    """Megatron / MindFormers config -> spec parameters, via the canonical config readers."""
    from ..config import read_config, resolve

    raw = read_config(path, framework)
    config = resolve(raw)
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
