"""Megatron legacy rank files merged into one global state dict (TP/PP/EP), and the merge rules."""
from __future__ import annotations

import argparse
import importlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from checkpoint_merge import merge_megatron_legacy  # noqa: E402

from workbench.errors import InputError  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig  # noqa: E402
from workbench.reference.megatron_io import save_megatron_legacy  # noqa: E402
from workbench.reference.megatron_parallel import shard_columns, shard_gate_up  # noqa: E402
from workbench.reference.torch_model import build_model  # noqa: E402
from workbench.tensors import megatron_ranks  # noqa: E402
from workbench.tensors.megatron_legacy import MegatronLegacySource, MegatronObject  # noqa: E402
from workbench.tensors.megatron_rules import megatron_parallel_rules  # noqa: E402
from workbench.tensors.torch_io import tensor_to_numpy  # noqa: E402

CONFIGS = {
    "dense_gqa": ModelConfig(num_layers=4),
    "qkv_bias_qk_norm": ModelConfig(num_layers=4, qkv_bias=True, qk_norm=True),
    "moe": ModelConfig(num_layers=4, num_experts=4, moe_ffn_hidden_size=32, shared_expert_size=48),
}


def weights(model: ModelConfig, seed: int = 0, dtype=None) -> dict:
    state = build_model(model, PrecisionConfig(), seed).state_dict()
    return {name: tensor.to(dtype) if dtype else tensor for name, tensor in state.items()}


def same(array: np.ndarray, tensor) -> bool:
    expected = tensor_to_numpy(tensor)
    return array.shape == expected.shape and array.dtype == expected.dtype and \
        np.ascontiguousarray(array).tobytes() == np.ascontiguousarray(expected).tobytes()


def save_rank(root, folder: str, model: dict, args, iteration: int = 1, key: str = "model"):
    path = root / f"iter_{iteration:07d}" / folder / "model_optim_rng.pt"
    path.parent.mkdir(parents=True)
    torch.save({"args": args, "iteration": iteration, key: model}, path)
    (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return path


def megatron_args(**overrides):
    base = dict(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, expert_model_parallel_size=1,
                swiglu=True, num_layers=1)
    return argparse.Namespace(**{**base, **overrides})


# ----------------------------------------------------------------------------- reference round trips

@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("layout", [(2, 2), (2, 1), (1, 2)])
def test_merged_tensors_equal_the_originals(tmp_path, config, layout):
    model = CONFIGS[config]
    state = weights(model, dtype=torch.bfloat16 if config == "moe" else None)
    save_megatron_legacy(state, model, tmp_path, iteration=7, tensor_parallel=layout[0], pipeline_parallel=layout[1])
    source = MegatronLegacySource(tmp_path)
    metas = source.metas()
    assert list(metas) == list(state)
    for name, tensor in state.items():
        assert metas[name].shape == tuple(tensor.shape), name
        assert same(source.read(name), tensor), name
    independent = merge_megatron_legacy(tmp_path, model)
    assert all(same(source.read(name), tensor) for name, tensor in independent.items())
    assert source.iteration == 7 and source.tensor_parallel == layout[0]


def test_iteration_folder_and_metas_without_reading_data(tmp_path, monkeypatch):
    model = CONFIGS["dense_gqa"]
    state = weights(model)
    save_megatron_legacy(state, model, tmp_path, iteration=3, tensor_parallel=2, pipeline_parallel=2)
    calls = []
    monkeypatch.setattr(megatron_ranks, "tensor_to_numpy", lambda t: calls.append(t) or tensor_to_numpy(t))
    source = MegatronLegacySource(tmp_path / "iter_0000003")
    assert len(source.metas()) == len(state) and calls == []              # shapes come from headers only
    qkv = "decoder.layers.3.self_attention.linear_qkv.weight"
    assert same(source.read(qkv), state[qkv]) and len(calls) == 2       # exactly this tensor's two TP shards


# ----------------------------------------------------------------------------- hand-made layouts

def test_non_gated_fc1_is_column_parallel(tmp_path):
    fc1, fc2 = torch.randn(8, 4), torch.randn(4, 8)
    args = megatron_args(tensor_model_parallel_size=2, swiglu=False)
    for rank in range(2):
        save_rank(tmp_path, f"mp_rank_0{rank}", {"decoder.layers.0.mlp.linear_fc1.weight": fc1.chunk(2)[rank].clone(),
                                                 "decoder.layers.0.mlp.linear_fc2.weight":
                                                     fc2.chunk(2, dim=1)[rank].clone()}, args)
    source = MegatronLegacySource(tmp_path)
    assert same(source.read("decoder.layers.0.mlp.linear_fc1.weight"), fc1)
    assert same(source.read("decoder.layers.0.mlp.linear_fc2.weight"), fc2)
    forced = MegatronLegacySource(tmp_path, swiglu=True)                 # wrong flag: regrouped, not equal
    assert not same(forced.read("decoder.layers.0.mlp.linear_fc1.weight"), fc1)


def test_expert_parallel_ranks_are_renumbered(tmp_path):
    """tp 2 x ep 2 with pp 1: folders mp_rank_TT_EEE; local_experts.j -> ep * 2 + j; TEGrouped weightj too."""
    experts = [torch.randn(12, 4) for _ in range(4)]
    downs = [torch.randn(4, 6) for _ in range(4)]
    router = torch.randn(4, 4)
    args = megatron_args(tensor_model_parallel_size=2, expert_model_parallel_size=2)
    for ep in range(2):
        for tp in range(2):
            model = {"decoder.layers.0.mlp.router.weight": router.clone()}
            for j in range(2):
                model[f"decoder.layers.0.mlp.experts.local_experts.{j}.linear_fc1.weight"] = \
                    shard_gate_up(experts[ep * 2 + j], 2)[tp]
                model[f"decoder.layers.0.mlp.experts.linear_fc2.weight{j}"] = shard_columns(downs[ep * 2 + j], 2)[tp]
            save_rank(tmp_path, f"mp_rank_{tp:02d}_{ep:03d}", model, args)
    source = MegatronLegacySource(tmp_path)
    assert len(source.metas()) == 9
    for e in range(4):
        assert same(source.read(f"decoder.layers.0.mlp.experts.local_experts.{e}.linear_fc1.weight"), experts[e])
        assert same(source.read(f"decoder.layers.0.mlp.experts.linear_fc2.weight{e}"), downs[e])
    assert same(source.read("decoder.layers.0.mlp.router.weight"), router)


def test_extra_state_is_skipped_and_megatron_enums_get_stand_ins(tmp_path):
    pkg = tmp_path / "site" / "megatron" / "core"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "enums.py").write_text("import enum\nclass AttnBackend(enum.Enum):\n    auto = 5\n")
    sys.path.insert(0, str(tmp_path / "site"))
    try:
        backend = importlib.import_module("megatron.core.enums").AttnBackend.auto
        save_rank(tmp_path / "ckpt", "mp_rank_00", {"decoder.layers.0.input_layernorm.weight": torch.ones(4),
                                                    "decoder.layers.0.self_attention.core_attention._extra_state":
                                                        torch.zeros(3, dtype=torch.uint8)},
                  megatron_args(attention_backend=backend))
    finally:
        sys.path.remove(str(tmp_path / "site"))
        for name in [m for m in sys.modules if m == "megatron" or m.startswith("megatron.")]:
            del sys.modules[name]
    source = MegatronLegacySource(tmp_path / "ckpt")
    assert list(source.metas()) == ["decoder.layers.0.input_layernorm.weight"]
    assert "skipped by rule" in source.skipped["decoder.layers.0.self_attention.core_attention._extra_state"]
    assert isinstance(source.args.attention_backend, MegatronObject)
    assert source.args.attention_backend.args == (5,)


