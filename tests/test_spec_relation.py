"""Name-level relations between formats, derived from the converter specs alone."""
from workbench import spec
from workbench.spec.relation import compact_label, correspond


def _names(arch, fmt, **sizes):
    return list(arch.expected_names(fmt, spec.ModelParams(**sizes)))


def test_megatron_fused_tensors_correspond_to_the_mindformers_parts():
    llama = spec.load_arch("llama")
    groups, unmatched_a, unmatched_b = correspond(_names(llama, "megatron", num_layers=2), "megatron",
                                                  _names(llama, "mindformers", num_layers=2), "mindformers", llama)
    by_label = {group.label: group for group in groups}
    qkv = by_label["layers.1.attn.[q,k,v]"]
    assert qkv.kind == "fused" and qkv.a == ("decoder.layers.1.self_attention.linear_qkv.weight",)
    assert qkv.b == tuple(f"model.layers.1.attention.w{p}.weight" for p in "qkv") and qkv.layer == 1
    assert by_label["layers.0.mlp.[gate,up]"].b == ("model.layers.0.feed_forward.w1.weight",
                                                    "model.layers.0.feed_forward.w3.weight")
    assert by_label["embed"].kind == "same" and by_label["embed"].layer is None
    assert len(groups) == 15 and unmatched_a == [] and unmatched_b == []


def test_the_other_direction_is_a_split_and_unmatched_names_are_reported():
    llama = spec.load_arch("llama")
    names_a = _names(llama, "hf", num_layers=1)
    names_a.remove("lm_head.weight")
    groups, unmatched_a, unmatched_b = correspond(names_a + ["junk"], "hf",
                                                  _names(llama, "mindformers_qkv_concat", num_layers=1) + ["extra.weight"],
                                                  "mindformers_qkv_concat", llama)
    kinds = {group.label: group.kind for group in groups}
    assert kinds["layers.0.attn.[q,k,v]"] == "split" and kinds["lm_head"] == "only_b"
    assert unmatched_a == ["junk"] and unmatched_b == ["extra.weight"]


def test_stacked_experts_count_experts_from_the_other_side():
    mixtral = spec.load_arch("mixtral")
    groups, _, _ = correspond(_names(mixtral, "megatron", num_layers=1, num_experts=2), "megatron",
                              _names(mixtral, "mindformers", num_layers=1, num_experts=2), "mindformers", mixtral)
    stacked = [group for group in groups if group.kind == "stacked"]
    assert [group.label for group in stacked] == ["layers.0.moe.experts.[0,1].[gate,up]",
                                                  "layers.0.moe.experts.[0,1].down"]
    assert len(stacked[0].a) == 2 and stacked[0].b == ("model.layers.0.feed_forward.ffn.w1.weight",
                                                       "model.layers.0.feed_forward.ffn.w3.weight")


def test_compact_label():
    assert compact_label(["embed"]) == "embed"
    assert compact_label(["a.b", "a.b.c"]) == "a.b (+1)"
