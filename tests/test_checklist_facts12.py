"""Issue 12: CheckList facts checked against the frameworks' own sources, each from a real config.

The configs are the shared fixtures (../shared/fixtures/configs, see SOURCES.md there) or copies of
them with one line changed in tmp_path (the change is named in each test)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from workbench_testing import fixtures_dir
from workbench.audit.engine import run_checklist

LLAMA2_SH = "megatron/mindspeed_llm_v2.2.0__pretrain_llama2_7b_ptd.sh"
MIXTRAL_SH = "megatron/mindspeed_llm_v2.2.0__pretrain_mixtral_8x7b_ptd.sh"
MIXTRAL_GPU_SH = "megatron/extra__megatron_core_v0.12.1__train_mixtral_8x7b_distributed.sh"
GPT_YAML = "megatron/megatron_core_v0.12.1_gpt_config.yaml"
LLAMA2_YAML = "mindformers/legacy_llama2_pretrain_llama2_7b.yaml"
MIXTRAL_YAML = "mindformers/legacy_moe_mixtral_pretrain_mixtral-8x7b.yaml"
QWEN3_YAML = "mindformers/mcore_qwen3_pretrain_qwen3_32b_4k.yaml"


@lru_cache(maxsize=None)
def _audit(megatron: str, mindformers: str):
    configs = fixtures_dir("configs")
    return run_checklist(configs / megatron, configs / mindformers)


def audit(megatron: str | Path, mindformers: str | Path):
    if isinstance(megatron, str) and isinstance(mindformers, str):
        return _audit(megatron, mindformers)
    configs = fixtures_dir("configs")
    megatron = megatron if isinstance(megatron, Path) else configs / megatron
    mindformers = mindformers if isinstance(mindformers, Path) else configs / mindformers
    return run_checklist(megatron, mindformers)


def edited(tmp_path: Path, fixture: str, old: str, new: str) -> Path:
    """A copy of a fixture config with one exact text replaced (the replaced text must be present once)."""
    text = (fixtures_dir("configs") / fixture).read_text()
    assert text.count(old) == 1, (fixture, old)
    path = tmp_path / Path(fixture).name
    path.write_text(text.replace(old, new))
    return path


def value(report, side: str, key: str):
    return getattr(report, side)[key].value


# ---------------------------------------------------------------- 1. rotary dtype
def test_1_megatron_rotates_in_the_activation_dtype_mindformers_in_rotary_dtype():
    # Megatron core_v0.12.1 rope_utils.py:119 casts cos/sin to t.dtype (bf16 with --bf16); the Qwen3
    # yaml rotates in rotary_dtype "float32": a real difference.
    report = audit(MIXTRAL_GPU_SH, QWEN3_YAML)
    assert value(report, "megatron", "precision.rotary_dtype") == "bf16"
    item = report.item("rotary_dtype")
    assert item.verdict == "RISK" and "Megatron bf16 vs MindFormers fp32" in item.message


def test_1_rotary_dtype_equal_to_the_compute_dtype_passes(tmp_path):
    yaml = edited(tmp_path, QWEN3_YAML, 'rotary_dtype: "float32"', 'rotary_dtype: "bfloat16"')
    assert audit(MIXTRAL_GPU_SH, yaml).item("rotary_dtype").verdict == "PASS"


# ---------------------------------------------------------------- 2. MoE router dtype
def test_2_megatron_routes_in_the_activation_dtype_by_default():
    # core_v0.12.1 --moe-router-dtype defaults to None: router.py:66 router_dtype = input.dtype (bf16 here)
    report = audit(MIXTRAL_SH, MIXTRAL_YAML)
    assert value(report, "megatron", "precision.compute_dtype") == "bf16"
    item = report.item("router_dtype")
    assert item.verdict == "RISK" and "Megatron bf16 vs MindFormers fp32" in item.message
    assert "--moe-router-dtype fp32" in item.fix["megatron"]


@pytest.mark.parametrize("flag", ["--router-gating-in-fp32", "--moe-router-dtype fp32"])
def test_2_router_in_fp32_on_megatron_passes(tmp_path, flag):
    script = edited(tmp_path, MIXTRAL_SH, "    --moe-router-topk 2 \\\n", f"    --moe-router-topk 2 \\\n    {flag} \\\n")
    item = audit(script, MIXTRAL_YAML).item("router_dtype")
    assert item.verdict == "PASS", item.message


# ---------------------------------------------------------------- 3. upstream GPU fusions and attention
def test_3_upstream_mcore_fuses_rope_and_swiglu_and_uses_te_attention_by_default():
    # core_v0.12.1 arguments.py:1686/1693: --no-bias-swiglu-fusion / --no-rope-fusion are store_false;
    # the Mixtral GPU script sets neither, and no --use-flash-attn (read only by the legacy model).
    report = audit(MIXTRAL_GPU_SH, MIXTRAL_YAML)
    assert value(report, "megatron", "runtime.hardware") == "gpu"
    assert value(report, "megatron", "fused.rope") is True
    assert value(report, "megatron", "fused.swiglu") is True
    assert value(report, "megatron", "fused.flash_attention") is True
    assert report.item("fused_rope").verdict == "MISMATCH"      # legacy MindFormers rotates with separate ops
    assert report.item("fused_swiglu").verdict == "MISMATCH"
    assert report.item("fused_flash_attention").verdict == "MANUAL"  # fused on both, GPU vs Ascend kernels
    assert report.item("softmax_dtype").verdict == "PASS"  # the softmax runs inside the fused attention


def test_3_unfused_switches_on_gpu_are_read(tmp_path):
    script = edited(tmp_path, MIXTRAL_GPU_SH, "    --moe-router-topk 2\n",
                    "    --moe-router-topk 2\n    --no-rope-fusion\n    --no-bias-swiglu-fusion\n"
                    "    --attention-backend unfused\n")
    report = audit(script, MIXTRAL_YAML)
    assert value(report, "megatron", "fused.rope") is False
    assert value(report, "megatron", "fused.swiglu") is False
    assert value(report, "megatron", "fused.flash_attention") is False
    assert report.item("fused_rope").verdict == report.item("fused_swiglu").verdict == "PASS"


def test_3_mindspeed_reads_its_own_fusion_flags():
    # MindSpeed-LLM's llama2 script states --use-flash-attn --use-fused-rotary-pos-emb --use-fused-swiglu
    report = audit(LLAMA2_SH, LLAMA2_YAML)
    assert value(report, "megatron", "runtime.hardware") == "ascend"
    for key in ("fused.flash_attention", "fused.rope", "fused.swiglu"):
        assert value(report, "megatron", key) is True, key


@pytest.mark.parametrize("backend,fused", [("AttnBackend(3)", False), ("AttnBackend.local", False),
                                           ("AttnBackend.auto", True), ("AttnBackend(1)", True)])
def test_3_attention_backend_as_logs_and_checkpoints_spell_it(tmp_path, backend, fused):
    # the arguments block of a core_v0.12.1 log prints the enum ("AttnBackend.auto"); a checkpoint's
    # args keep AttnBackend(5) (megatron/core/transformer/enums.py: flash=1 ... auto=5)
    args = tmp_path / "args.json"
    args.write_text('{"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "seq_length": 32, '
                    f'"position_embedding_type": "rope", "swiglu": true, "attention_backend": "{backend}"}}')
    report = audit(args, MIXTRAL_YAML)
    assert value(report, "megatron", "fused.flash_attention") is fused


# ---------------------------------------------------------------- 4. embedding dtype: compute, not storage
def test_4_an_fp32_embedding_table_is_compared_by_the_dtype_it_computes_in(tmp_path):
    # Qwen3 (mcore) keeps fp32 parameters and computes in bf16; MindFormers casts the looked-up rows to
    # compute_dtype (language_model_embedding.py:158), like Megatron's bf16 embedding: no risk.
    report = audit(MIXTRAL_GPU_SH, QWEN3_YAML)
    assert value(report, "mindformers", "precision.param_dtype") == "fp32"
    assert report.item("embedding_dtype").verdict == "PASS"
    # the legacy Llama-2 yaml with an fp32 table (embedding_init_type, the guide's setting) and bf16 compute
    yaml = edited(tmp_path, LLAMA2_YAML, '    compute_dtype: "float16"\n',
                  '    compute_dtype: "bfloat16"\n    embedding_init_type: "float32"\n')
    assert audit(LLAMA2_SH, yaml).item("embedding_dtype").verdict == "PASS"
    # a different compute dtype is still a difference
    assert audit(LLAMA2_SH, LLAMA2_YAML).item("embedding_dtype").verdict == "RISK"


# ---------------------------------------------------------------- 5. max_position_embeddings
def test_5_max_position_embeddings_only_bounds_the_rope_table():
    # Mixtral GPU script --max-position-embeddings 32768, the Qwen3 yaml 40960 or its seq_length: both
    # cover the sequences; not a "reduction order" risk
    report = audit(MIXTRAL_GPU_SH, QWEN3_YAML)
    item = report.item("max_position_embeddings")
    assert item.verdict == "PASS" and "only bounds the RoPE table" in item.message
    assert "reduction order" not in item.message


def test_5_a_table_shorter_than_the_sequence_is_a_risk(tmp_path):
    script = edited(tmp_path, MIXTRAL_GPU_SH, "--max-position-embeddings 32768", "--max-position-embeddings 1024")
    item = audit(script, QWEN3_YAML).item("max_position_embeddings")
    assert item.verdict == "RISK" and "Megatron 1024 < seq_length" in item.message


# ---------------------------------------------------------------- 6. dataset shuffle default
def test_6_blended_megatron_dataloader_does_not_shuffle_by_default():
    # the Qwen3 yaml uses BlendedMegatronDatasetDataLoader without `shuffle:`; mindformers 2.1.0
    # blended_megatron_dataloader.py:97 defaults it to False
    report = audit(MIXTRAL_GPU_SH, QWEN3_YAML)
    shuffle = report.mindformers["other.dataset_shuffle"]
    assert shuffle.value is False and "BlendedMegatronDatasetDataLoader" in shuffle.source
    assert report.item("dataset_shuffle").verdict == "PASS"


def test_6_a_mindrecord_loader_still_shuffles_when_told(tmp_path):
    # the legacy Llama-2 yaml's MindDataset says shuffle: True
    assert audit(LLAMA2_SH, LLAMA2_YAML).item("dataset_shuffle").verdict == "RISK"


# ---------------------------------------------------------------- 7. bias add without biases
def test_7_bias_add_dtype_is_not_applicable_without_biases():
    # MindSpeed Llama-2: --disable-bias-linear, no --add-qkv-bias; legacy Llama-2 yaml: no biases.
    # The compute dtypes differ (bf16 vs fp16): compute_dtype says so, bias_add has nothing to add.
    report = audit(LLAMA2_SH, LLAMA2_YAML)
    item = report.item("bias_add")
    assert item.verdict == "PASS" and "not applicable" in item.message
    assert report.item("compute_dtype").verdict == "MISMATCH"


def test_7_bias_add_dtype_is_compared_where_biases_exist(tmp_path):
    # the legacy Llama-2 yaml with Qwen-style q/k/v biases (qkv_has_bias): the bias adds run in fp16 there
    yaml = edited(tmp_path, LLAMA2_YAML, '    compute_dtype: "float16"\n',
                  '    compute_dtype: "float16"\n    qkv_has_bias: True\n')
    item = audit(LLAMA2_SH, yaml).item("bias_add")
    assert item.verdict == "RISK" and "Megatron bf16 vs MindFormers fp16" in item.message


# ---------------------------------------------------------------- 8. legacy MindFormers MoE and model classes
def test_8_topkrouterv2_takes_the_balancing_loss_from_aux_loss_types():
    # the Mixtral yaml sets aux_loss_factor: 0.05 and no aux_loss_types: MoEV2 / TopkRouterV2 read only
    # aux_loss_types / aux_loss_factors (moe.py TopkRouterV2 aux_loss_config), so no balancing loss runs
    report = audit(MIXTRAL_SH, MIXTRAL_YAML)
    aux = report.mindformers["moe.aux_loss_coeff"]
    assert aux.value == 0.0 and "aux_loss_factor is ignored" in aux.source


def test_8_expert_factor_from_aux_loss_factors(tmp_path):
    yaml = edited(tmp_path, MIXTRAL_YAML, "  aux_loss_factor: 0.05\n",
                  '  aux_loss_factor: 0.05\n  aux_loss_types: ["expert"]\n  aux_loss_factors: [0.02]\n')
    report = audit(MIXTRAL_SH, yaml)
    assert value(report, "mindformers", "moe.aux_loss_coeff") == 0.02
    # MindSpeed-LLM's script says --moe-aux-loss-coeff 0.02: aligned now (a RISK only because it is not 0)
    assert report.item("aux_loss").verdict == "RISK" and "both 0.02" in report.item("aux_loss").message
    assert audit(MIXTRAL_SH, MIXTRAL_YAML).item("aux_loss").verdict == "MISMATCH"   # 0.02 vs none


# Excerpt of mindspore-lab/mindformers r1.5.0 @ ece44cc4,
# research/deepseek3/deepseek3_671b/pretrain_deepseek3_671b.yaml (the model and moe sections, unchanged).
DEEPSEEK_V3_R15 = """\
run_mode: 'train'
optimizer:
  type: AdamW
  betas: [0.9, 0.95]
  eps: 1.e-8
