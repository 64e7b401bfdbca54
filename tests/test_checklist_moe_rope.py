"""Issue 12, the rest of the missing MoE/model items: the MoE layer pattern (--moe-layer-freq read without
eval), the top-k weight normalisation (pre/post softmax, norm_topk_prob) and the RoPE scaling factors.

Real configs: the shared fixtures, the Qwen3-MoE master yaml excerpt of test_checklist_facts12, and the
MindSpeed-LLM v2.2.0 DeepSeek-V3 script below (a faithful excerpt of its argument block)."""
from __future__ import annotations

import pytest

from test_checklist_facts12 import MIXTRAL_GPU_SH, MIXTRAL_SH, MIXTRAL_YAML, QWEN3_MOE_MASTER, audit, edited
from workbench.config.layer_pattern import MAX_LAYERS, PatternError, parse_pattern, run_length

# Ascend/MindSpeed-LLM v2.2.0 examples/mcore/deepseek3/pretrain_deepseek3_671b_4k_ptd.sh (lines 31-32, 58-92,
# 120-150; paths and launcher left out)
DEEPSEEK3_MINDSPEED = r'''#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
NPUS_PER_NODE=16
NUM_LAYERS=64
SEQ_LEN=4096
MOE_ARGS="
    --moe-router-dtype fp32 \
    --moe-grouped-gemm \
    --moe-permutation-async-comm \
    --moe-token-dispatcher-type alltoall_seq \
    --moe-permute-fusion \
    --first-k-dense-replace 3 \
    --moe-layer-freq 1 \
    --n-shared-experts 1 \
    --num-experts 256 \
    --moe-router-topk 8 \
    --moe-ffn-hidden-size 2048 \
    --moe-router-load-balancing-type none \
    --moe-router-num-groups 8 \
    --moe-router-group-topk 4 \
    --moe-router-topk-scaling-factor 2.5 \
    --moe-aux-loss-coeff 0.0001 \
    --seq-aux \
    --norm-topk-prob \
    --moe-router-score-function sigmoid \
    --moe-router-enable-expert-bias \
    --moe-tp-extend-ep
"
ROPE_ARGS="
    --beta-fast 32 \
    --beta-slow 1 \
    --rope-scaling-factor 40 \
    --rope-scaling-mscale 1.0 \
    --rope-scaling-mscale-all-dim 1.0 \
    --rope-scaling-original-max-position-embeddings 4096 \
    --rope-scaling-type yarn
"
GPT_ARGS="
    --num-layers ${NUM_LAYERS} \
    --hidden-size 7168 \
    --ffn-hidden-size 18432 \
    --num-attention-heads 128 \
    --seq-length ${SEQ_LEN} \
    --max-position-embeddings 163840 \
    --position-embedding-type rope \
    --normalization RMSNorm \
    --use-fused-rotary-pos-emb \
    --swiglu \
    --bf16
"
torchrun --nproc_per_node $NPUS_PER_NODE pretrain_gpt.py $GPT_ARGS $MOE_ARGS $ROPE_ARGS
'''

# A use_legacy: False DeepSeek-V3 yaml: DeepseekV3Config supplies the MoE defaults (first_k_dense_replace 3,
# sigmoid, norm_topk_prob True, routed_scaling_factor 2.5); rope_scaling as DeepSeek-V3's config.json writes it.
DEEPSEEK3_MCORE = """\
use_legacy: False
model:
  model_config:
    model_type: deepseek_v3
    num_hidden_layers: 64
    rope_scaling:
      type: yarn
      factor: 40
      original_max_position_embeddings: 4096
      beta_fast: 32
      beta_slow: 1
      mscale: 1.0
      mscale_all_dim: 1.0
"""


@pytest.fixture()
def deepseek_pair(tmp_path):
    script, yaml = tmp_path / "pretrain_deepseek3_671b_4k_ptd.sh", tmp_path / "deepseek3.yaml"
    script.write_text(DEEPSEEK3_MINDSPEED)
    yaml.write_text(DEEPSEEK3_MCORE)
    return script, yaml