# ----------------------------------------------------------------------------- refusals

def test_virtual_pipeline_is_refused(tmp_path):
    save_rank(tmp_path, "mp_rank_00", {"decoder.layers.0.input_layernorm.weight": torch.ones(2)},
              megatron_args(), key="model0")
    with pytest.raises(InputError, match="virtual pipeline"):
        MegatronLegacySource(tmp_path)


def test_missing_rank_folder_is_refused(tmp_path):
    model = CONFIGS["dense_gqa"]
    save_megatron_legacy(weights(model), model, tmp_path, tensor_parallel=2, pipeline_parallel=2)
    import shutil

    shutil.rmtree(tmp_path / "iter_0000000" / "mp_rank_01_001")
    with pytest.raises(InputError, match=r"rank files missing for \(tp, pp, ep\) \[\(1, 1, 0\)\]"):
        MegatronLegacySource(tmp_path)


def test_single_rank_file(tmp_path):
    model = CONFIGS["dense_gqa"]
    state = weights(model)
    files = save_megatron_legacy(state, model, tmp_path / "one")
    source = MegatronLegacySource(files[0])
    assert all(same(source.read(name), tensor) for name, tensor in state.items())
    split = save_megatron_legacy(state, model, tmp_path / "two", tensor_parallel=2)
    with pytest.raises(InputError, match="one rank file of a tp/pp/ep = 2/1/1 checkpoint"):
        MegatronLegacySource(split[0])


