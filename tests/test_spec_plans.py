"""Plans for full-size models from shapes alone (synthetic metas, no tensors), parameter inference,
format/arch detection, and the errors that name the tensor and the spec rule."""
from __future__ import annotations

import json
import re

import pytest

from workbench import spec
from workbench.errors import InputError
from workbench.reference.config import ModelConfig

LLAMA2_7B = dict(num_layers=32, hidden=4096, vocab=32000, num_heads=32, num_kv_heads=32, head_dim=128, ffn=11008)
LLAMA3_70B = dict(num_layers=80, hidden=8192, vocab=128256, num_heads=64, num_kv_heads=8, head_dim=128, ffn=28672)
MIXTRAL_8X7B = dict(num_layers=32, hidden=4096, vocab=32000, num_heads=32, num_kv_heads=8, head_dim=128,
                    num_experts=8, moe_ffn=14336)
QWEN3_32B = dict(num_layers=64, hidden=5120, vocab=151936, num_heads=64, num_kv_heads=8, head_dim=128, ffn=25600)
DEEPSEEK_V3 = dict(num_layers=61, hidden=7168, vocab=129280, num_heads=128, ffn=18432, num_experts=256, moe_ffn=2048,
                   shared_ffn=2048, first_dense_layers=3, q_lora_rank=1536, kv_lora_rank=512, qk_nope_dim=128,
                   qk_rope_dim=64, v_head_dim=128)


def plan_for(arch_name, sizes, source, target, **options):
    arch = spec.load_arch(arch_name)
    params = spec.ModelParams(**sizes)
    metas = spec.expected_metas(arch, source, params, "bf16")
    return arch, params, metas, spec.build_plan(metas, source, target, arch, params, **options)


def shapes(plan) -> dict[str, tuple]:
    return {meta.name: meta.shape for meta in plan.targets}


def mindformers_reference_shapes(config: ModelConfig, qkv_concat: bool) -> dict[str, tuple]:
    ms_model = pytest.importorskip("workbench.reference.ms_model", reason="parameter_shapes lives beside MindSpore")
    return ms_model.parameter_shapes(config, qkv_concat)


# ----------------------------------------------------------------------------- full-size plans

@pytest.mark.parametrize("sizes, config", [
    (LLAMA2_7B, ModelConfig(num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=32,
                            ffn_hidden_size=11008, vocab_size=32000)),
    (LLAMA3_70B, ModelConfig(num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                             ffn_hidden_size=28672, vocab_size=128256)),
], ids=["llama2-7b", "llama3-70b"])
@pytest.mark.parametrize("target, qkv_concat", [("mindformers", False), ("mindformers_qkv_concat", True)])
def test_llama_plans_equal_the_mindformers_reference_layout(sizes, config, target, qkv_concat):
    _, _, metas, plan = plan_for("llama", sizes, "megatron", target)
    assert shapes(plan) == mindformers_reference_shapes(config, qkv_concat)
    assert sum(m.nbytes for m in plan.targets) == sum(m.nbytes for m in metas.values())


@pytest.mark.parametrize("target, qkv_concat", [("mindformers", False), ("mindformers_qkv_concat", True)])
def test_mixtral_plan_equals_the_mindformers_reference_layout(target, qkv_concat):
    config = ModelConfig(num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                         ffn_hidden_size=14336, vocab_size=32000, num_experts=8)
    _, _, _, plan = plan_for("mixtral", MIXTRAL_8X7B, "hf", target)
    assert shapes(plan) == mindformers_reference_shapes(config, qkv_concat)


def test_mixtral_megatron_grouped_and_mcore_expert_shapes():
    _, _, _, grouped = plan_for("mixtral", MIXTRAL_8X7B, "hf", "megatron_grouped")
    got = shapes(grouped)
    assert got["decoder.layers.0.mlp.experts.weight1"] == (4096, 8 * 2 * 14336)
    assert got["decoder.layers.0.mlp.experts.weight2"] == (8 * 14336, 4096)
    _, _, _, mcore = plan_for("mixtral", MIXTRAL_8X7B, "hf", "mindformers_mcore")
    got = shapes(mcore)
    assert got["decoder.layers.31.mlp.experts.weight1"] == (8 * 4096, 2 * 14336)
    assert got["decoder.layers.31.mlp.experts.weight2"] == (8 * 14336, 4096)
    assert got["decoder.layers.31.mlp.router.weight"] == (8, 4096)
    assert len(mcore.steps) == 2 + 32 * 7 + 1


