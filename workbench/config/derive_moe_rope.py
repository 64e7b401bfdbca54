"""Derivations for the MoE layer pattern, the top-k weight normalisation and the RoPE scaling factors
(issue 12), registered in DERIVATIONS. Facts and sources: docs/framework-facts.md §6 and the comments
next to each key in checklists/keys.yaml.
"""
from __future__ import annotations

from .derive import Derived, Resolver, Unknown, derivation
from .layer_pattern import PatternError, first_dense, parse_pattern, run_length
from .registry import load_framework


# ------------------------------------------------------------------------- MoE layer pattern
def _integer(value) -> int | None:
    """An integer frequency (MindSpeed's --moe-layer-freq is type=int, negative included), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = value.strip() if isinstance(value, str) else ""
    return int(text) if text.lstrip("-").isdigit() else None


def _pattern(r: Resolver, spec, origin: str, settle: str) -> Derived | Unknown:
    layers = r.need("model.num_layers")
    try:
        return Derived(run_length(parse_pattern(spec, layers)), origin, "set")
    except PatternError as error:
        return Unknown(f"{settle}: {error}", origin)


@derivation
def megatron_moe_layer_pattern(r: Resolver) -> Derived | Unknown:
    """MindSpeed-LLM --first-k-dense-replace K (with --moe-layer-freq F, an integer there): layer i is MoE when
    i >= K and i % F == 0 (MindSpeed-LLM 2.2 core/transformer/transformer_block.py:113-120). Upstream
    --moe-layer-freq: an integer N (i % N == 0) or a list expression (core_v0.12.1 gpt_layer_specs.py:388)."""
    layers = r.need("model.num_layers")
    first_k = r.arg("first_k_dense_replace", "int")
    freq = r.arg("moe_layer_freq")
    step = _integer(freq)
    if first_k and step:   # MindSpeed's rule, Python's % included (-1 and -1: every layer MoE)
        pattern = [1 if layer >= first_k and layer % step == 0 else 0 for layer in range(layers)]
        return Derived(run_length(pattern), f"{r.origin('first_k_dense_replace')}, {r.origin('moe_layer_freq')}", "set")
    if first_k:
        return Derived(run_length(first_dense(first_k, layers)), r.origin("first_k_dense_replace")
                       + (" (negative: no dense layers)" if first_k < 0 else ""), "set")
    if freq is not None:
        return _pattern(r, freq, r.origin("moe_layer_freq"),
                        "--moe-layer-freq as an integer or a list expression such as \"([0]*3+[1]*61)\"")
    return Derived(run_length([1] * layers), "default: --moe-layer-freq 1 (every layer MoE)", "default")


@derivation
def mindformers_mcore_moe_layer_pattern(r: Resolver) -> Derived | Unknown:
    """first_k_dense_replace K gives [0]*K + [1]*(n-K); else moe_layer_freq (integer or list), default 1
    (mindformers 2.1.0 parallel_core/training_graph/base_models/gpt/gpt_layer_specs.py:226-232)."""
    layers = r.need("model.num_layers")
    first_k = r.arg("model.model_config.first_k_dense_replace", "int")
    if first_k:
        return Derived(run_length(first_dense(first_k, layers)),
                       r.origin("model.model_config.first_k_dense_replace"), "set")
    freq = r.arg("model.model_config.moe_layer_freq")
    if freq is not None:
        return _pattern(r, freq, r.origin("model.model_config.moe_layer_freq"),
                        "model.model_config.moe_layer_freq as an integer or a list of 0/1")
    return Derived(run_length([1] * layers), "default: moe_layer_freq 1 (every layer MoE)", "default")


@derivation
def mindformers_legacy_moe_layer_pattern(r: Resolver) -> Derived | Unknown:
    """LlamaForCausalLM (and the other known legacy classes) build the MoE in every layer; another class
    (DeepseekV3ForCausalLM) reads moe_config.first_k_dense_replace."""
    layers = r.need("model.num_layers")
    arch = r.arg("model.arch.type")
    if arch is None or arch in load_framework("mindformers").get("legacy_architectures", []):
        return Derived(run_length([1] * layers), f"fixed: {arch or 'LlamaForCausalLM'} builds the MoE in every layer",
                       "fixed")
    first_k = r.arg("moe_config.first_k_dense_replace")
    if isinstance(first_k, int) and not isinstance(first_k, bool):
        return Derived(run_length(first_dense(first_k, layers)), r.origin("moe_config.first_k_dense_replace"), "set")
    return Unknown(f"moe_config.first_k_dense_replace as an integer (model.arch.type {arch})")


# ------------------------------------------------------------------------- top-k weights
NORMALISED, RAW = "normalised", "raw"


@derivation
def megatron_topk_weights(r: Resolver) -> Derived | Unknown:
    """core_v0.12.1 moe_utils.py:548-566 topk_softmax_with_capacity: softmax after top-k (default) gives
    weights summing to 1; --moe-router-pre-softmax keeps the softmax scores of all experts (MindSpeed-LLM 2.2
    --norm-topk-prob renormalises them, core/transformer/moe/router.py:484); sigmoid scores are
    renormalised when top-k > 1."""
    topk, score = r.need("moe.router_topk", "moe.score_function")
    if score == "sigmoid":
        return Derived(NORMALISED if topk > 1 else RAW, f"sigmoid scores, top-k {topk}: "
                       + ("renormalised to sum 1" if topk > 1 else "the score itself"))
    if not r.arg("moe_router_pre_softmax", "bool", False):
        return Derived(NORMALISED, "default: softmax over the top-k logits (no --moe-router-pre-softmax)", "default")
    if r.arg("norm_topk_prob", "bool", False) and topk > 1:
        return Derived(NORMALISED, f"{r.origin('moe_router_pre_softmax')} with {r.origin('norm_topk_prob')}", "set")
    return Derived(RAW, f"{r.origin('moe_router_pre_softmax')}: softmax over all experts, top-k not renormalised", "set")


@derivation
def mindformers_topk_weights(r: Resolver) -> Derived | Unknown:
    """MindFormers applies softmax (or sigmoid) to every expert first, takes the top-k, and renormalises them
    when norm_topk_prob and top-k > 1 (mindformers 2.1.0 modules/transformer/moe.py:1192 TopkRouterV2,
    parallel_core/training_graph/transformer/moe/router.py:290); legacy TopkRouterV1 always renormalises
    (moe.py:779-781). Defaults: legacy MoEConfig norm_topk_prob True (moe.py:134), mcore True
    (transformer_config.py:505), Qwen3-MoE False (configuration_qwen3_moe.py:206)."""
    topk = r.need("moe.router_topk")
    if r.raw.generation == "legacy" and r.value("moe.routing_policy") == "TopkRouterV1":
        return Derived(NORMALISED, "TopkRouterV1 renormalises the chosen experts' weights", "fixed")
    path = "moe_config.norm_topk_prob" if r.raw.generation == "legacy" else "model.model_config.norm_topk_prob"
    norm = r.arg(path, "bool")
    origin = r.origin(path) or f"default norm_topk_prob True ({path})"
    kind = "set" if r.raw.lookup(path) is not None and r.raw.lookup(path).kind == "set" else "default"
    if norm is None:
        norm = True
    if topk == 1:
        return Derived(RAW, f"top-k 1: the weight is the score itself ({origin})", kind)
    return Derived(NORMALISED if norm else RAW, origin if norm else f"{origin}: top-k not renormalised", kind)


# ------------------------------------------------------------------------- RoPE scaling factors
def _ascend(r: Resolver) -> bool:
    return r.value("runtime.hardware") == "ascend"


@derivation
def megatron_rope_factor(r: Resolver) -> Derived | Unknown:
    """--rope-scaling-factor: default 8.0 upstream (core_v0.12.1 arguments.py:1270, read with --use-rope-scaling),
    1.0 in MindSpeed-LLM 2.2 (training/arguments.py:154 replaces the flag); MLA's YaRN reads --rotary-scaling-factor
    (arguments.py:2576, default 1.0)."""
    if r.raw.lookup("rope_scaling_factor") is not None:
        return Derived(r.arg("rope_scaling_factor", "float"), r.origin("rope_scaling_factor"), "set")
    if r.raw.lookup("rotary_scaling_factor") is not None:
        return Derived(r.arg("rotary_scaling_factor", "float"), r.origin("rotary_scaling_factor"), "set")
    if _ascend(r):
        return Derived(1.0, "default --rope-scaling-factor 1.0 (MindSpeed-LLM 2.2)", "default")
    return Derived(8.0, "default --rope-scaling-factor 8.0 (Megatron-LM core_v0.12.1)", "default")


@derivation
def megatron_rope_original_positions(r: Resolver) -> Derived | Unknown:
    """YaRN: MindSpeed --rope-scaling-original-max-position-embeddings; Llama-3 scaling: MindSpeed
    --original-max-position-embeddings, upstream fixed 8192 (core_v0.12.1 rotary_pos_embedding.py:89)."""
    for name in ("rope_scaling_original_max_position_embeddings", "original_max_position_embeddings"):
        if r.raw.lookup(name) is not None:
            return Derived(r.arg(name, "int"), r.origin(name), "set")
    if r.value("model.rope_scaling") == "llama3" and not _ascend(r):
        return Derived(8192, "fixed: original_max_position_embeddings=8192 (core_v0.12.1 rotary_pos_embedding.py:89)",
                       "fixed")
    return Unknown("--rope-scaling-original-max-position-embeddings (YaRN) / --original-max-position-embeddings")


@derivation
def mindformers_rope_original_positions(r: Resolver) -> Derived | Unknown:
    """rope_scaling.original_max_position_embeddings, else seq_length (mindformers 2.1.0
    parallel_core/transformer_config.py:2599)."""
    seq = r.key("model.seq_length")
    if not seq.known:
        return Unknown("model.model_config.rope_scaling.original_max_position_embeddings")
    return Derived(seq.value, f"= seq_length ({seq.source}): rope_scaling has no original_max_position_embeddings")