# ---------------------------------------------------------------- the layer-pattern grammar, without eval
@pytest.mark.parametrize("spec,layers,expected", [
    ("([0]*3+[1]*61)", 64, "[0]*3+[1]*61"),          # core_v0.12.1 arguments.py:262 docstring form
    ("([1]*3+[0]*1)*3", 12, "[1]*3+[0]+[1]*3+[0]+[1]*3+[0]"),
    ("[0, 0, 1, 1]", 4, "[0]*2+[1]*2"),                # a log or checkpoint prints the list
    ("2", 4, "[1]+[0]+[1]+[0]"), (3, 6, "[1]+[0]*2+[1]+[0]*2"), ("3*[1]", 3, "[1]*3"),
])
def test_layer_patterns_parse_like_megatron(spec, layers, expected):
    assert run_length(parse_pattern(spec, layers)) == expected


@pytest.mark.parametrize("spec,problem", [
    ("__import__('os').system('touch pwned')", "unexpected '_'"),   # never executed
    ("[1]*10**9", "unexpected '*'"),
    ("[1]*999999999", f"more than {MAX_LAYERS} layers"),
    ("(" * 5000 + "[1]" + ")" * 5000, "longer than"),
    ("(" * 40 + "[1]" + ")" * 40, "nested deeper than 32"),
    ("[0]*3+[2]*61", "only 0 (dense) and 1 (MoE)"),
    ("[0]*3+[1]*60", "has 63 layers, the model 64"),
    ("[1]+3", "'+' joins two lists"), ("[1]*[1]", "'*' repeats"), ("[1", "expected"), ("0", "at least 1"),
])
def test_hostile_layer_patterns_are_refused_with_the_reason(spec, problem, tmp_path):
    with pytest.raises(PatternError) as error:
        parse_pattern(spec, 64)
    assert problem in str(error.value)
    assert not (tmp_path / "pwned").exists()


def test_a_bad_moe_layer_freq_in_a_script_is_unknown_naming_the_flag(tmp_path):
    script = edited(tmp_path, MIXTRAL_GPU_SH, "    --moe-router-topk 2\n",
                    "    --moe-router-topk 2\n    --moe-layer-freq \"__import__('os').system('touch pwned')\"\n")
    item = audit(script, MIXTRAL_YAML).item("moe_layers")
    assert item.verdict == "UNKNOWN" and "--moe-layer-freq" in item.message and "unexpected '_'" in item.message


# ---------------------------------------------------------------- MoE layer pattern from real configs
def test_mindspeed_first_k_dense_and_freq_match_deepseek_v3_class(deepseek_pair):
    # MindSpeed: --first-k-dense-replace 3 --moe-layer-freq 1; DeepseekV3Config first_k_dense_replace 3
    report = audit(*deepseek_pair)
    assert report.megatron["moe.layer_pattern"].value == "[0]*3+[1]*61"
    assert report.mindformers["moe.layer_pattern"].value == "[0]*3+[1]*61"
    assert report.item("moe_layers").verdict == "PASS"


def test_upstream_list_expression_against_first_k_dense_replace(deepseek_pair, tmp_path):
    script, yaml = deepseek_pair
    text = script.read_text().replace("    --first-k-dense-replace 3 \\\n    --moe-layer-freq 1 \\\n",
                                      "    --moe-layer-freq ([0]*3+[1]*61) \\\n")
    upstream = tmp_path / "upstream.sh"
    upstream.write_text(text)
    assert audit(upstream, yaml).item("moe_layers").verdict == "PASS"
    upstream.write_text(text.replace("([0]*3+[1]*61)", "([0]*1+[1]*63)"))
    item = audit(upstream, yaml).item("moe_layers")
    assert item.verdict == "MISMATCH" and "Megatron [0]+[1]*63 vs MindFormers [0]*3+[1]*61" in item.message


def test_mindspeed_minus_one_means_every_layer_moe():
    # the Mixtral MindSpeed script: --moe-layer-freq -1 --first-k-dense-replace -1 (i % -1 == 0 for every i)
    report = audit(MIXTRAL_SH, MIXTRAL_YAML)
    assert report.megatron["moe.layer_pattern"].value == "[1]*32"
    assert report.item("moe_layers").verdict == "PASS"


