"""Megatron legacy checkpoints (TP/PP shards) and HF safetensors folders of the reference model."""
from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from checkpoint_merge import merge_megatron_legacy  # noqa: E402

from workbench.errors import InputError  # noqa: E402
from workbench.reference.config import ModelConfig  # noqa: E402
from workbench.reference.hf_io import save_hf_safetensors  # noqa: E402
from workbench.reference.layouts import fuse_gate_up, fuse_grouped_qkv  # noqa: E402
from workbench.reference.megatron_io import (  # noqa: E402
    load_megatron_legacy_shards, save_megatron_legacy)

CONFIGS = {
    "dense_gqa": ModelConfig(num_layers=4),
    "qkv_bias": ModelConfig(num_layers=4, qkv_bias=True),
    "qk_norm": ModelConfig(num_layers=4, qk_norm=True),
    "moe": ModelConfig(num_layers=4, num_experts=4, moe_ffn_hidden_size=32, shared_expert_size=48),
}
LAYOUTS = [(2, 1), (1, 2), (2, 2)]


# ----------------------------------------------------------------------------- reference weights

def make_weights(model: ModelConfig, seed: int = 0):
    """(Megatron state dict, parts) with random weights; parts keeps q/k/v/gate/up per layer."""
    gen = torch.Generator().manual_seed(seed)
    h, d, nh, ng = model.hidden_size, model.head_dim, model.num_attention_heads, model.num_kv_heads

    def rand(*shape):
        return torch.randn(*shape, generator=gen)

    state = {"embedding.word_embeddings.weight": rand(model.vocab_size, h)}
    parts = {}
    for i in range(model.num_layers):
        p = f"decoder.layers.{i}."
        q, k, v = rand(nh * d, h), rand(ng * d, h), rand(ng * d, h)
        layer = {"q": q, "k": k, "v": v}
        state[p + "input_layernorm.weight"] = rand(h)
        state[p + "self_attention.linear_qkv.weight"] = fuse_grouped_qkv(q, k, v, nh, ng)
        if model.qkv_bias:
            layer.update(qb=rand(nh * d), kb=rand(ng * d), vb=rand(ng * d))
            bias = fuse_grouped_qkv(layer["qb"], layer["kb"], layer["vb"], nh, ng)
            state[p + "self_attention.linear_qkv.bias"] = bias
        if model.qk_norm:
            state[p + "self_attention.q_layernorm.weight"] = rand(d)
            state[p + "self_attention.k_layernorm.weight"] = rand(d)
        state[p + "self_attention.linear_proj.weight"] = rand(h, nh * d)
        state[p + "pre_mlp_layernorm.weight"] = rand(h)
        if model.num_experts:
            state[p + "mlp.router.weight"] = rand(model.num_experts, h)
            for e in range(model.num_experts):
                f = model.expert_ffn_size
                layer[f"gate{e}"], layer[f"up{e}"] = rand(f, h), rand(f, h)
                fc1 = fuse_gate_up(layer[f"gate{e}"], layer[f"up{e}"])
                state[p + f"mlp.experts.local_experts.{e}.linear_fc1.weight"] = fc1
                state[p + f"mlp.experts.local_experts.{e}.linear_fc2.weight"] = rand(h, f)
            if model.shared_expert_size:
                s = model.shared_expert_size
                state[p + "mlp.shared_experts.linear_fc1.weight"] = rand(2 * s, h)
                state[p + "mlp.shared_experts.linear_fc2.weight"] = rand(h, s)
        else:
            layer["gate"], layer["up"] = rand(model.ffn_hidden_size, h), rand(model.ffn_hidden_size, h)
            state[p + "mlp.linear_fc1.weight"] = fuse_gate_up(layer["gate"], layer["up"])
            state[p + "mlp.linear_fc2.weight"] = rand(h, model.ffn_hidden_size)
        parts[i] = layer
    state["decoder.final_layernorm.weight"] = rand(h)
    state["output_layer.weight"] = rand(model.vocab_size, h)
    return state, parts


def assert_same(actual: dict, expected: dict):
    assert sorted(actual) == sorted(expected)
    for name in expected:
        assert torch.equal(actual[name], expected[name]), name


# ----------------------------------------------------------------------------- Megatron legacy

