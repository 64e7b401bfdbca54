"""Megatron derivations for the router dtype and the fused kernels (issue 12), registered in DERIVATIONS.

Facts: docs/framework-facts.md, section "Issue 12".
"""
from __future__ import annotations

from .derive import Derived, Resolver, Unknown, derivation


@derivation
def megatron_router_dtype(r: Resolver) -> Derived | Unknown:
    """No --moe-router-dtype: the router runs in the input (activation) dtype; MindSpeed-LLM's
    --router-gating-in-fp32 computes the gating linear in fp32."""
    if r.arg("router_gating_in_fp32", "bool", False):
        return Derived("fp32", r.origin("router_gating_in_fp32"), "set")
    compute = r.value("precision.compute_dtype")
    return Derived(compute, "= activation dtype (no --moe-router-dtype / --router-gating-in-fp32)", "default")


def _ascend(r: Resolver) -> bool:
    return r.value("runtime.hardware") == "ascend"


def _legacy_model(r: Resolver) -> bool:
    return bool(r.arg("use_legacy_models", "bool", False))


def _set_flag(r: Resolver, name: str) -> Derived | None:
    """The value of a flag the script states, else None."""
    if r.raw.lookup(name) is None:
        return None
    return Derived(bool(r.arg(name, "bool")), r.origin(name), "set")


# megatron/core/transformer/enums.py (core_v0.12.1) AttnBackend: flash=1, fused=2, unfused=3, local=4, auto=5;
# logs print "AttnBackend.auto", checkpoints keep "AttnBackend(5)".
_ATTN_BACKENDS = {"1": "flash", "2": "fused", "3": "unfused", "4": "local", "5": "auto"}


def _attention_backend(raw) -> str:
    text = str(getattr(raw, "args", None) or raw).strip("()[], ")
    name = text.rsplit(".", 1)[-1].rsplit("(", 1)[-1].strip("()")
    return _ATTN_BACKENDS.get(name, name)


@derivation
def megatron_flash_attention(r: Resolver) -> Derived | Unknown:
    """Ascend (MindSpeed) and the legacy model: --use-flash-attn. Upstream mcore on GPU: Transformer
    Engine's attention with --attention-backend (auto picks flash or cuDNN fused); --transformer-impl
    local or --attention-backend unfused/local give the unfused DotProductAttention."""
    if _ascend(r) or _legacy_model(r):
        return _set_flag(r, "use_flash_attn") or Derived(False, "default: no --use-flash-attn", "default")
    impl = r.arg("transformer_impl", "str", "transformer_engine")
    backend = _attention_backend(r.arg("attention_backend", "any", "auto"))
    if impl == "local" or backend in ("unfused", "local"):
        return Derived(False, f"--transformer-impl {impl} --attention-backend {backend}: unfused DotProductAttention",
                       "set" if r.origin("transformer_impl") or r.origin("attention_backend") else "default")
    return Derived(True, f"Transformer Engine attention, --attention-backend {backend} (flash / cuDNN fused)",
                   "set" if r.origin("attention_backend") else "default")


@derivation
def megatron_fused_rope(r: Resolver) -> Derived | Unknown:
    """Ascend: MindSpeed --use-fused-rotary-pos-emb (default off). GPU mcore: apply_rope_fusion is on
    unless --no-rope-fusion, and off when the position embedding is not RoPE."""
    if _ascend(r) or _legacy_model(r):
        return (_set_flag(r, "use_fused_rotary_pos_emb")
                or Derived(False, "default: no --use-fused-rotary-pos-emb", "default"))
    if r.value("model.position_embedding") != "rope":
        return Derived(False, "no RoPE: Megatron switches apply_rope_fusion off")
    return _set_flag(r, "apply_rope_fusion") or Derived(True, "default: RoPE fusion on (no --no-rope-fusion)", "default")


@derivation
def megatron_fused_swiglu(r: Resolver) -> Derived | Unknown:
    """Ascend: MindSpeed --use-fused-swiglu (default off). GPU mcore: bias_swiglu_fusion is on unless
    --no-bias-swiglu-fusion (it fuses the SwiGLU of the MLP)."""
    if r.value("model.activation") != "swiglu":
        return Derived(False, "no SwiGLU activation")
    if _ascend(r) or _legacy_model(r):
        return _set_flag(r, "use_fused_swiglu") or Derived(False, "default: no --use-fused-swiglu", "default")
    return (_set_flag(r, "bias_swiglu_fusion")
            or Derived(True, "default: bias-SwiGLU fusion on (no --no-bias-swiglu-fusion)", "default"))


@derivation
def megatron_deterministic(r: Resolver) -> Derived | Unknown:
    """GPU: --deterministic-mode (core_v0.12.1); Ascend: MindSpeed's --npu-deterministic
    (MindSpeed features_manager NPUDeterministicFeature, store_true)."""
    name = "npu_deterministic" if _ascend(r) else "deterministic_mode"
    flag = "--" + name.replace("_", "-")
    return _set_flag(r, name) or Derived(False, f"default: no {flag}", "default")


@derivation
def megatron_first_dense_layers(r: Resolver) -> Derived | Unknown:
    """MindSpeed-LLM --first-k-dense-replace: the first k layers stay dense; unset or negative: none."""
    k = r.arg("first_k_dense_replace", "int")
    if k is None:
        return Derived(0, "default: no --first-k-dense-replace (every layer MoE)", "default")
    return Derived(max(k, 0), r.origin("first_k_dense_replace") + (" (negative: no dense layers)" if k < 0 else ""), "set")


@derivation
def megatron_rope_scaling(r: Resolver) -> Derived | Unknown:
    """MindSpeed-LLM --rope-scaling-type wins; upstream --use-rope-scaling is the Llama-3.x scaling."""
    kind = r.arg("rope_scaling_type", "str")
    if kind:
        return Derived(str(kind).lower(), r.origin("rope_scaling_type"), "set")
    if r.arg("use_rope_scaling", "bool", False):
        return Derived("llama3", r.origin("use_rope_scaling"), "set")
    return Derived("none", "default: no RoPE scaling", "default")