lr_schedule:
  type: ConstantWarmUpLR
  learning_rate: 2.2e-4
  warmup_ratio: 0.02
  total_steps: -1 # -1 means it will load the total steps of the dataset
model:
  model_config:
    type: DeepseekV3Config
    auto_register: deepseek3_config.DeepseekV3Config
    batch_size: 1 # add for increase predict
    seq_length: 4096
    hidden_size:  7168
    num_layers: &num_layers 61
    num_heads: 128
    max_position_embeddings: 4096
    intermediate_size: 18432
    kv_lora_rank: 512
    n_kv_heads: 128
    q_lora_rank: 1536
    qk_rope_head_dim: 64
    v_head_dim: 128
    qk_nope_head_dim: 128
    vocab_size: 129280
    multiple_of: 256
    rms_norm_eps: 1.0e-6
    bos_token_id: 100000
    eos_token_id: 100001
    pad_token_id: 100001
    ignore_token_id: -100
    compute_dtype: "bfloat16"
    layernorm_compute_type: "float32"
    softmax_compute_type: "float32"
    rotary_dtype: "float32"
    router_dense_type: "float32"
    param_init_type: "float32"
    use_past: False
    extend_method: "None"
    use_flash_attention: True
    use_fused_swiglu: True
    use_fused_rope: True
    input_sliced_sig: True
    checkpoint_name_or_path: ""
    theta: 10000.0
    return_extra_loss: True
    mtp_depth: &mtp_depth 1
    mtp_loss_factor: 0.3
  arch:
    type: DeepseekV3ForCausalLM
    auto_register: deepseek3.DeepseekV3ForCausalLM