@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda t: f"tp{t[0]}pp{t[1]}")
@pytest.mark.parametrize("config_name", sorted(CONFIGS))
def test_save_then_merge_is_exact(tmp_path, config_name, layout):
    model = CONFIGS[config_name]
    state, _ = make_weights(model)
    save_megatron_legacy(state, model, tmp_path, iteration=5, tensor_parallel=layout[0], pipeline_parallel=layout[1])
    assert_same(merge_megatron_legacy(tmp_path, model), state)
    shards = load_megatron_legacy_shards(tmp_path)
    assert sorted(shards) == [(tp, pp) for tp in range(layout[0]) for pp in range(layout[1])]
    assert all(s["iteration"] == 5 and s["checkpoint_version"] == 3.0 for s in shards.values())


def test_files_sit_at_the_legacy_paths(tmp_path):
    model = CONFIGS["dense_gqa"]
    state, _ = make_weights(model)
    written = save_megatron_legacy(state, model, tmp_path / "pp", iteration=10, tensor_parallel=2, pipeline_parallel=2)
    names = ["mp_rank_00_000", "mp_rank_01_000", "mp_rank_00_001", "mp_rank_01_001"]
    assert written == [tmp_path / "pp" / "iter_0000010" / n / "model_optim_rng.pt" for n in names]
    assert (tmp_path / "pp" / "latest_checkpointed_iteration.txt").read_text() == "10"
    written = save_megatron_legacy(state, model, tmp_path / "tp", iteration=3, tensor_parallel=2)
    assert written == [tmp_path / "tp" / "iter_0000003" / f"mp_rank_0{r}" / "model_optim_rng.pt" for r in (0, 1)]
    assert sorted(p.name for p in (tmp_path / "tp" / "iter_0000003").iterdir()) == ["mp_rank_00", "mp_rank_01"]


def test_files_load_weights_only_with_namespace_allow_listed(tmp_path):
    model = CONFIGS["dense_gqa"]
    state, _ = make_weights(model)
    path = save_megatron_legacy(state, model, tmp_path)[0]
    with pytest.raises(pickle.UnpicklingError, match="Namespace"):   # not on torch's default allow-list
        torch.load(path, map_location="cpu", weights_only=True)
    with torch.serialization.safe_globals([argparse.Namespace]):
        payload = torch.load(path, map_location="cpu", weights_only=True)
    assert isinstance(payload["args"], argparse.Namespace)
    assert_same(payload["model"], state)