# ---------------------------------------------------------------- top-k normalisation
def test_qwen3_moe_raw_topk_weights_against_megatron_post_softmax(tmp_path):
    # Qwen3-MoE master: norm_topk_prob False (MindFormers ignores moe_router_pre_softmax in training);
    # Megatron's default softmax after top-k sums the weights to 1
    yaml = tmp_path / "pretrain_qwen3_30b_a3b_4k.yaml"
    yaml.write_text(QWEN3_MOE_MASTER)
    report = audit(MIXTRAL_GPU_SH, yaml)
    assert report.mindformers["moe.topk_weights"].value == "raw"
    item = report.item("topk_weights")
    assert item.verdict == "MISMATCH" and "Megatron normalised vs MindFormers raw" in item.message
    script = edited(tmp_path, MIXTRAL_GPU_SH, "    --moe-router-topk 2\n", "    --moe-router-topk 2\n    --moe-router-pre-softmax\n")
    assert audit(script, yaml).item("topk_weights").verdict == "PASS"


def test_deepseek_sigmoid_normalised_and_scaled_on_both_sides(deepseek_pair):
    report = audit(*deepseek_pair)
    for item_id in ("topk_weights", "topk_scaling_factor", "score_function"):
        assert report.item(item_id).verdict == "PASS", (item_id, report.item(item_id).message)


# ---------------------------------------------------------------- RoPE scaling factors
def test_yarn_factors_agree_on_the_deepseek_pair(deepseek_pair):
    item = audit(*deepseek_pair).item("rope_scaling")
    assert item.verdict == "PASS" and item.message.startswith("yarn: both")


def test_yarn_mscale_defaults_differ(deepseek_pair, tmp_path):
    # the yaml without mscale: MLATransformerConfig's default 0.707 against the script's 1.0
    script, yaml = deepseek_pair
    short = tmp_path / "no_mscale.yaml"
    short.write_text(yaml.read_text().replace("      mscale: 1.0\n      mscale_all_dim: 1.0\n", ""))
    report = audit(script, short)
    assert report.mindformers["model.rope_mscale"].value == 0.707
    item = report.item("rope_scaling")
    assert item.verdict == "MISMATCH" and "rope_mscale=1" in item.message and "rope_mscale=0.707" in item.message


def test_yarn_factor_and_original_positions_are_compared(deepseek_pair, tmp_path):
    script, yaml = deepseek_pair
    other = tmp_path / "factor32.yaml"
    other.write_text(yaml.read_text().replace("factor: 40", "factor: 32").replace(
        "      original_max_position_embeddings: 4096\n", ""))
    report = audit(script, other)
    assert report.mindformers["model.rope_original_positions"].value == 4096    # = seq_length (default)
    assert "rope_factor=40" in report.item("rope_scaling").message
    assert report.item("rope_scaling").verdict == "MISMATCH"


def test_no_scaling_on_either_side_ignores_the_factors():
    item = audit(MIXTRAL_SH, MIXTRAL_YAML).item("rope_scaling")
    assert item.verdict == "PASS" and item.message == "no RoPE scaling on either side"


# ---------------------------------------------------------------- hostile values in the new keys
@pytest.mark.parametrize("scaling,needle", [
    ('{type: yarn, factor: "forty"}', "rope_scaling.factor"),        # wrong type
    ("[yarn, 40]", "rope_scaling"),                                  # a list where a mapping is read
    ("{type: yarn, factor: .nan}", "rope_scaling.factor"),           # not finite
])
def test_bad_rope_scaling_values_are_one_line_errors(deepseek_pair, tmp_path, capsys, scaling, needle):
    from workbench.cli.main import main

    script, yaml = deepseek_pair
    bad = tmp_path / "bad.yaml"
    bad.write_text("use_legacy: False\nmodel:\n  model_config:\n    model_type: deepseek_v3\n"
                   f"    rope_scaling: {scaling}\n")
    assert main(["checklist", str(script), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml" in err and needle in err and "Traceback" not in err


@pytest.mark.parametrize("freq", ["{every: 2}", "[[1], [1], [1], [1]]", "[1, 1, true, 1]", '"' + '(' * 64 + '"'])
def test_a_moe_layer_freq_of_the_wrong_shape_is_unknown_not_a_crash(deepseek_pair, tmp_path, freq):
    # (deeper YAML nesting is refused by the shared YAML depth check before any key is read)
    script, yaml = deepseek_pair
    nested = tmp_path / "nested.yaml"
    nested.write_text("use_legacy: False\nmodel:\n  model_config:\n    model_type: qwen3_moe\n"
                      f"    num_hidden_layers: 4\n    moe_layer_freq: {freq}\n")
    item = audit(script, nested).item("moe_layers")
    assert item.verdict == "UNKNOWN" and "moe_layer_freq" in item.message
