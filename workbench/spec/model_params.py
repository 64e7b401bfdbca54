"""The size parameters a converter spec is written in, and where a user finds each one.

``PARAMS`` is the single list of names a shape expression in ``converters/*.yaml`` may use;
each comes with the config keys that settle it (named in errors when shapes alone cannot).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

# name -> (meaning, how to settle it: HF config.json / Megatron / MindFormers)
PARAMS: dict[str, tuple[str, str]] = {
    "num_layers": ("transformer layers", "num_hidden_layers / --num-layers / model_config.num_layers"),
    "hidden": ("hidden size", "hidden_size / --hidden-size / model_config.hidden_size"),
    "vocab": ("embedding rows (padded vocabulary)", "vocab_size / --padded-vocab-size / model_config.vocab_size"),
    "num_heads": ("query heads", "num_attention_heads / --num-attention-heads / model_config.num_heads"),
    "num_kv_heads": ("key/value heads (query groups)",
                     "num_key_value_heads / --num-query-groups / model_config.n_kv_heads"),
    "head_dim": ("head dimension", "head_dim / --kv-channels / model_config.head_dim"),
    "ffn": ("dense MLP intermediate size", "intermediate_size / --ffn-hidden-size / model_config.intermediate_size"),
    "num_experts": ("routed experts", "num_local_experts or n_routed_experts / --num-experts / moe_config.expert_num"),
    "moe_ffn": ("routed expert intermediate size",
                "moe_intermediate_size (Mixtral: intermediate_size) / --moe-ffn-hidden-size / moe_ffn_hidden_size"),
    "shared_ffn": ("shared expert intermediate size",
                   "n_shared_experts*moe_intermediate_size / --moe-shared-expert-intermediate-size / "
                   "moe_shared_expert_intermediate_size"),
    "first_dense_layers": ("leading dense (non-MoE) layers", "first_k_dense_replace / --moe-layer-freq / "
                                                             "first_k_dense_replace"),
    "moe_layer_freq": ("one MoE layer every N layers (0 or 1: every layer)",
                       "moe_layer_freq / --moe-layer-freq / moe_layer_freq"),
    "mtp_layers": ("multi-token-prediction layers after the decoder's",
                   "num_nextn_predict_layers / --mtp-num-layers / mtp_depth"),
    "q_lora_rank": ("MLA query compression rank", "q_lora_rank / --q-lora-rank / q_lora_rank"),
    "kv_lora_rank": ("MLA key/value compression rank", "kv_lora_rank / --kv-lora-rank / kv_lora_rank"),
    "qk_nope_dim": ("MLA q/k head dim without RoPE", "qk_nope_head_dim / --qk-head-dim / qk_nope_head_dim"),
    "qk_rope_dim": ("MLA q/k RoPE head dim", "qk_rope_head_dim / --qk-pos-emb-head-dim / qk_rope_head_dim"),
    "v_head_dim": ("MLA value head dim", "v_head_dim / --v-head-dim / v_head_dim"),
}
COUNTED = ("num_layers", "num_experts", "first_dense_layers")   # found by counting name indices


@dataclass(frozen=True)
class ModelParams:
    """Sizes of one model; 0 = not used by the architecture."""

    num_layers: int = 0
    hidden: int = 0
    vocab: int = 0
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    ffn: int = 0
    num_experts: int = 0
    moe_ffn: int = 0
    shared_ffn: int = 0
    first_dense_layers: int = 0
    moe_layer_freq: int = 0
    mtp_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0

    def env(self) -> dict[str, int]:
        """name -> value, for evaluating shape expressions (a new dict; every field is an int, so no
        ``asdict`` deep copy: plans call this once per tensor)."""
        return {name: getattr(self, name) for name in _FIELDS}

    def with_values(self, **values: int) -> "ModelParams":
        return replace(self, **values)

    @staticmethod
    def from_dict(values: dict[str, Any]) -> "ModelParams":
        known = {f.name for f in fields(ModelParams)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown model parameter(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        bad = sorted(name for name, value in values.items()
                     if isinstance(value, bool) or not isinstance(value, int) or value < 0)
        if bad:
            raise ValueError(f"model parameter(s) {', '.join(f'{n}={values[n]!r}' for n in bad)} "
                             "must be whole numbers >= 0")
        return ModelParams(**values)


_FIELDS = tuple(f.name for f in fields(ModelParams))
PARAM_NAMES = frozenset(PARAMS)
assert PARAM_NAMES == {f.name for f in fields(ModelParams)}


def settle_hint(name: str) -> str:
    meaning, keys = PARAMS[name]
    return f"{name} ({meaning}): {keys}"