def test_replicated_tensors_that_differ_are_refused(tmp_path):
    args = megatron_args(tensor_model_parallel_size=2, num_layers=0)
    for rank in range(2):
        save_rank(tmp_path, f"mp_rank_0{rank}", {"decoder.final_layernorm.weight": torch.full((4,), float(rank))}, args)
    source = MegatronLegacySource(tmp_path)
    with pytest.raises(InputError, match=r"\[decoder.final_layernorm.weight\]: replicated tensor differs"):
        source.read("decoder.final_layernorm.weight")


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(InputError, match="not a Megatron legacy checkpoint"):
        MegatronLegacySource(tmp_path)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("banana")
    with pytest.raises(InputError, match="expected an iteration number"):
        MegatronLegacySource(tmp_path)


# ----------------------------------------------------------------------------- the rules file

def test_default_rules_load_and_end_with_a_catch_all():
    rules = megatron_parallel_rules()
    assert rules[-1].pattern == "*" and rules[-1].rule == "replicated"
    assert {rule.rule for rule in rules} == {"skip", "column", "row", "gate_up", "unsupported", "replicated"}


@pytest.mark.parametrize("body, problem, line", [
    ("rules:\n  - {pattern: '*', rule: replicated}\n  - {pattern: x, rule: concat}\n", "unknown rule 'concat'", 3),
    ("rules:\n  - pattern: '*'\n    rule: column\n    axis: 1\n", r"unknown key\(s\) \['axis'\]", 2),
    ("rules:\n  - {rule: column}\n", "needs a glob 'pattern'", 2),
    ("rules: []\n", "non-empty list", 1),
    ("rules:\n  - {pattern: '*', rule: gate_up, when: [swiglu]}\n", "'when' must be a string", 2),
])
def test_bad_rules_name_file_and_line(tmp_path, body, problem, line):
    path = tmp_path / "rules.yaml"
    path.write_text(body)
    with pytest.raises(InputError, match=problem) as error:
        megatron_parallel_rules(path)
    assert error.value.where == f"{path}:{line}"


@pytest.mark.parametrize("name, swiglu, expected", [
    ("embedding.word_embeddings.weight", True, "column"),
    ("output_layer.weight", True, "column"),
    ("decoder.layers.3.self_attention.linear_qkv.weight", True, "column"),
    ("decoder.layers.3.self_attention.linear_qkv.bias", True, "column"),
    ("decoder.layers.3.self_attention.linear_qkv.layer_norm_weight", True, "replicated"),
    ("decoder.layers.3.self_attention.linear_proj.weight", True, "row"),
    ("decoder.layers.3.self_attention.linear_proj.bias", True, "replicated"),
    ("decoder.layers.3.mlp.linear_fc1.weight", True, "gate_up"),
    ("decoder.layers.3.mlp.linear_fc1.weight", False, "column"),
    ("decoder.layers.3.mlp.linear_fc1.layer_norm_weight", True, "replicated"),
    ("decoder.layers.3.mlp.linear_fc2.weight", True, "row"),
    ("decoder.layers.3.mlp.experts.local_experts.5.linear_fc1.weight", True, "gate_up"),
    ("decoder.layers.3.mlp.experts.linear_fc1.weight12", True, "gate_up"),
    ("decoder.layers.3.mlp.experts.linear_fc2.weight0", True, "row"),
    ("decoder.layers.3.mlp.experts.weight1", True, "unsupported"),
    ("decoder.layers.3.mlp.shared_experts.linear_fc1.weight", True, "gate_up"),
    ("decoder.layers.3.mlp.shared_experts.gate_weight", True, "replicated"),
    ("decoder.layers.3.mlp.router.weight", True, "replicated"),
    ("decoder.layers.3.self_attention.core_attention._extra_state", True, "skip"),
    ("language_model.encoder.layers.0.self_attention.query_key_value.weight", True, "column"),
    ("language_model.encoder.layers.0.self_attention.dense.weight", True, "row"),
    ("language_model.encoder.layers.0.mlp.dense_h_to_4h.weight", True, "gate_up"),
    ("language_model.encoder.layers.0.mlp.dense_4h_to_h.weight", True, "row"),
    ("language_model.embedding.word_embeddings.weight", True, "column"),
    ("decoder.final_layernorm.weight", True, "replicated"),
])
def test_default_rules_per_tensor(name, swiglu, expected):
    from workbench.tensors.megatron_rules import rule_for

    assert rule_for(name, megatron_parallel_rules(), argparse.Namespace(swiglu=swiglu)).rule == expected


def test_split_grouped_mlp_is_refused_with_the_reason():
    from workbench.tensors.megatron_rules import merged_shape, rule_for

    rule = rule_for("decoder.layers.0.mlp.experts.weight1", megatron_parallel_rules(), argparse.Namespace())
    assert merged_shape(rule, "w1", [(4, 8)], "f") == (4, 8)                  # one rank: nothing to merge
    with pytest.raises(InputError, match="cannot be merged: GroupedMLP weight1 interleaves"):
        merged_shape(rule, "w1", [(4, 8), (4, 8)], "f")
