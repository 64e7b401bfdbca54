"""Legacy MindFormers MoE derivations (issue 12), registered in DERIVATIONS.

LlamaForCausalLM builds MoEV2 (TopkRouterV2), or MoEV3 with moe_config.use_gmm (mindformers r1.5.0 / 2.1.0
models/llama/llama_transformer.py, models/llama/llama_layer.py LlamaFeedForwardWithMoE). Both take the
balancing loss from aux_loss_types / aux_loss_factors (moe.py TopkRouterV2: aux_loss_config; moev3.py:136-137
aux_loss_config.get("expert", 0.0)); moe_config.aux_loss_factor is read only by the old MoE class. MoEV3
has no capacity: it is dropless. Facts: docs/framework-facts.md, section "Issue 12".
"""
from __future__ import annotations

from .derive import Derived, Resolver, Unknown, derivation


def _gmm(r: Resolver) -> bool:
    return bool(r.arg("moe_config.use_gmm", "bool", False))


@derivation
def mindformers_legacy_aux_loss(r: Resolver) -> Derived | Unknown:
    types = r.arg("moe_config.aux_loss_types") or []
    factors = r.arg("moe_config.aux_loss_factors") or []
    ignored = " (moe_config.aux_loss_factor is ignored by MoEV2 / MoEV3)" if r.origin("moe_config.aux_loss_factor") else ""
    if not isinstance(types, list) or not isinstance(factors, list):
        return Unknown("moe_config.aux_loss_types and aux_loss_factors as lists")
    if "expert" in types and types.index("expert") < len(factors):
        factor = factors[types.index("expert")]
        if isinstance(factor, (int, float)) and not isinstance(factor, bool):
            return Derived(float(factor), f"aux_loss_factors[{types.index('expert')}] for 'expert' "
                                          f"({r.origin('moe_config.aux_loss_factors')}){ignored}", "set")
        return Unknown("moe_config.aux_loss_factors: a number for the 'expert' loss")
    return Derived(0.0, f"no 'expert' entry in moe_config.aux_loss_types: no balancing loss{ignored}", "default")


@derivation
def mindformers_legacy_capacity_factor(r: Resolver) -> Derived | Unknown:
    if _gmm(r):
        return Derived(-1.0, f"moe_config.use_gmm ({r.origin('moe_config.use_gmm')}): MoEV3 is dropless, "
                             "capacity_factor is ignored", "set")
    if r.raw.lookup("moe_config.capacity_factor") is not None:
        return Derived(r.arg("moe_config.capacity_factor", "float"), r.origin("moe_config.capacity_factor"), "set")
    return Derived(1.1, "default: MoEConfig capacity_factor 1.1", "default")


@derivation
def mindformers_legacy_pad_to_capacity(r: Resolver) -> Derived | Unknown:
    if _gmm(r):
        return Derived(False, "MoEV3 (use_gmm) dispatches without capacity padding", "set")
    return Derived(True, "MoEV2 dispatches fixed-capacity (padded) expert inputs", "default")


def _llama_class(r: Resolver) -> bool:
    from .registry import load_framework

    arch = r.arg("model.arch.type")
    return arch is None or arch in load_framework("mindformers").get("legacy_architectures", [])


@derivation
def mindformers_legacy_expert_ffn_size(r: Resolver) -> Derived | Unknown:
    """LlamaForCausalLM's experts are LlamaFeedForward(intermediate_size=config.intermediate_size)
    (models/llama/llama.py:206, llama_transformer.py, llama_layer.py LlamaFeedForwardWithMoE); other
    classes (research DeepSeek) size them with moe_config.moe_intermediate_size."""
    if _llama_class(r):
        ffn = r.key("model.ffn_hidden_size")
        return Derived(ffn.value, f"= the model FFN size ({ffn.source})") if ffn.known else Unknown(ffn.settle)
    if r.raw.lookup("moe_config.moe_intermediate_size") is not None:
        return Derived(r.arg("moe_config.moe_intermediate_size", "int"), r.origin("moe_config.moe_intermediate_size"), "set")
    return Unknown("moe_config.moe_intermediate_size")


@derivation
def mindformers_rope_scaling(r: Resolver) -> Derived | Unknown:
    """mcore rope_scaling: a mapping with rope_type (or type), as Hugging Face writes it."""
    scaling = r.arg("model.model_config.rope_scaling")
    if scaling is None:
        return Derived("none", "default: rope_scaling None", "default")
    if isinstance(scaling, dict) and isinstance(scaling.get("rope_type", scaling.get("type")), str):
        return Derived(scaling.get("rope_type", scaling.get("type")).lower(), r.origin("model.model_config.rope_scaling"), "set")
    return Unknown("model.model_config.rope_scaling as a mapping with rope_type")
