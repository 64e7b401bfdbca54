"""Every spec round-trips one-to-one: for every arch and every ordered pair of formats, random tensors
of the right shapes go A -> B -> A bit for bit (bf16 as raw bits, NaN patterns included)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from workbench import spec
from workbench.errors import InputError
from workbench.tensors.base import bf16_bits_to_fp32, fp32_to_bf16_bits

SIZES = dict(num_layers=3, hidden=16, vocab=40, num_heads=4, num_kv_heads=2, head_dim=6, ffn=20, num_experts=3,
             moe_ffn=10, shared_ffn=12, first_dense_layers=1, q_lora_rank=8, kv_lora_rank=6, qk_nope_dim=4,
             qk_rope_dim=2, v_head_dim=4)
PAIRS = [(arch, a, b) for arch in spec.available_archs()
         for a, b in itertools.permutations(spec.load_arch(arch).formats, 2)]


def params_for(arch: spec.ArchSpec) -> spec.ModelParams:
    return spec.ModelParams(**{name: SIZES[name] for name in arch.params})


def random_checkpoint(arch, fmt, params, dtype="bf16", seed=0):
    rng = np.random.default_rng(seed)
    metas = spec.expected_metas(arch, fmt, params, dtype)
    if dtype == "bf16":
        data = {n: rng.integers(0, 2 ** 16, size=m.shape, dtype=np.uint16) for n, m in metas.items()}
    else:
        data = {n: rng.normal(size=m.shape).astype(np.float32) for n, m in metas.items()}
    return metas, data


def convert(metas, data, source, target, arch, params, **options):
    plan = spec.build_plan(metas, source, target, arch, params, **options)
    read_log = []

    def read(name):
        read_log.append(name)
        return data[name]

    out = {}
    for step in plan.steps:
        before = len(read_log)
        out[step.target.name] = spec.materialize(step, read)
        assert read_log[before:] == list(step.sources)          # reads only (and each of) its sources
    return plan, out


@pytest.mark.parametrize("arch_name, source, target", PAIRS, ids=[f"{a}:{s}->{t}" for a, s, t in PAIRS])
def test_round_trip_is_bit_exact(arch_name, source, target):
    arch = spec.load_arch(arch_name)
    params = params_for(arch)
    metas, data = random_checkpoint(arch, source, params)
    plan, out = convert(metas, data, source, target, arch, params)
    assert [m.name for m in plan.targets] == list(out)
    assert {m.name: m.shape for m in plan.targets} == {n: a.shape for n, a in out.items()}
    assert set(out) == set(spec.expected_metas(arch, target, params))
    back_plan, back = convert({m.name: m for m in plan.targets}, out, target, source, arch, params)
    assert set(back) == set(data)
    for name, array in data.items():
        assert back[name].dtype == np.uint16 and np.array_equal(back[name], array), name


def test_plan_order_is_embedding_layers_final_norm_head():
    arch = spec.load_arch("deepseek_v3")
    params = params_for(arch)
    metas, _ = random_checkpoint(arch, "hf", params)
    names = [m.name for m in spec.build_plan(metas, "hf", "megatron", arch, params).targets]
    assert names[0] == "embedding.word_embeddings.weight"
    assert names[-2:] == ["decoder.final_layernorm.weight", "output_layer.weight"]
    layers = [int(n.split(".")[2]) for n in names[1:-2]]
    assert layers == sorted(layers)
    layer1 = [n for n in names if n.startswith("decoder.layers.1.")]
    assert layer1[0].endswith("input_layernorm.weight") and layer1[-1].endswith("shared_experts.linear_fc2.weight")
    experts = [int(n.split(".")[6]) for n in layer1 if ".local_experts." in n and n.endswith("linear_fc1.weight")]
    assert experts == [0, 1, 2]


def test_vocab_padding_and_dtype_cast():
    arch = spec.load_arch("llama")
    params = params_for(arch)
    metas, data = random_checkpoint(arch, "hf", params, dtype="fp32")
    plan, out = convert(metas, data, "hf", "megatron", arch, params, target_dtype="bf16", pad_vocab_to=48)
    embed = out["embedding.word_embeddings.weight"]
    assert embed.shape == (48, 16) and embed.dtype == np.uint16 and plan.target_params.vocab == 48
    assert not embed[40:].any()                                               # padded rows are (+0.0) zeros
    assert np.array_equal(embed[:40], fp32_to_bf16_bits(data["model.embed_tokens.weight"]))
    assert all(m.dtype == "bf16" for m in plan.targets)
    back_plan, back = convert({m.name: m for m in plan.targets}, out, "megatron", "hf", arch, plan.target_params,
                              target_dtype="fp32")                  # padding is never cut back (it could drop rows)
    assert back["lm_head.weight"].shape == (48, 16) and not back["lm_head.weight"][40:].any()
    with pytest.raises(InputError, match="below the checkpoint's vocabulary of 48"):
        spec.build_plan({m.name: m for m in plan.targets}, "megatron", "hf", arch, plan.target_params, pad_vocab_to=40)
    assert np.array_equal(back["model.norm.weight"], bf16_bits_to_fp32(fp32_to_bf16_bits(data["model.norm.weight"])))


def test_mixed_source_dtypes_need_a_target_dtype():
    arch = spec.load_arch("llama")
    params = params_for(arch)
    metas = spec.expected_metas(arch, "hf", params, "bf16")
    name = "model.layers.0.self_attn.k_proj.weight"
    metas[name] = spec.expected_metas(arch, "hf", params, "fp32")[name]
    with pytest.raises(InputError, match="different dtypes"):
        spec.build_plan(metas, "hf", "megatron", arch, params)
    plan = spec.build_plan(metas, "hf", "megatron", arch, params, target_dtype="fp32")
    assert {m.dtype for m in plan.targets} == {"fp32"}