def test_fc1_shards_are_each_ranks_own_gate_and_up(tmp_path):
    for name in ("dense_gqa", "moe"):
        model = CONFIGS[name]
        state, parts = make_weights(model)
        save_megatron_legacy(state, model, tmp_path / name, tensor_parallel=2)
        shards = load_megatron_legacy_shards(tmp_path / name)
        for rank in (0, 1):
            shard = shards[(rank, 0)]["model"]
            for i, layer in parts.items():
                pairs = ([("mlp.linear_fc1.weight", layer["gate"], layer["up"])] if not model.num_experts else
                         [(f"mlp.experts.local_experts.{e}.linear_fc1.weight", layer[f"gate{e}"], layer[f"up{e}"])
                          for e in range(model.num_experts)])
                for key, gate, up in pairs:
                    half = gate.shape[0] // 2
                    expected = torch.cat([gate[rank * half:(rank + 1) * half], up[rank * half:(rank + 1) * half]])
                    assert torch.equal(shard[f"decoder.layers.{i}.{key}"], expected)
        if model.shared_expert_size:
            fc1 = state["decoder.layers.0.mlp.shared_experts.linear_fc1.weight"]
            s = model.shared_expert_size
            got = shards[(1, 0)]["model"]["decoder.layers.0.mlp.shared_experts.linear_fc1.weight"]
            assert torch.equal(got, torch.cat([fc1[s // 2:s], fc1[s + s // 2:]]))


def test_qkv_shards_hold_whole_query_groups(tmp_path):
    model = ModelConfig(num_layers=2, hidden_size=64, num_attention_heads=8, num_kv_heads=4, qkv_bias=True)
    state, parts = make_weights(model)
    save_megatron_legacy(state, model, tmp_path, tensor_parallel=2)
    shards = load_megatron_legacy_shards(tmp_path)
    d, q_per_rank, kv_per_rank = model.head_dim, 4 * model.head_dim, 2 * model.head_dim
    for rank in (0, 1):
        for i, layer in parts.items():
            local = {key: layer[key][rank * (q_per_rank if key.startswith("q") else kv_per_rank):]
                     [:q_per_rank if key.startswith("q") else kv_per_rank] for key in ("q", "k", "v", "qb", "kb", "vb")}
            model_shard = shards[(rank, 0)]["model"]
            weight = model_shard[f"decoder.layers.{i}.self_attention.linear_qkv.weight"]
            bias = model_shard[f"decoder.layers.{i}.self_attention.linear_qkv.bias"]
            assert weight.shape[0] == 2 * (2 + 2) * d       # 2 local groups x (2 q heads + k + v)
            assert torch.equal(weight, fuse_grouped_qkv(local["q"], local["k"], local["v"], 4, 2))
            assert torch.equal(bias, fuse_grouped_qkv(local["qb"], local["kb"], local["vb"], 4, 2))
            proj = state[f"decoder.layers.{i}.self_attention.linear_proj.weight"]
            assert torch.equal(model_shard[f"decoder.layers.{i}.self_attention.linear_proj.weight"],
                               proj[:, rank * q_per_rank:(rank + 1) * q_per_rank])


def test_layer_numbering_restarts_per_stage(tmp_path):
    model = CONFIGS["moe"]
    state, _ = make_weights(model)
    save_megatron_legacy(state, model, tmp_path, tensor_parallel=1, pipeline_parallel=2)
    shards = load_megatron_legacy_shards(tmp_path)
    first, last = shards[(0, 0)]["model"], shards[(0, 1)]["model"]
    for stage in (first, last):
        layers = {int(name.split(".")[2]) for name in stage if name.startswith("decoder.layers.")}
        assert layers == {0, 1}
    assert "embedding.word_embeddings.weight" in first and "embedding.word_embeddings.weight" not in last
    for name in ("decoder.final_layernorm.weight", "output_layer.weight"):
        assert name in last and name not in first
    assert torch.equal(last["decoder.layers.1.mlp.router.weight"], state["decoder.layers.3.mlp.router.weight"])


def test_router_norms_and_embedding_split(tmp_path):
    model = CONFIGS["moe"]
    state, _ = make_weights(model)
    save_megatron_legacy(state, model, tmp_path, tensor_parallel=2)
    shards = load_megatron_legacy_shards(tmp_path)
    for rank in (0, 1):
        shard = shards[(rank, 0)]["model"]
        for name in ("decoder.layers.1.mlp.router.weight", "decoder.layers.1.input_layernorm.weight"):
            assert torch.equal(shard[name], state[name])      # replicated
        for name in ("embedding.word_embeddings.weight", "output_layer.weight"):
            assert torch.equal(shard[name], state[name][rank * 64:(rank + 1) * 64])
        fc2 = state["decoder.layers.1.mlp.experts.local_experts.2.linear_fc2.weight"]
        assert torch.equal(shard["decoder.layers.1.mlp.experts.local_experts.2.linear_fc2.weight"],
                           fc2[:, rank * 16:(rank + 1) * 16])


def test_args_namespace_describes_model_and_layout(tmp_path):
    model = CONFIGS["moe"]
    state, _ = make_weights(model)
    save_megatron_legacy(state, model, tmp_path, iteration=7, tensor_parallel=2, pipeline_parallel=2,
                         optimizer_state={"step": 7})
    payload = load_megatron_legacy_shards(tmp_path)[(1, 1)]
    args = payload["args"]
    expected = dict(num_layers=4, hidden_size=64, num_attention_heads=4, num_query_groups=2,
                    group_query_attention=True, ffn_hidden_size=176, kv_channels=16, padded_vocab_size=128,
                    tensor_model_parallel_size=2, pipeline_model_parallel_size=2, swiglu=True,
                    normalization="RMSNorm", position_embedding_type="rope",
                    untie_embeddings_and_output_weights=True, add_bias_linear=False, add_qkv_bias=False,
                    qk_layernorm=False, num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=32,
                    moe_shared_expert_intermediate_size=48, params_dtype=torch.float32, iteration=7)
    assert {key: getattr(args, key) for key in expected} == expected
    assert payload["optimizer"] == {"step": 7}


def test_caller_args_keep_their_values_but_match_the_layout(tmp_path):
    model = CONFIGS["dense_gqa"]
    state, _ = make_weights(model)
    mine = argparse.Namespace(num_layers=4, lr=3e-4, tensor_model_parallel_size=8)
    save_megatron_legacy(state, model, tmp_path, tensor_parallel=2, args=mine)
    args = load_megatron_legacy_shards(tmp_path)[(0, 0)]["args"]
    assert (args.lr, args.tensor_model_parallel_size, mine.tensor_model_parallel_size) == (3e-4, 2, 8)


@pytest.mark.parametrize("tp,pp,words", [(4, 1, "num_query_groups"), (1, 3, "num_layers")])
def test_impossible_layouts_are_refused(tmp_path, tp, pp, words):
    model = CONFIGS["dense_gqa"]
    state, _ = make_weights(model)
    with pytest.raises(InputError, match=words):
        save_megatron_legacy(state, model, tmp_path, tensor_parallel=tp, pipeline_parallel=pp)


def test_missing_tracker_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="latest_checkpointed_iteration"):
        load_megatron_legacy_shards(tmp_path)


# ----------------------------------------------------------------------------- Hugging Face

def expected_hf_names(model: ModelConfig) -> set[str]:
    names = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    for i in range(model.num_layers):
        p = f"model.layers.{i}."
        names |= {p + "input_layernorm.weight", p + "post_attention_layernorm.weight"}
        names |= {p + f"self_attn.{x}_proj.weight" for x in "qkvo"}
        if model.qkv_bias:
            names |= {p + f"self_attn.{x}_proj.bias" for x in "qkv"}
        if model.qk_norm:
            names |= {p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"}
        if model.num_experts:
            names.add(p + "block_sparse_moe.gate.weight")
            names |= {p + f"block_sparse_moe.experts.{e}.{w}.weight"
                      for e in range(model.num_experts) for w in ("w1", "w2", "w3")}
        else:
            names |= {p + f"mlp.{x}_proj.weight" for x in ("gate", "up", "down")}
    return names


def load_hf_folder(folder: Path) -> dict:
    index = folder / "model.safetensors.index.json"
    if not index.exists():
        return safetensors_torch.load_file(folder / "model.safetensors")
    weight_map = json.loads(index.read_text())["weight_map"]
    tensors = {}
    for file_name in sorted(set(weight_map.values())):
        loaded = safetensors_torch.load_file(folder / file_name)
        assert {n for n, f in weight_map.items() if f == file_name} == set(loaded)
        tensors.update(loaded)
    return tensors


HF_CASES = {"llama": CONFIGS["dense_gqa"], "qwen2": CONFIGS["qkv_bias"], "qwen3": CONFIGS["qk_norm"],
            "mixtral": ModelConfig(num_layers=2, num_experts=4, moe_ffn_hidden_size=32)}


@pytest.mark.parametrize("shard_bytes", [None, 40_000], ids=["single", "sharded"])
@pytest.mark.parametrize("family", sorted(HF_CASES))
def test_hf_folder_names_and_values(tmp_path, family, shard_bytes):
    model = HF_CASES[family]
    state, parts = make_weights(model)
    written = save_hf_safetensors(state, model, tmp_path, shard_bytes=shard_bytes)
    assert all(path.exists() for path in written)
    tensors = load_hf_folder(tmp_path)
    assert set(tensors) == expected_hf_names(model)
    if shard_bytes:
        index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
        assert len(set(index["weight_map"].values())) > 1
        assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in tensors.values())
    for i, layer in parts.items():
        p = f"model.layers.{i}."
        for x in "qkv":
            assert torch.equal(tensors[p + f"self_attn.{x}_proj.weight"], layer[x])
            if model.qkv_bias:
                assert torch.equal(tensors[p + f"self_attn.{x}_proj.bias"], layer[x + "b"])
        if model.num_experts:
            assert torch.equal(tensors[p + "block_sparse_moe.experts.3.w1.weight"], layer["gate3"])
            assert torch.equal(tensors[p + "block_sparse_moe.experts.3.w3.weight"], layer["up3"])
        else:
            assert torch.equal(tensors[p + "mlp.gate_proj.weight"], layer["gate"])
            assert torch.equal(tensors[p + "mlp.up_proj.weight"], layer["up"])
            assert torch.equal(tensors[p + "mlp.down_proj.weight"], state[f"decoder.layers.{i}.mlp.linear_fc2.weight"])
    assert torch.equal(tensors["model.layers.1.post_attention_layernorm.weight"],
                       state["decoder.layers.1.pre_mlp_layernorm.weight"])
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == family and config["tie_word_embeddings"] is False
    shape = (config["num_key_value_heads"], config["num_hidden_layers"], config["vocab_size"])
    assert shape == (2, model.num_layers, 128)


def test_hf_refuses_shared_experts(tmp_path):
    model = CONFIGS["moe"]
    state, _ = make_weights(model)
    with pytest.raises(InputError, match="shared expert"):
        save_hf_safetensors(state, model, tmp_path)


def test_transformers_loads_the_llama_folder(tmp_path):
    transformers = pytest.importorskip("transformers")
    model = CONFIGS["dense_gqa"]
    state, _ = make_weights(model)
    save_hf_safetensors(state, model, tmp_path, shard_bytes=40_000)
    loaded, info = transformers.LlamaForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert torch.equal(loaded.state_dict()["model.layers.0.mlp.up_proj.weight"],
                       state["decoder.layers.0.mlp.linear_fc1.weight"][model.ffn_hidden_size:])
