"""The module view of the specs (workbench/spec/modules.py), the module-level relation, and the layer
sets / index variables that converters/_hub.yaml declares."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from workbench.errors import InputError
from workbench.knowledge import knowledge_dir
from workbench.spec import load_arch
from workbench.spec.model_params import ModelParams
from workbench.spec.modules import ModuleRef, detect_module_format, module_of, module_resolver, unmatched_paths
from workbench.spec.relation import module_relation
from workbench_testing import fixtures_dir

QKV = ("layers.0.attn.q", "layers.0.attn.k", "layers.0.attn.v")


def test_contract_examples_megatron_leaf_and_parent():
    resolve = module_resolver("llama", "megatron")
    assert resolve("decoder.layers.0.self_attention.linear_qkv") == ModuleRef(QKV, 0, "fused")
    assert resolve("decoder.layers.0.self_attention") == ModuleRef(("layers.0.attn",), 0, "group")
    assert resolve("decoder.layers.0.mlp") == ModuleRef(("layers.0.mlp",), 0, "group")
    assert resolve("decoder.layers.7") == ModuleRef(("layers.7",), 7, "group")
    assert resolve("decoder.layers") == ModuleRef(("layers",), None, "group")
    assert resolve("decoder") == ModuleRef((), None, "root")          # final norm + layers: no common module
    assert resolve("output_layer") == ModuleRef(("lm_head",), None, "same")


@pytest.mark.parametrize("arch, fmt, path, expected", [
    # MindFormers legacy: one module per tensor
    ("llama", "mindformers", "model.layers.3.attention.wq", ModuleRef(("layers.3.attn.q",), 3, "same")),
    ("llama", "mindformers", "model.tok_embeddings", ModuleRef(("embed",), None, "same")),   # .embedding_weight leaf
    ("llama", "mindformers", "model.layers.3.attention", ModuleRef(("layers.3.attn",), 3, "group")),
    ("llama", "mindformers_qkv_concat", "model.layers.1.feed_forward.w_gate_hidden",
     ModuleRef(("layers.1.mlp.gate", "layers.1.mlp.up"), 1, "fused")),
    # MindFormers mcore
    ("llama", "mindformers_mcore", "decoder.layers.2.mlp.linear_fc1",
     ModuleRef(("layers.2.mlp.gate", "layers.2.mlp.up"), 2, "fused")),
    # HF
    ("llama", "hf", "model.layers.0.self_attn.o_proj", ModuleRef(("layers.0.attn.o",), 0, "same")),
    ("llama", "hf", "model.layers.0.self_attn", ModuleRef(("layers.0.attn",), 0, "group")),
    # qwen3: q/k norms are their own modules, inside the attention group
    ("qwen3", "megatron", "decoder.layers.4.self_attention.q_layernorm", ModuleRef(("layers.4.attn.q_norm",), 4, "same")),
    ("qwen3", "hf", "model.layers.4.self_attn", ModuleRef(("layers.4.attn",), 4, "group")),
    ("qwen3", "mindformers", "model.layers.4.attention.k_norm", ModuleRef(("layers.4.attn.k_norm",), 4, "same")),
    # qwen2: a bias belongs to its linear (hub module:)
    ("qwen2", "hf", "model.layers.1.self_attn.q_proj", ModuleRef(("layers.1.attn.q",), 1, "same")),
    ("qwen2", "megatron", "decoder.layers.1.self_attention.linear_qkv",
     ModuleRef(("layers.1.attn.q", "layers.1.attn.k", "layers.1.attn.v"), 1, "fused")),
    # mixtral: experts one per module (Megatron, HF) or stacked in one tensor (MindFormers legacy)
    ("mixtral", "megatron", "decoder.layers.1.mlp.experts.local_experts.5.linear_fc1",
     ModuleRef(("layers.1.moe.experts.5.gate", "layers.1.moe.experts.5.up"), 1, "fused")),
    ("mixtral", "hf", "model.layers.1.block_sparse_moe.experts.5.w2", ModuleRef(("layers.1.moe.experts.5.down",), 1, "same")),
    ("mixtral", "mindformers", "model.layers.1.feed_forward.ffn.w1", ModuleRef(("layers.1.moe.experts.*.gate",), 1, "stacked")),
    ("mixtral", "mindformers", "model.layers.1.feed_forward", ModuleRef(("layers.1.moe",), 1, "group")),
    ("mixtral", "megatron_te_grouped", "decoder.layers.0.mlp.experts.linear_fc2",
     ModuleRef(("layers.0.moe.experts.*.down",), 0, "stacked")),
    # deepseek_v3: MLA modules, router holds the expert bias, shared experts
    ("deepseek_v3", "megatron", "decoder.layers.5.self_attention.linear_kv_down_proj",
     ModuleRef(("layers.5.attn.kv_down",), 5, "same")),
    ("deepseek_v3", "hf", "model.layers.5.mlp.gate", ModuleRef(("layers.5.moe.router",), 5, "same")),
    ("deepseek_v3", "mindformers_mcore", "decoder.layers.5.mlp.shared_experts.linear_fc1",
     ModuleRef(("layers.5.moe.shared.gate", "layers.5.moe.shared.up"), 5, "fused")),
    ("deepseek_v3", "mindformers_mcore", "decoder.layers.5.mlp.experts",
     ModuleRef(("layers.5.moe.experts.*.gate", "layers.5.moe.experts.*.up", "layers.5.moe.experts.*.down"), 5,
               "stacked")),
])
def test_module_paths_resolve_to_logical_modules(arch, fmt, path, expected):
    assert module_resolver(arch, fmt)(path) == expected


def test_stacked_experts_expand_when_the_sizes_are_known():
    resolve = module_resolver("mixtral", "mindformers_gmm", ModelParams(num_layers=2, num_experts=3))
    assert resolve("model.layers.1.feed_forward.ffn.w3") == ModuleRef(
        tuple(f"layers.1.moe.experts.{e}.up" for e in range(3)), 1, "stacked")


def test_dense_and_moe_parents_are_told_apart_by_the_layer_sets():
    path = "decoder.layers.3.mlp"
    assert module_resolver("deepseek_v3", "megatron")(path).logical == ("layers.3.mlp", "layers.3.moe")
    sizes = ModelParams(num_layers=6, num_experts=4, first_dense_layers=1)
    assert module_resolver("deepseek_v3", "megatron", sizes)(path).logical == ("layers.3.moe",)
    assert module_resolver("deepseek_v3", "megatron", sizes)("decoder.layers.0.mlp").logical == ("layers.0.mlp",)
    interleaved = sizes.with_values(moe_layer_freq=2)                 # MoE on layers 2 and 4 only
    assert module_resolver("deepseek_v3", "megatron", interleaved)(path).logical == ("layers.3.mlp",)


def test_unmatched_paths_are_reported_not_guessed():
    paths = ["decoder.layers.0.self_attention.linear_qkv", "decoder.layers.0.self_attention.linear_qkvv",
             "decoder.layers.01.mlp", "Decoder.layers.0.mlp", "decoder.layers.0.self_attention.linear_qkv"]
    assert module_resolver("llama", "megatron")("decoder.layers.0.self_attention.linear_qkvv") is None
    assert unmatched_paths(paths, "llama", "megatron") == paths[1:4]


def _module_paths(arch: str, fmt: str, params: ModelParams) -> list[str]:
    return list(dict.fromkeys(module_of(name) for name in load_arch(arch).expected_names(fmt, params)))


@pytest.mark.parametrize("arch, fmt", [("llama", "megatron"), ("llama", "mindformers"), ("llama", "hf"),
                                       ("qwen3", "mindformers"), ("mixtral", "mindformers"), ("deepseek_v3", "hf")])
def test_detect_module_format_finds_a_format_that_resolves_the_paths_alike(arch, fmt):
    sizes = ModelParams(num_layers=3, num_experts=2, first_dense_layers=1)
    paths = _module_paths(arch, fmt, sizes)
    found_arch, found_fmt = detect_module_format(paths)
    truth, found = module_resolver(arch, fmt), module_resolver(found_arch, found_fmt)
    assert unmatched_paths(paths, found_arch, found_fmt) == []
    assert [found(path) for path in paths] == [truth(path) for path in paths]


def test_detect_module_format_on_msprobe_dump_names():
    """Module paths as msprobe writes them (``Module.<path>.<Class>.forward.<n>``, ``Cell.<path>...``):
    the fixtures' tiny block fits no spec and is refused; a reference model's paths are detected."""
    grammar = re.compile(r"^(?:Module|Cell)\.(?P<path>.+)\.[A-Za-z0-9_]+\.(?:forward|backward|parameters_grad)\.\d+$")
    folder = fixtures_dir("dumps")
    names = []
    for side in ("msprobe_pytorch", "msprobe_mindspore"):
        names += list(json.loads((folder / side / "out_statistics_mix" / "dump.full.json").read_text())["data"])
    paths = [found.group("path") for name in names if (found := grammar.match(name))]
    assert {"fc1", "fc2", "ln"} <= set(paths)
    with pytest.raises(InputError, match=r"no converter spec matches any module path \(e\.g\. "):
        detect_module_format(paths)
    torch_side = [f"Module.decoder.layers.{i}.self_attention.linear_qkv.Linear.forward.0" for i in range(2)] + \
        ["Module.decoder.layers.0.mlp.linear_fc2.RowParallelLinear.forward.0", "Module.output_layer.Linear.forward.0"]
    ms_side = ["Cell.model.layers.0.attention.wq.Linear.forward.0", "Cell.model.layers.0.attention.wk.Linear.forward.0",
               "Cell.model.layers.0.attention.q_norm.RMSNorm.forward.0", "Cell.model.norm_out.RMSNorm.forward.0"]
    arch, fmt = detect_module_format([grammar.match(name).group("path") for name in torch_side])
    assert fmt in ("megatron", "mindformers_mcore") or fmt.startswith(("megatron_", "mindformers_mcore"))
    arch, fmt = detect_module_format([grammar.match(name).group("path") for name in ms_side])
    assert (arch, fmt) == ("qwen3", "mindformers")                     # q_norm: only qwen3 has it


def test_module_relation_pairs_modules_of_two_formats():
    relation = {(c.a, c.b): c for c in module_relation("llama", "megatron", "mindformers")}
    qkv = relation[(("decoder.layers.{i}.self_attention.linear_qkv",),
                    ("model.layers.{i}.attention.wq", "model.layers.{i}.attention.wk", "model.layers.{i}.attention.wv"))]
    assert qkv.kind == "fused" and qkv.logical == ("layers.{i}.attn.q", "layers.{i}.attn.k", "layers.{i}.attn.v")
    attention = relation[(("decoder.layers.{i}.self_attention",), ("model.layers.{i}.attention",))]
    assert attention.kind == "same" and attention.logical == ("layers.{i}.attn",)
    assert relation[(("output_layer",), ("lm_head",))].kind == "same"
    split = {(c.a, c.b): c.kind for c in module_relation("llama", "mindformers", "megatron")}
    assert split[(("model.layers.{i}.attention.wq", "model.layers.{i}.attention.wk", "model.layers.{i}.attention.wv"),
                  ("decoder.layers.{i}.self_attention.linear_qkv",))] == "split"
    stacked = {c.a: c for c in module_relation("mixtral", "mindformers", "hf")}[("model.layers.{i}.feed_forward.ffn.w1",)]
    assert stacked.kind == "stacked" and stacked.b == ("model.layers.{i}.block_sparse_moe.experts.{e}.w1",)


# ----------------------------------------------------------------------------- layer sets from _hub.yaml

def test_layer_sets_follow_first_k_dense_moe_frequency_and_mtp():
    arch = load_arch("deepseek_v3")
    sizes = ModelParams(num_layers=8, num_experts=4, first_dense_layers=3)
    assert list(arch.layers("moe", sizes)) == [3, 4, 5, 6, 7] and list(arch.layers("dense", sizes)) == [0, 1, 2]
    every_2 = sizes.with_values(moe_layer_freq=2)                     # HF DeepseekV2: i >= k and i % freq == 0
    assert list(arch.layers("moe", every_2)) == [4, 6] and list(arch.layers("dense", every_2)) == [0, 1, 2, 3, 5, 7]
    assert list(arch.layers("mtp", sizes.with_values(mtp_layers=1))) == [8]
    assert list(arch.layers("dense", ModelParams(num_layers=3))) == [0, 1, 2]      # no experts: every layer dense
    names = arch.expected_names("hf", every_2)
    assert "model.layers.4.mlp.experts.0.gate_proj.weight" in names and "model.layers.5.mlp.gate_proj.weight" in names
    assert "model.layers.5.mlp.experts.0.gate_proj.weight" not in names


@pytest.fixture()
def converters(tmp_path):
    for name in ("_hub.yaml", "llama.yaml"):
        shutil.copy(knowledge_dir("converters") / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize("old, new, message", [
    ("  dense: {not: moe}", "  dense: {not: mo}", "layer_sets.dense.not]: not: 'mo' is not another layer set"),
    ("  dense: {not: moe}", "  dense: {not: dense2}\n  dense2: {not: dense}", "'not:' loops"),
    ("  moe: {if: num_experts,", "  moe: {if: experts,", "layer_sets.moe.if]: if: 'experts' is not a size parameter"),
    ("  mtp: {beyond: mtp_layers}", "  mtp: {after: mtp_layers}", "layer_sets.mtp]: unknown field(s) after"),
    ("  e: {size: num_experts, meaning: routed expert}", "", "expected 'indices:' with exactly i, e"),
    ('{module: "layers.{i}.attn.q",', '{module: "layers.{i}.experts.{e}.q",', "has an index the tensor's name lacks"),
    ("layers.{i}.mlp.gate: {shape: [ffn, hidden], layers: dense}", "layers.{i}.mlp.gate: {shape: [ffn, hidden], "
     "layers: sparse}", "layers: 'sparse' is not one of all, moe, dense, mtp"),
])
def test_bad_index_and_layer_set_declarations_are_refused_at_file_line(converters, old, new, message):
    hub = converters / "_hub.yaml"
    text = hub.read_text()
    assert old in text
    hub.write_text(text.replace(old, new))
    with pytest.raises(InputError) as caught:
        load_arch("llama", converters)
    error = str(caught.value)
    assert message in error and "\n" not in error
    assert re.search(r"_hub\.yaml:\d+", error), error