def test_qwen3_32b_mcore_plan_has_the_documented_shapes():
    _, _, _, plan = plan_for("qwen3", QWEN3_32B, "hf", "mindformers_mcore")
    got = shapes(plan)
    assert len(got) == 3 + 64 * 8
    assert got["embedding.word_embeddings.weight"] == (151936, 5120)
    layer = "decoder.layers.63."
    assert got[layer + "self_attention.linear_qkv.weight"] == ((64 + 2 * 8) * 128, 5120)
    assert got[layer + "self_attention.linear_proj.weight"] == (5120, 64 * 128)
    assert got[layer + "self_attention.q_layernorm.weight"] == (128,)
    assert got[layer + "mlp.linear_fc1.weight"] == (2 * 25600, 5120)
    assert got[layer + "mlp.linear_fc2.weight"] == (5120, 25600)


def test_deepseek_v3_plan_from_shapes_alone():
    arch, params, metas, plan = plan_for("deepseek_v3", DEEPSEEK_V3, "hf", "mindformers_mcore")
    assert len(metas) == 3 + 61 * 9 + 3 * 3 + 58 * (2 + 256 * 3 + 3)
    got = shapes(plan)
    assert len(got) == 3 + 61 * 9 + 3 * 2 + 58 * (2 + 2 + 2)
    dense, moe = "decoder.layers.2.", "decoder.layers.3."
    assert got[dense + "mlp.linear_fc1.weight"] == (2 * 18432, 7168)
    assert got[moe + "mlp.experts.weight1"] == (256 * 7168, 2 * 2048)
    assert got[moe + "mlp.experts.weight2"] == (256 * 2048, 7168)
    assert got[moe + "mlp.router.expert_bias"] == (256,)
    assert got[moe + "mlp.shared_experts.linear_fc1.weight"] == (2 * 2048, 7168)
    assert got[moe + "self_attention.linear_q_up_proj.weight"] == (128 * 192, 1536)
    assert got[moe + "self_attention.linear_kv_down_proj.weight"] == (512 + 64, 7168)
    assert got[moe + "self_attention.linear_kv_up_proj.weight"] == (128 * 256, 512)
    assert got[moe + "self_attention.linear_proj.weight"] == (7168, 128 * 128)
    step = next(s for s in plan.steps if s.target.name == moe + "mlp.experts.weight1")
    assert len(step.sources) == 512 and step.sources[:2] == ("model.layers.3.mlp.experts.0.gate_proj.weight",
                                                              "model.layers.3.mlp.experts.0.up_proj.weight")
    assert spec.infer_params(metas, "hf", arch, {"num_heads": 128}) == params


# ----------------------------------------------------------------------------- parameter inference

def test_infer_llama3_70b_needs_num_heads_and_says_which_key():
    arch = spec.load_arch("llama")
    metas = spec.expected_metas(arch, "hf", spec.ModelParams(**LLAMA3_70B))
    with pytest.raises(InputError) as caught:
        spec.infer_params(metas, "hf", arch, {})
    message = str(caught.value)
    assert "cannot tell num_heads, num_kv_heads, head_dim" in message and "num_attention_heads" in message
    assert spec.infer_params(metas, "hf", arch, {"num_heads": 64}) == spec.ModelParams(**LLAMA3_70B)
    assert spec.infer_params(metas, "hf", arch, {"head_dim": 128}) == spec.ModelParams(**LLAMA3_70B)


def test_infer_from_fused_megatron_qkv_and_from_qwen3_q_norm():
    arch = spec.load_arch("llama")
    metas = spec.expected_metas(arch, "megatron", spec.ModelParams(**LLAMA3_70B))
    assert spec.infer_params(metas, "megatron", arch, {"num_heads": 64}).num_kv_heads == 8
    qwen3 = spec.load_arch("qwen3")
    metas = spec.expected_metas(qwen3, "mindformers_qkv_concat", spec.ModelParams(**QWEN3_32B))
    assert spec.infer_params(metas, "mindformers_qkv_concat", qwen3, {}) == spec.ModelParams(**QWEN3_32B)


def test_infer_counts_experts_and_checks_given_values():
    arch = spec.load_arch("mixtral")
    metas = spec.expected_metas(arch, "hf", spec.ModelParams(**MIXTRAL_8X7B))
    assert spec.infer_params(metas, "hf", arch, {"num_heads": 32}) == spec.ModelParams(**MIXTRAL_8X7B)
    with pytest.raises(InputError, match=r"^model.layers.0.self_attn.q_proj.weight: .* = num_heads\*head_dim "
                                         r"has no whole head_dim with num_heads=48 \(given\)"):
        spec.infer_params(metas, "hf", arch, {"num_heads": 48})
    with pytest.raises(InputError, match="unknown parameter"):
        spec.infer_params(metas, "hf", arch, {"heads": 32})


# ----------------------------------------------------------------------------- detection