moe_config:
  expert_num: &expert_num 256
  expert_group_size: 8
  capacity_factor: 1.5
  aux_loss_factor: 0.05
  num_experts_chosen: 8
  routing_policy: "TopkRouterV2"
  balance_via_topk_bias: &balance_via_topk_bias True
  topk_bias_update_rate: &topk_bias_update_rate 0.001
  use_fused_ops_topkrouter: True
  shared_expert_num: 1
  routed_scaling_factor: 2.5
  norm_topk_prob: True
  first_k_dense_replace: 3
  moe_intermediate_size: 2048
  aux_loss_factors: [0.0001]
  aux_loss_types: ["expert"]
  expert_model_parallel: 1
  use_gating_sigmoid: True
  callback_moe_droprate: False
  use_gmm: True
  use_fused_ops_permute: True
  enable_gmm_safe_tokens: True
"""


@pytest.fixture()
def deepseek_v3(tmp_path):
    path = tmp_path / "pretrain_deepseek3_671b.yaml"
    path.write_text(DEEPSEEK_V3_R15)
    return path


def test_8_use_gmm_is_dropless_and_reads_the_expert_factor(deepseek_v3):
    report = audit(MIXTRAL_GPU_SH, deepseek_v3)
    assert value(report, "mindformers", "moe.capacity_factor") == -1.0      # MoEV3: no capacity
    assert value(report, "mindformers", "moe.pad_to_capacity") is False
    assert value(report, "mindformers", "moe.aux_loss_coeff") == 0.0001
    # the Mixtral GPU script is dropless too: the capacity and token-drop items agree
    assert report.item("capacity_factor").verdict == "PASS"
    token_drop = report.item("token_drop")
    assert token_drop.verdict == "PASS" and "dropless on both sides" in token_drop.message


def test_8_another_model_class_does_not_get_llamas_fixed_facts(deepseek_v3):
    report = audit(MIXTRAL_GPU_SH, deepseek_v3)
    assert value(report, "mindformers", "fused.rope") is True          # use_fused_rope: True is read
    assert value(report, "mindformers", "fused.swiglu") is True        # use_fused_swiglu: True is read
    for key in ("model.qk_norm", "model.hidden_dropout", "model.activation"):   # Llama facts do not apply
        found = report.mindformers[key]
        assert not found.known and "DeepseekV3ForCausalLM" in found.settle, key
    assert report.item("fused_rope").verdict == "MANUAL"   # fused on both (GPU vs Ascend kernels)
    assert report.item("qk_norm").verdict == "UNKNOWN"


# ---------------------------------------------------------------- 9. mcore model classes supply defaults
# Excerpt of mindspore-lab/mindformers master @ f52743ca, configs/qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml
# (use_legacy and the model_config section, unchanged): no qk_layernorm and no model seq_length.
QWEN3_MOE_MASTER = """\
use_legacy: False
model:
  model_config:
    model_type: "qwen3_moe"
    architectures: "Qwen3MoeForCausalLM"

    # model args
    offset: 0
    vocab_size: 151936
    hidden_size: 2048
    intermediate_size: 6144
    num_hidden_layers: 48
    max_position_embeddings: 40960
    hidden_act: 'silu'
    num_attention_heads: 32
    num_key_value_heads: 4
    head_dim: 128
    rms_norm_eps: 1.e-6
    add_bias_linear: False
    tie_word_embeddings: False
    use_flash_attention: True
    use_contiguous_weight_layout_attention: False
    input_sliced_sig: True

    # dropout args
    hidden_dropout: 0.0
    attention_dropout: 0.0

    # rope args
    position_embedding_type: "rope"
    rope_theta: 1000000

    # dtype args
    params_dtype: "float32"
    compute_dtype: "bfloat16"
    layernorm_compute_dtype: "float32"
    softmax_compute_dtype: "float32"
    rotary_dtype: "float32"
    initializer_range: 0.02

    # moe args
    moe_grouped_gemm: True
    num_experts: 128
    num_experts_per_tok: 8
    moe_intermediate_size: 768

    router_dense_type: "float32"
    gated_linear_unit: True
    norm_topk_prob: False
    moe_router_pre_softmax: True
    moe_token_drop_policy: probs
    routed_scaling_factor: 1.5

    router_aux_loss_coef: 0.001
    moe_aux_loss_coeff: 0.001
    moe_router_load_balancing_type: "gbs_aux_loss"
