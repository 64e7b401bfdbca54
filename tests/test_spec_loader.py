"""Loading converters/*.yaml: the shipped specs are valid; every malformed spec is refused at load
time with one line naming file:line [key]."""
from __future__ import annotations

import re
import shutil
import textwrap

import pytest

from workbench.errors import InputError
from workbench.knowledge import knowledge_dir
from workbench.spec import available_archs, load_arch
from workbench.spec.transforms import TRANSFORM_NAMES

SHIPPED = ["deepseek_v3", "llama", "mixtral", "qwen2", "qwen3"]

TINY = """\
arch: tiny
params: [num_layers, hidden, vocab, ffn]
logical:
  - embed
  - layers.{i}.mlp.gate
  - layers.{i}.mlp.up
  - final_norm
formats:
  a:
    embed: emb.weight
    layers.{i}.mlp.[gate,up]: {name: "l.{i}.fc1.weight", transform: concat0}
    final_norm: norm.weight
  b:
    embed: tok.weight
    layers.{i}.mlp.gate: b.{i}.w1.weight
    layers.{i}.mlp.up: b.{i}.w3.weight
    final_norm: out_norm.weight
"""


@pytest.fixture()
def folder(tmp_path):
    shutil.copy(knowledge_dir("converters") / "_hub.yaml", tmp_path / "_hub.yaml")
    return tmp_path


def write(folder, text, name="tiny"):
    (folder / f"{name}.yaml").write_text(textwrap.dedent(text))
    return folder


def refused(folder, text, name="tiny") -> str:
    write(folder, text, name)
    with pytest.raises(InputError) as caught:
        load_arch(name, folder)
    message = str(caught.value)
    assert "\n" not in message
    return message


def line_of(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if fragment in line)


# ----------------------------------------------------------------------------- shipped specs

def test_shipped_specs_load_and_every_format_maps_every_logical_name():
    assert available_archs() == SHIPPED                   # megatron_parallel.yaml and _hub.yaml are not archs
    for name in SHIPPED:
        arch = load_arch(name)
        for fmt in arch.formats.values():
            covered = [part.text for rule in fmt.rules for part in rule.parts]
            assert sorted(covered) == sorted(arch.logical), (name, fmt.name)


def test_formats_and_variants_as_documented():
    llama = load_arch("llama")
    assert list(llama.formats) == ["hf", "meta", "megatron", "mindformers", "mindformers_qkv_concat",
                                   "mindformers_qkv_concat_plain", "mindformers_mcore", "mindformers_mcore_contiguous"]
    assert set(load_arch("qwen2").formats) == set(llama.formats) - {"meta"}
    assert set(load_arch("mixtral").formats) == {"hf", "megatron", "megatron_te_grouped", "megatron_grouped",
                                                 "mindformers", "mindformers_gmm", "mindformers_qkv_concat",
                                                 "mindformers_qkv_concat_plain", "mindformers_mcore"}
    assert load_arch("mixtral").params == ("num_layers", "num_heads", "num_kv_heads", "head_dim", "hidden", "vocab",
                                           "num_experts", "moe_ffn")          # ffn of llama is not used
    deepseek = load_arch("deepseek_v3")
    assert "first_dense_layers" in deepseek.params and "mindformers_mcore" in deepseek.formats


def test_extends_overlays_rules_and_keeps_their_provenance():
    qwen2 = load_arch("qwen2")
    rule = next(r for r in qwen2.format("mindformers_qkv_concat").rules if r.key == "layers.{i}.attn.[q,k,v]")
    assert "llama.yaml:" in rule.where and rule.pipeline.describe() == "grouped_qkv"
    bias = next(r for r in qwen2.format("mindformers_qkv_concat").rules if "q_bias" in r.key)
    assert "qwen2.yaml:" in bias.where and bias.name.text == "model.layers.{i}.attention.w_qkv.bias"


def test_tiny_spec_loads(folder):
    write(folder, TINY)
    arch = load_arch("tiny", folder)
    assert list(arch.formats) == ["a", "b"] and arch.params == ("num_layers", "hidden", "vocab", "ffn")
    assert available_archs(folder) == ["tiny"]