def test_detect_arch_and_format_from_hf_names():
    for arch_name, sizes in [("llama", LLAMA2_7B), ("qwen3", QWEN3_32B), ("mixtral", MIXTRAL_8X7B)]:
        arch = spec.load_arch(arch_name)
        names = list(spec.expected_metas(arch, "hf", spec.ModelParams(**sizes)))
        assert spec.detect_arch(names) == arch_name
        assert spec.detect_format(names, arch) == "hf"


def test_names_that_fit_several_formats_are_an_error_listing_them():
    arch = spec.load_arch("llama")
    names = list(spec.expected_metas(arch, "megatron", spec.ModelParams(**LLAMA2_7B)))
    with pytest.raises(InputError, match="megatron, mindformers_mcore, mindformers_mcore_contiguous"):
        spec.detect_format(names, arch)
    assert spec.detect_format(names, arch, candidates=["megatron", "hf"]) == "megatron"
    assert spec.formats_for(arch, "megatron") == ["megatron"]
    assert spec.formats_for(spec.load_arch("mixtral"), "megatron") == ["megatron", "megatron_te_grouped",
                                                                       "megatron_grouped"]
    assert spec.detect_format(names, arch, candidates=spec.formats_for(arch, "megatron")) == "megatron"


def test_shapes_break_ties_that_names_cannot():
    arch = spec.load_arch("mixtral")
    params = spec.ModelParams(**{**MIXTRAL_8X7B, "num_layers": 2})
    for fmt in ("mindformers", "mindformers_gmm", "megatron_grouped", "mindformers_mcore"):
        metas = spec.expected_metas(arch, fmt, params)
        assert spec.detect_format(metas, arch) == fmt


# ----------------------------------------------------------------------------- errors name tensor and rule

def small_llama():
    arch = spec.load_arch("llama")
    params = spec.ModelParams(num_layers=2, hidden=64, vocab=128, num_heads=4, num_kv_heads=2, head_dim=16, ffn=176)
    return arch, params, spec.expected_metas(arch, "megatron", params)


def test_unmapped_source_tensors_are_named_or_listed():
    arch, params, metas = small_llama()
    metas["decoder.layers.0.self_attention.linear_qkv.lora_a.weight"] = metas["decoder.final_layernorm.weight"]
    with pytest.raises(InputError, match=r"^decoder.layers.0.self_attention.linear_qkv.lora_a.weight: 1 source "
                                         r"tensor\(s\) match no rule of llama/megatron"):
        spec.build_plan(metas, "megatron", "hf", arch, params)
    plan = spec.build_plan(metas, "megatron", "hf", arch, params, allow_unmapped=True)
    assert plan.unmapped == ["decoder.layers.0.self_attention.linear_qkv.lora_a.weight"]


def test_layers_beyond_num_layers_are_unmapped():
    arch, params, metas = small_llama()
    plan = spec.build_plan(metas, "megatron", "hf", arch, params.with_values(num_layers=1), allow_unmapped=True)
    assert all(name.startswith("decoder.layers.1.") for name in plan.unmapped) and len(plan.unmapped) == 6


def test_missing_tensors_name_the_tensor_and_the_rule():
    arch, params, metas = small_llama()
    del metas["decoder.layers.1.mlp.linear_fc1.weight"]
    with pytest.raises(InputError) as caught:
        spec.build_plan(metas, "megatron", "hf", arch, params)
    message = str(caught.value)
    assert message.startswith("decoder.layers.1.mlp.linear_fc1.weight: 1 tensor(s) of llama/megatron are missing")
    assert re.search(r"rule 'layers.\{i\}.mlp.\[gate,up\]' .* at .*llama.yaml:\d+ \[formats.megatron", message)


def test_shape_disagreements_name_the_tensor_and_the_rule():
    arch, params, metas = small_llama()
    name = "decoder.layers.0.self_attention.linear_qkv.weight"
    metas[name] = spec.plan.TensorMeta(name, (130, 64), "fp32")
    with pytest.raises(InputError) as caught:
        spec.build_plan(metas, "megatron", "hf", arch, params)
    message = str(caught.value)
    assert message.startswith(f"{name}: shape [130, 64] but rule 'layers.{{i}}.attn.[q,k,v]'")
    assert "expects [128, 64]" in message and "llama.yaml:" in message and "num_kv_heads=2" in message