"""


def test_9_qwen3_moe_class_supplies_qk_norm_and_seq_length(tmp_path):
    yaml = tmp_path / "pretrain_qwen3_30b_a3b_4k.yaml"
    yaml.write_text(QWEN3_MOE_MASTER)
    report = audit(MIXTRAL_GPU_SH, yaml)
    qk_norm = report.mindformers["model.qk_norm"]      # modeling_qwen3_moe_train.py:56 qk_layernorm=True
    assert qk_norm.value is True and qk_norm.kind == "fixed"
    seq = report.mindformers["model.seq_length"]        # register_mf_model_parameter(seq_length=4096)
    assert seq.value == 4096 and seq.kind == "default" and "Qwen3MoeConfig" in seq.source
    assert report.item("qk_norm").verdict == "MISMATCH"      # the Mixtral script has no --qk-layernorm
    assert report.item("seq_length").verdict == "PASS"


def test_9_qwen3_forces_qk_norm_whatever_the_yaml_says(tmp_path):
    yaml = edited(tmp_path, QWEN3_YAML, "qk_layernorm: True", "qk_layernorm: False")
    assert audit(MIXTRAL_GPU_SH, yaml).mindformers["model.qk_norm"].value is True


def test_9_deepseek_v3_class_defaults(tmp_path):
    # a use_legacy: False yaml naming only the model type gets DeepseekV3Config's registered facts
    yaml = tmp_path / "deepseek_v3.yaml"
    yaml.write_text("use_legacy: False\nmodel:\n  model_config:\n    model_type: deepseek_v3\n")
    config = audit(MIXTRAL_GPU_SH, yaml).mindformers
    expected = {"model.num_attention_heads": 128, "moe.num_experts": 256, "moe.router_topk": 8,
                "model.activation": "swiglu", "model.norm_epsilon": 1.0e-6, "moe.fused_router": True,
                "model.seq_length": 4096}
    for key, want in expected.items():
        assert config[key].value == want, key
        assert "DeepseekV3Config" in config[key].source or "hidden_act" in config[key].source, key


# ---------------------------------------------------------------- 10. bash `if` decided by constants, FP8
# Excerpt of NVIDIA/Megatron-LM core_v0.13.0 @ c550cf6c, examples/llama/train_llama3_8b_h100_fp8.sh
# (lines unchanged; the data, logging and parallel blocks left out).
LLAMA3_FP8 = r'''#!/bin/bash
GPUS_PER_NODE=8
NUM_NODES=1
MICRO_BATCH_SIZE=1
GLOBAL_BATCH_SIZE=128
NUM_LAYERS=32
DTYPE="fp8"
SEQ_LENGTH=8192
MAX_POSITION_EMBEDDINGS=8192

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
)

MODEL_ARGS=(
    --use-mcore-models
    --num-layers $NUM_LAYERS
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --kv-channels 128
    --seq-length $SEQ_LENGTH
    --max-position-embeddings $MAX_POSITION_EMBEDDINGS
    --position-embedding-type rope
    --rotary-base 1000000
    --rotary-percent 1.0
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --swiglu
    --init-method-std 0.0134
    --attention-backend fused
    --apply-layernorm-1p
    --untie-embeddings-and-output-weights
    --disable-bias-linear
)

TRAINING_ARGS=(
    --micro-batch-size $MICRO_BATCH_SIZE
    --global-batch-size $GLOBAL_BATCH_SIZE
    --lr 0.00015
    --min-lr 0.00001
    --decoupled-lr 5.0e-4      # Specific to decoupled AdamW, ensure optimizer is compatible
    --decoupled-min-lr 4.5e-5  # Specific to decoupled AdamW
    --lr-decay-style cosine
    --clip-grad 1.0
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --bf16
    --grad-reduce-in-bf16
    --cross-entropy-loss-fusion
    --calculate-per-token-loss
)

# Conditional arguments based on DTYPE (FP8)
DTYPE_ARGS=()
if [[ "$DTYPE" == "fp8" ]]; then
    DTYPE_ARGS+=(
        "--fp8-format hybrid"
        "--fp8-amax-history-len 1024"
        "--fp8-amax-compute-algo max"
        "--fp8-param-gather"
    )
fi

torchrun ${DISTRIBUTED_ARGS[@]} \
    "$PRETRAIN_SCRIPT_PATH" \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${DTYPE_ARGS[@]}
'''.replace('"$PRETRAIN_SCRIPT_PATH"', "pretrain_gpt.py")  # the script sets PRETRAIN_SCRIPT_PATH="pretrain_gpt.py"


def test_10_an_if_decided_by_the_scripts_constants_is_evaluated(tmp_path):
    script = tmp_path / "train_llama3_8b_h100_fp8.sh"
    script.write_text(LLAMA3_FP8)
    report = audit(script, QWEN3_YAML)
    fp8 = report.megatron["precision.fp8"]
    assert fp8.value == "hybrid" and fp8.kind == "set"
    assert report.item("fp8").verdict == "MISMATCH"        # MindFormers has no FP8 training
    assert value(report, "megatron", "precision.compute_dtype") == "bf16"
    # --grad-reduce-in-bf16 (arguments.py:591) turns off fp32 accumulation and reduction
    assert value(report, "megatron", "precision.grad_reduce_dtype") == "bf16"


def test_10_the_branch_not_taken_is_skipped_and_an_else_is_taken(tmp_path):
    script = tmp_path / "train_llama3_8b_h100_fp8.sh"
    script.write_text(LLAMA3_FP8.replace('DTYPE="fp8"', 'DTYPE="bf16"').replace(
        "fi\n", "else\n    DTYPE_ARGS+=(--seed 42)\nfi\n"))
    report = audit(script, QWEN3_YAML)
    assert value(report, "megatron", "precision.fp8") == "none"
    assert value(report, "megatron", "other.seed") == 42


def test_10_an_undecided_if_applies_only_what_every_branch_sets_alike(tmp_path):
    script = tmp_path / "undecided.sh"
    script.write_text(LLAMA3_FP8.replace('DTYPE="fp8"', 'DTYPE=$PRECISION').replace(
        'DTYPE_ARGS+=(', 'SEED=(--seed 7)\n    DTYPE_ARGS+=(').replace(
        "fi\n", "else\n    SEED=(--seed 7)\n    DTYPE_ARGS=(--fp8-format e4m3)\nfi\n").replace(
        "${DTYPE_ARGS[@]}", "${DTYPE_ARGS[@]} ${SEED[@]}"))
    report = audit(script, QWEN3_YAML)
    assert value(report, "megatron", "other.seed") == 7        # the same in both branches: decided
    assert not report.megatron["precision.fp8"].known or value(report, "megatron", "precision.fp8") == "none"


# ---------------------------------------------------------------- 11. total_steps: -1
def test_11_verdicts_on_the_assumed_run_length_say_so_and_never_pass():
    # the Mixtral yaml says total_steps: -1 (known only at run time); the run length is Megatron's 2000
    report = audit(MIXTRAL_SH, MIXTRAL_YAML)
    assert report.mindformers["train.steps"].kind == "assumed"
    steps = report.item("train_steps")
    assert steps.verdict == "UNKNOWN" and "assumed 2000 steps" in steps.message
    for item_id in ("warmup", "lr_schedule"):
        assert "run length assumed" in report.item(item_id).message, item_id
    assert "assumed" not in report.item("learning_rate").message     # does not depend on the run length


def test_11_a_stated_total_steps_is_checked_plainly(tmp_path):
    yaml = edited(tmp_path, MIXTRAL_YAML, "total_steps: -1", "total_steps: 2000")
    steps = audit(MIXTRAL_SH, yaml).item("train_steps")
    assert steps.verdict == "PASS" and "assumed" not in steps.message


# ---------------------------------------------------------------- 12. min lr against a constant schedule
def test_12_min_lr_is_not_compared_against_a_schedule_that_never_decays(deepseek_v3):
    # the DeepSeek-V3 r1.5.0 yaml: ConstantWarmUpLR without lr_end; the Mixtral script decays to --min-lr 1e-6
    report = audit(MIXTRAL_SH, deepseek_v3)
    item = report.item("min_lr")
    assert item.verdict == "PASS" and "never decays" in item.message
    assert report.item("decay_style").verdict == "MISMATCH"   # the schedules themselves differ, said there


def test_12_min_lr_still_compared_between_decaying_schedules():
    assert audit(LLAMA2_SH, LLAMA2_YAML).item("min_lr").verdict == "MISMATCH"


# ---------------------------------------------------------------- 13. use_fused_ops_topkrouter
def test_13_permute_fusion_is_not_the_router_and_the_topkrouter_op_is_recommended():
    # MindSpeed-LLM's Mixtral script says --moe-permute-fusion (token permutation, arguments.py:2552), not
    # a fused router; the Mixtral yaml: use_fused_ops_topkrouter: False with enable_sdrop: True, capacity 1.1
    report = audit(MIXTRAL_SH, MIXTRAL_YAML)
    assert report.item("fused_router").verdict == "PASS"       # neither side fuses the top-k selection
    dispatch = report.item("topkrouter_dispatch")
    assert dispatch.verdict == "RISK" and "use_fused_ops_topkrouter: True" in dispatch.message


def test_13_the_guides_topkrouter_setting_passes(tmp_path):
    yaml = edited(tmp_path, MIXTRAL_YAML, "use_fused_ops_topkrouter: False", "use_fused_ops_topkrouter: True")
    report = audit(MIXTRAL_SH, yaml)
    assert value(report, "megatron", "moe.fused_router") is False
    assert report.item("fused_router").verdict == "PASS"
    assert report.item("topkrouter_dispatch").verdict == "PASS"


# ---------------------------------------------------------------- 14. guide fixes
def test_14_mindspeed_determinism_is_npu_deterministic(tmp_path):
    # MindSpeed registers --npu-deterministic (store_true); --deterministic-mode is Megatron's GPU switch
    script = edited(tmp_path, LLAMA2_SH, "    --use-flash-attn \\\n", "    --use-flash-attn \\\n    --npu-deterministic \\\n")
    yaml = edited(tmp_path, LLAMA2_YAML, "context:\n", 'context:\n  deterministic: "ON"\n')
    report = audit(script, yaml)
    assert value(report, "megatron", "other.deterministic") is True
    assert report.item("deterministic").verdict == "PASS"
    item = audit(LLAMA2_SH, LLAMA2_YAML).item("deterministic")
    assert item.verdict == "RISK" and "--npu-deterministic" in item.fix["megatron"]


def test_14_high_precision_mode_names_ge_op_select_implmode(tmp_path):
    yaml = edited(tmp_path, LLAMA2_YAML, "context:\n",
                  'context:\n  ascend_config:\n    ge_options:\n      global:\n        ge.opSelectImplmode: "high_precision"\n')
    report = audit(LLAMA2_SH, yaml)
    assert value(report, "mindformers", "precision.op_select_impl_mode") == "high_precision"
    item = report.item("high_precision_mode")
    assert item.verdict == "MANUAL" and "ge.opSelectImplmode: high_precision" in item.message
    assert "--moe-router-dtype" in report.item("router_dtype").why    # Megatron's router dtype is configurable


# ---------------------------------------------------------------- 15. padded vocabulary from the tokenizer
def test_15_padded_vocabulary_says_which_tokenizer_sizes_match(tmp_path):
    # MindSpeed Llama-2: the tokenizer decides (no --vocab-size), --make-vocab-size-divisible-by 1, TP 1;
    # MindFormers vocab_size 32000: equal for a tokenizer of exactly 32000 tokens (Llama-2's)
    item = audit(LLAMA2_SH, LLAMA2_YAML).item("vocabulary")
    assert item.verdict == "MANUAL" and "exactly 32000 tokens" in item.message
    # with Megatron's default divisor 128: any tokenizer of 31873..32000 tokens pads to 32000
    script = edited(tmp_path, LLAMA2_SH, "--make-vocab-size-divisible-by 1 ", "--make-vocab-size-divisible-by 128 ")
    item = audit(script, LLAMA2_YAML).item("vocabulary")
    assert item.verdict == "MANUAL" and "31873..32000 tokens" in item.message


def test_15_a_vocabulary_no_multiple_can_reach_is_a_mismatch(tmp_path):
    script = edited(tmp_path, LLAMA2_SH, "--make-vocab-size-divisible-by 1 ", "--make-vocab-size-divisible-by 128 ")
    yaml = edited(tmp_path, LLAMA2_YAML, "vocab_size: 32000", "vocab_size: 32001")
    item = audit(script, yaml).item("vocabulary")
    assert item.verdict == "MISMATCH" and "multiple of 128" in item.message


# ---------------------------------------------------------------- missing items: initialisation std
def test_missing_init_method_std_legacy_default_differs_from_megatron():
    # Megatron default 0.02 (arguments.py:1810); legacy LlamaConfig init_method_std 0.01 (llama_config.py:174)
    report = audit(GPT_YAML, LLAMA2_YAML)          # gpt_config.yaml: init_method_std: 0.02
    item = report.item("init_method_std")
    assert item.verdict == "RISK" and "Megatron 0.02 vs MindFormers 0.01" in item.message
    assert audit(LLAMA2_SH, LLAMA2_YAML).item("init_method_std").verdict == "PASS"   # --init-method-std 0.01
    # the Qwen3 yaml states initializer_range: 0.02, the mcore name of the same setting
    assert audit(GPT_YAML, QWEN3_YAML).item("init_method_std").verdict == "PASS"


# ---------------------------------------------------------------- missing items: training options with no MindFormers twin
def test_missing_llama3_fp8_options_without_a_mindformers_counterpart(tmp_path):
    script = tmp_path / "train_llama3_8b_h100_fp8.sh"
    script.write_text(LLAMA3_FP8)
    report = audit(script, QWEN3_YAML)
    assert value(report, "megatron", "optimizer.decoupled_lr") == "5.0e-4"
    assert report.item("decoupled_lr").verdict == "MISMATCH"          # no grouped_lr_schedule in the Qwen3 yaml
    assert report.item("per_token_loss").verdict == "MISMATCH"        # --calculate-per-token-loss vs default False
    assert report.item("zero_centered_gamma").verdict == "MISMATCH"   # --apply-layernorm-1p


def test_missing_per_token_loss_on_both_sides_passes(tmp_path):
    script = tmp_path / "train_llama3_8b_h100_fp8.sh"
    script.write_text(LLAMA3_FP8)
    yaml = edited(tmp_path, QWEN3_YAML, "use_legacy: False", "use_legacy: False\ncalculate_per_token_loss: True")
    assert audit(script, yaml).item("per_token_loss").verdict == "PASS"


def test_missing_rampup_batch_size_from_the_gpt_yaml():
    # examples/gpt3/gpt_config.yaml (core_v0.12.1) ramps the batch up: MindFormers cannot
    item = audit(GPT_YAML, QWEN3_YAML).item("rampup_batch_size")
    assert item.verdict == "MISMATCH" and "[32, 32, 65324160]" in item.message


# ---------------------------------------------------------------- missing items: MoE router math, expert FFN, MTP
def test_missing_moe_router_math_from_deepseek_v3(deepseek_v3):
    # DeepSeek-V3 r1.5.0: sigmoid gating, routed_scaling_factor 2.5, balance_via_topk_bias, experts of
    # moe_intermediate_size 2048, mtp_depth 1 / mtp_loss_factor 0.3; the Mixtral GPU script: none of these
    report = audit(MIXTRAL_GPU_SH, deepseek_v3)
    config = report.mindformers
    assert config["moe.score_function"].value == "sigmoid"
    assert config["moe.topk_scaling_factor"].value == 2.5
    assert config["moe.expert_bias"].value is True
    assert config["moe.expert_ffn_size"].value == 2048
    assert config["mtp.num_layers"].value == 1 and config["mtp.loss_factor"].value == 0.3
    for item_id in ("score_function", "topk_scaling_factor", "expert_bias", "expert_ffn_size", "mtp"):
        assert report.item(item_id).verdict == "MISMATCH", item_id


def test_missing_moe_router_math_agrees_on_the_mixtral_pair():
    report = audit(MIXTRAL_SH, MIXTRAL_YAML)
    # LlamaForCausalLM's experts and shared expert use config.intermediate_size (llama.py:206, llama_layer.py:811)
    assert report.mindformers["moe.expert_ffn_size"].value == 14336
    for item_id in ("expert_ffn_size", "score_function", "topk_scaling_factor", "group_limited_routing",
                    "expert_bias", "load_balancing", "z_loss", "moe_layers", "mtp"):
        assert report.item(item_id).verdict == "PASS", (item_id, report.item(item_id).message)


def test_missing_mcore_balancing_loss_default_is_sub_seq_aux_loss(tmp_path):
    # mcore MindFormers moe_router_load_balancing_type defaults to sub_seq_aux_loss (transformer_config.py:1860);
    # the Qwen3-MoE master yaml states gbs_aux_loss, Megatron's default is aux_loss
    yaml = tmp_path / "pretrain_qwen3_30b_a3b_4k.yaml"
    yaml.write_text(QWEN3_MOE_MASTER.replace('    moe_router_load_balancing_type: "gbs_aux_loss"\n', ""))
    report = audit(MIXTRAL_GPU_SH, yaml)
    assert report.mindformers["moe.load_balancing"].value == "sub_seq_aux_loss"
    assert report.item("load_balancing").verdict == "MISMATCH"


def test_missing_mla_dimensions(tmp_path):
    # DeepseekV3Config registers multi_latent_attention=True with q_lora_rank 1536, kv_lora_rank 512,
    # qk_nope 128 / qk_rope 64 / v 128; the Mixtral GPU script has standard attention
    yaml = tmp_path / "deepseek_v3.yaml"
    yaml.write_text("use_legacy: False\nmodel:\n  model_config:\n    model_type: deepseek_v3\n")
    report = audit(MIXTRAL_GPU_SH, yaml)
    assert report.mindformers["model.mla_q_lora_rank"].value == 1536
    assert report.mindformers["model.mla_qk_pos_emb_head_dim"].value == 64
    assert report.item("mla").verdict == "MISMATCH"
    assert audit(MIXTRAL_SH, MIXTRAL_YAML).item("mla").verdict == "PASS"   # no MLA on either side
    assert audit(MIXTRAL_SH, MIXTRAL_YAML).item("data_check").verdict == "MANUAL"


def test_missing_rope_scaling(tmp_path):
    # a Llama-3.1-style yaml: the Qwen3 fixture with an HF rope_scaling mapping; Megatron without --use-rope-scaling
    yaml = edited(tmp_path, QWEN3_YAML, 'rotary_dtype: "float32"',
                  'rotary_dtype: "float32"\n    rope_scaling: {rope_type: llama3, factor: 8.0, '
                  'original_max_position_embeddings: 8192}')
    report = audit(MIXTRAL_GPU_SH, yaml)
    assert report.mindformers["model.rope_scaling"].value == "llama3"
    assert report.item("rope_scaling").verdict == "MISMATCH"
    script = edited(tmp_path, MIXTRAL_GPU_SH, "    --position-embedding-type rope\n",
                    "    --position-embedding-type rope\n    --use-rope-scaling\n")
    # the factors are compared too (issue 12 rest): upstream's Llama-3 scaling uses factor 8 (default) and
    # original max positions 8192 (core_v0.12.1 rotary_pos_embedding.py:89), as the yaml states
    assert audit(script, yaml).item("rope_scaling").verdict == "PASS"
