"""The specs against the project's own reference models: a Megatron state dict of the torch reference
converted to MindFormers has exactly the MindSpore reference's names and shapes, equals the split
written by hand below and gives the MindSpore model the same logits (the HF side is checked against
real transformers in tests/test_reference_hf.py, through hf_io, which uses this spec)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the Megatron side is the torch reference model")

from workbench import spec  # noqa: E402
from workbench.reference import torch_model  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig  # noqa: E402
from workbench.tensors.base import TensorMeta  # noqa: E402

CONFIGS = {"llama": ModelConfig(), "qwen2": ModelConfig(qkv_bias=True), "qwen3": ModelConfig(qk_norm=True),
           "mixtral": ModelConfig(num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=32)}


def megatron_weights(config: ModelConfig) -> dict[str, np.ndarray]:
    model = torch_model.build_model(config, PrecisionConfig(), seed=7)
    return {name: tensor.detach().numpy().copy() for name, tensor in model.state_dict().items()}


def convert(weights: dict[str, np.ndarray], arch_name: str, target: str, config: ModelConfig):
    arch = spec.load_arch(arch_name)
    metas = {name: TensorMeta(name, tuple(array.shape), "fp32") for name, array in weights.items()}
    params = spec.infer_params(metas, "megatron", arch, {"num_heads": config.num_attention_heads})
    plan = spec.build_plan(metas, "megatron", target, arch, params)
    return params, {step.target.name: spec.materialize(step, weights.__getitem__) for step in plan.steps}


def split_by_hand(weights: dict[str, np.ndarray], config: ModelConfig) -> dict[str, np.ndarray]:
    """Megatron -> MindFormers legacy, written out with plain numpy slicing (no layout helpers)."""
    nh, ng, d, ffn = config.num_attention_heads, config.num_kv_heads, config.head_dim, config.ffn_hidden_size
    per_group = nh // ng
    out = {"model.tok_embeddings.embedding_weight": weights["embedding.word_embeddings.weight"],
           "model.norm_out.weight": weights["decoder.final_layernorm.weight"],
           "lm_head.weight": weights["output_layer.weight"]}
    for i in range(config.num_layers):
        m, f = f"decoder.layers.{i}.", f"model.layers.{i}."
        out[f + "attention_norm.weight"] = weights[m + "input_layernorm.weight"]
        out[f + "ffn_norm.weight"] = weights[m + "pre_mlp_layernorm.weight"]
        out[f + "attention.wo.weight"] = weights[m + "self_attention.linear_proj.weight"]
        for kind in ("weight", "bias") if config.qkv_bias else ("weight",):
            fused = weights[m + f"self_attention.linear_qkv.{kind}"]
            rows = [fused[g * (per_group + 2) * d:(g + 1) * (per_group + 2) * d] for g in range(ng)]
            out[f + f"attention.wq.{kind}"] = np.concatenate([r[:per_group * d] for r in rows])
            out[f + f"attention.wk.{kind}"] = np.concatenate([r[per_group * d:(per_group + 1) * d] for r in rows])
            out[f + f"attention.wv.{kind}"] = np.concatenate([r[(per_group + 1) * d:] for r in rows])
        if config.qk_norm:
            out[f + "attention.q_norm.weight"] = weights[m + "self_attention.q_layernorm.weight"]
            out[f + "attention.k_norm.weight"] = weights[m + "self_attention.k_layernorm.weight"]
        out.update(moe_by_hand(weights, config, i) if config.num_experts else dense_by_hand(weights, ffn, i))
    return out


def dense_by_hand(weights: dict[str, np.ndarray], ffn: int, i: int) -> dict[str, np.ndarray]:
    m, f = f"decoder.layers.{i}.mlp.", f"model.layers.{i}.feed_forward."
    fc1 = weights[m + "linear_fc1.weight"]                                  # [gate; up]
    return {f + "w1.weight": fc1[:ffn], f + "w3.weight": fc1[ffn:], f + "w2.weight": weights[m + "linear_fc2.weight"]}


def moe_by_hand(weights: dict[str, np.ndarray], config: ModelConfig, i: int) -> dict[str, np.ndarray]:
    m, f, ffn = f"decoder.layers.{i}.mlp.", f"model.layers.{i}.feed_forward.", config.expert_ffn_size
    experts = [m + f"experts.local_experts.{e}." for e in range(config.num_experts)]
    fc1 = [weights[e + "linear_fc1.weight"] for e in experts]
    return {f + "router.dense.weight": weights[m + "router.weight"],
            f + "ffn.w1.weight": np.stack([w[:ffn] for w in fc1]), f + "ffn.w3.weight": np.stack([w[ffn:] for w in fc1]),
            f + "ffn.w2.weight": np.stack([weights[e + "linear_fc2.weight"] for e in experts])}


@pytest.mark.parametrize("arch_name", list(CONFIGS))
def test_megatron_reference_names_are_detected_and_sizes_inferred(arch_name):
    config = CONFIGS[arch_name]
    weights = megatron_weights(config)
    assert spec.detect_arch(weights) == arch_name
    arch = spec.load_arch(arch_name)
    assert spec.detect_format(weights, arch, candidates=["hf", "megatron", "mindformers"]) == "megatron"
    params, _ = convert(weights, arch_name, "hf", config)
    assert (params.num_layers, params.hidden, params.num_heads, params.num_kv_heads, params.head_dim, params.vocab) \
        == (config.num_layers, config.hidden_size, config.num_attention_heads, config.num_kv_heads,
            config.head_dim, config.vocab_size)
    assert (params.num_experts, params.moe_ffn or params.ffn) == (config.num_experts, config.expert_ffn_size)


@pytest.mark.parametrize("arch_name", list(CONFIGS))
def test_megatron_to_mindformers_equals_the_mindspore_reference(arch_name):
    ms_model = pytest.importorskip("workbench.reference.ms_model", reason="the MindFormers side needs mindspore")
    config = CONFIGS[arch_name]
    weights = megatron_weights(config)
    _, converted = convert(weights, arch_name, "mindformers", config)
    assert {n: a.shape for n, a in converted.items()} == ms_model.parameter_shapes(config, qkv_concat=False)
    by_hand = split_by_hand(weights, config)
    assert set(by_hand) == set(converted)
    for name, array in by_hand.items():
        assert np.array_equal(converted[name], array), name
    _, fused = convert(weights, arch_name, "mindformers_qkv_concat", config)
    assert {n: a.shape for n, a in fused.items()} == ms_model.parameter_shapes(config, qkv_concat=True)
    reference_fused = ms_model.fuse_weights(converted, config)
    assert set(reference_fused) == set(fused)
    assert all(np.array_equal(fused[n], reference_fused[n]) for n in fused)


@pytest.mark.parametrize("arch_name", ["llama", "qwen3", "mixtral"])
def test_mindspore_model_with_converted_weights_gives_the_torch_logits(arch_name):
    ms_model = pytest.importorskip("workbench.reference.ms_model", reason="the MindFormers side needs mindspore")
    from mindspore import Tensor

    config = CONFIGS[arch_name]
    torch_net = torch_model.build_model(config, PrecisionConfig(), seed=3)
    weights = {name: t.detach().numpy().copy() for name, t in torch_net.state_dict().items()}
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, size=(2, 16))
    expected = torch_net(torch.from_numpy(tokens)).detach().numpy()
    for target, qkv_concat in (("mindformers", False), ("mindformers_qkv_concat", True)):
        _, converted = convert(weights, arch_name, target, config)
        ms_net = ms_model.build_model(config, seed=0, qkv_concat=qkv_concat)
        ms_model.set_weights(ms_net, converted)
        got = ms_net.logits(Tensor(tokens.astype(np.int32))).asnumpy()
        assert np.abs(got - expected).max() < 1e-4 * np.abs(expected).max(), target