def test_te_fused_norm_names_and_extra_state():
    arch, params, metas = small_llama()
    for i in range(2):
        meta = metas.pop(f"decoder.layers.{i}.input_layernorm.weight")
        te = f"decoder.layers.{i}.self_attention.linear_qkv.layer_norm_weight"
        metas[te] = spec.plan.TensorMeta(te, meta.shape, meta.dtype)
        extra = f"decoder.layers.{i}.self_attention.linear_qkv._extra_state"
        metas[extra] = spec.plan.TensorMeta(extra, (0,), "uint8")
    plan = spec.build_plan(metas, "megatron", "hf", arch, params)
    step = next(s for s in plan.steps if s.target.name == "model.layers.1.input_layernorm.weight")
    assert step.sources == ("decoder.layers.1.self_attention.linear_qkv.layer_norm_weight",)
    assert len(plan.unused) == 2 and plan.unmapped == []
    metas["decoder.layers.0.input_layernorm.weight"] = metas["decoder.final_layernorm.weight"]
    with pytest.raises(InputError, match="holds the same tensor as"):
        spec.build_plan(metas, "megatron", "hf", arch, params)


def test_unknown_target_format_lists_the_formats():
    arch, params, metas = small_llama()
    with pytest.raises(InputError, match="has no format 'mindspore'.*use one of hf, meta, megatron"):
        spec.build_plan(metas, "megatron", "mindspore", arch, params)


# ----------------------------------------------------------------------------- parameters from configs

def test_params_from_hf_config_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
                                "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                                "vocab_size": 32000, "num_local_experts": 8}))
    params = spec.params_from_config(path)
    assert params == {"num_layers": 32, "hidden": 4096, "num_heads": 32, "num_kv_heads": 8, "ffn": 14336,
                      "vocab": 32000, "num_experts": 8, "moe_ffn": 14336, "head_dim": 128}
    arch = spec.load_arch("mixtral")
    metas = spec.expected_metas(arch, "hf", spec.ModelParams(**MIXTRAL_8X7B))
    assert spec.infer_params(metas, "hf", arch, params) == spec.ModelParams(**MIXTRAL_8X7B)
    assert spec.params_from_config(tmp_path) == params                   # a model folder works too


def test_params_from_deepseek_hf_config():
    config = {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
              "num_key_value_heads": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
              "n_routed_experts": 256, "n_shared_experts": 1, "first_k_dense_replace": 3, "q_lora_rank": 1536,
              "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
              "vocab_size": 129280}
    params = spec.hf_params(config)
    assert {k: params[k] for k in DEEPSEEK_V3} == DEEPSEEK_V3


def test_params_from_megatron_and_mindformers_configs():
    from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS

    expected = {"num_layers": 2, "hidden": 64, "num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "ffn": 176,
                "vocab": 128}
    assert spec.params_from_config(EXAMPLE_MEGATRON) == expected
    assert spec.params_from_config(EXAMPLE_MINDFORMERS) == expected


def test_params_from_shared_fixture_configs():
    from workbench_testing import fixtures_dir

    folder = fixtures_dir("configs")
    mixtral = spec.params_from_config(folder / "mindformers" / "legacy_moe_mixtral_pretrain_mixtral-8x7b.yaml")
    assert {k: mixtral[k] for k in MIXTRAL_8X7B} == MIXTRAL_8X7B
    qwen3 = spec.params_from_config(folder / "mindformers" / "mcore_qwen3_pretrain_qwen3_32b_4k.yaml")
    assert qwen3 == QWEN3_32B
    llama = spec.params_from_config(folder / "megatron" / "mindspeed_llm_v2.2.0__pretrain_llama2_7b_ptd.sh")
    assert llama == {k: v for k, v in LLAMA2_7B.items() if k != "vocab"}


def test_resolution_reports_unmatched_names_and_unused_rules():
    qwen2 = spec.load_arch("qwen2")
    names = list(spec.expected_metas(spec.load_arch("llama"), "hf", spec.ModelParams(**LLAMA2_7B))) + ["extra.weight"]
    resolution = spec.resolve_names(names, qwen2, "hf")
    assert resolution.unmatched == ["extra.weight"]
    assert [rule.key for rule in resolution.unused_rules] == ["layers.{i}.attn.q_bias", "layers.{i}.attn.k_bias",
                                                              "layers.{i}.attn.v_bias"]
    assert resolution.matches["model.layers.7.mlp.up_proj.weight"].indices == {"i": 7}
    assert resolution.summary() == (f"{len(names) - 1} matched, 1 unmatched (e.g. extra.weight), 3 rules unused "
                                    "(e.g. model.layers.{i}.self_attn.q_proj.bias, model.layers.{i}.self_attn.k_proj.bias, "
                                    "model.layers.{i}.self_attn.v_proj.bias)")
    absent = spec.missing(resolution, qwen2, spec.ModelParams(**{**LLAMA2_7B, "num_layers": 2}))
    assert [name for _, name in absent] == [f"model.layers.{i}.self_attn.{p}_proj.bias" for p in "qkv"
                                            for i in range(2)]