# ----------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("old, new, fragment, expected", [
    ("transform: concat0}", "transform: concat9}", "l.{i}.fc1", r"unknown transform 'concat9'"),
    ("transform: concat0}", "transform: concat0, reshape: [hidden, 2*fnn]}", "l.{i}.fc1",
     r"unknown parameter 'fnn'"),
    ("    final_norm: norm.weight", "    final_norm: norm.weight\n    lm_head: head.weight", "lm_head:",
     r"logical name 'lm_head' is not one of arch 'tiny'"),
    ("  - final_norm", "  - final_norm\n  - layers.{i}.mlp.gates", "mlp.gates", r"unknown to the hub"),
    ("    final_norm: out_norm.weight", "    final_norm: b.{i}.w1.weight", "final_norm: b.",
     r"placeholder\(s\) \{i\} that the logical name lacks"),
    ("b.{i}.w3.weight", "b.{i}.w1.weight", "b.{i}.w1.weight\n", r"duplicate physical name 'b.\{i\}.w1.weight'"),
    ("b.{i}.w3.weight", "b.{j}.w3.weight", "b.{j}", r"unknown placeholder \{j\}"),
    ("transform: concat0}", "transform: grouped_qkv}", "l.{i}.fc1", r"grouped_qkv takes 3 part\(s\)"),
    ("transform: concat0}", "transform: concat0, args: {heads: num_heads}}", "l.{i}.fc1", r"argument\(s\) heads"),
    ("  - layers.{i}.mlp.up\n", "", "l.{i}.fc1", r"'layers.\{i\}.mlp.up' is not one of arch 'tiny'"),
    ("    layers.{i}.mlp.up: b.{i}.w3.weight\n", "", "\n  b:", r"format b of arch tiny does not map layers.\{i\}.mlp.up"),
    ("arch: tiny", "arch: small", "arch:", r"must equal the file name"),
    ("params: [", "colour: red\nparams: [", "colour", r"unknown top-level key 'colour'"),
    ("    embed: tok.weight", "    embed: {name: tok.weight, shape: [1]}", "tok.weight", r"unknown rule field"),
    ("params: [num_layers, hidden, vocab, ffn]", "params: [num_layers, hidden, vocab]", "- layers.{i}.mlp.gate",
     r"uses parameter\(s\) ffn not in params"),
    ("params: [num_layers", "params: [num_layer", "params:", r"unknown parameter 'num_layer'"),
    ("  b:\n", "  b:\n    extends: c\n", "extends: c", r"extends unknown format 'c'"),
])
def test_malformed_specs_name_file_line_and_key(folder, old, new, fragment, expected):
    text = TINY.replace(old, new)
    assert text != TINY
    message = refused(folder, text)
    assert re.search(expected, message), message
    assert f"tiny.yaml:{line_of(text, fragment.strip())}" in message, message


def test_stacked_parts_need_stack(folder):
    text = TINY.replace("  - final_norm", "  - final_norm\n  - layers.{i}.moe.router\n"
                        "  - layers.{i}.moe.experts.{e}.gate").replace("params: [num_layers", "params: [num_experts, moe_ffn, num_layers")
    body = ("    layers.{i}.moe.router: r.{i}.weight\n"
            "    layers.{i}.moe.experts.{e}.gate: {name: \"x.{i}.w1\", transform: transpose}\n")
    message = refused(folder, text.replace("    final_norm: norm.weight\n", "    final_norm: norm.weight\n" + body))
    assert "missing from the physical name" in message and "stack" in message


def test_extends_cycles_and_unknown_parents_are_refused(folder):
    write(folder, "arch: one\nextends: two\n", "one")
    message = refused(folder, "arch: two\nextends: one\n", "two")
    assert "extends cycle" in message
    assert "extends unknown arch 'nothing'" in refused(folder, "arch: three\nextends: nothing\n", "three")


def test_unknown_arch_lists_the_available_ones():
    with pytest.raises(InputError, match="use one of deepseek_v3, llama, mixtral, qwen2, qwen3"):
        load_arch("gpt2")


def test_transform_names_cover_the_brief():
    assert {"rename", "transpose", "concat0", "grouped_qkv", "row_interleave", "plain_qkv_blocks", "stack_experts",
            "stack_experts_transposed", "rope_permute", "vocab_pad"} <= set(TRANSFORM_NAMES)


def test_dense_and_moe_layers_need_first_dense_layers(folder):
    text = TINY.replace("  - final_norm", "  - final_norm\n  - layers.{i}.moe.router") \
        .replace("params: [num_layers", "params: [num_experts, num_layers")
    for fmt in ("a", "b"):
        text = text.replace(f"  {fmt}:\n", f"  {fmt}:\n    layers.{{i}}.moe.router: {fmt}.{{i}}.router.weight\n")
    message = refused(folder, text)
    assert "need parameter(s) first_dense_layers" in message and f"tiny.yaml:{line_of(text, 'params:')}" in message


def test_the_spec_package_imports_each_public_name_from_its_module_on_first_use():
    """`workbench compare` imports the module views only: the planner, detection and inference stay unimported
    (they cost ~20 ms of its serial part), and every public name still resolves, to the object its module holds."""
    import importlib
    import os
    import subprocess
    import sys
    from pathlib import Path

    probe = ("import sys, workbench.spec.modules; "
             "print(sorted(m for m in ('workbench.spec.plan', 'workbench.spec.detect', 'workbench.spec.infer', "
             "'workbench.spec.config_params', 'workbench.spec.resolve') if m in sys.modules))")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", probe], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"

    import workbench.spec as spec
    for name in spec.__all__:
        home = importlib.import_module(f"workbench.spec.{spec._HOME[name]}")
        assert getattr(spec, name) is getattr(home, name), name
    assert set(spec.__all__) == set(spec._HOME) and set(spec.__all__) <= set(dir(spec))
    with pytest.raises(AttributeError, match="no attribute 'build_plans'"):
        getattr(spec, "build_plans")  # noqa: B009  (the attribute access is what is tested)
