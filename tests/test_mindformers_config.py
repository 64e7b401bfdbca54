"""MindFormers yaml configs (legacy LlamaConfig and use_legacy: False) through read_config +
resolve: derivations, defaults, anchors, MoE, batch sizes, schedules and errors (docs/framework-facts.md §2).

Expected numbers are computed here from the documented formulas, never copied from a run.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from workbench.config import read_config, resolve
from workbench.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "fixtures" / "configs"
FIXTURES = SHARED / "mindformers"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason=f"shared fixtures not found at {FIXTURES}")

LLAMA2 = FIXTURES / "legacy_llama2_pretrain_llama2_7b.yaml"
MIXTRAL = FIXTURES / "legacy_moe_mixtral_pretrain_mixtral-8x7b.yaml"
QWEN3 = FIXTURES / "mcore_qwen3_pretrain_qwen3_32b_4k.yaml"
MEGATRON_YAML_CFG = SHARED / "megatron" / "megatron_core_v0.12.1_gpt_config.yaml"


# ------------------------------------------------------------------------- helpers
def write_yaml(tmp_path: Path, text: str, name: str = "mf.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def legacy(tmp_path: Path, model_config: str = "", top: str = "") -> Path:
    """A minimal legacy (LlamaForCausalLM) yaml; ``model_config`` lines go under model.model_config."""
    body = textwrap.indent(textwrap.dedent(model_config).strip("\n"), "    ")
    text = (textwrap.dedent(top).strip("\n") + "\n" if top.strip() else "") + \
        "model:\n  model_config:\n    type: LlamaConfig\n" + (body + "\n" if body else "") + \
        "  arch:\n    type: LlamaForCausalLM\n"
    path = tmp_path / "legacy.yaml"
    path.write_text(text)
    return path


def mcore(tmp_path: Path, model_config: str = "", top: str = "") -> Path:
    body = textwrap.indent(textwrap.dedent(model_config).strip("\n"), "    ")
    text = "use_legacy: False\n" + (textwrap.dedent(top).strip("\n") + "\n" if top.strip() else "") + \
        "model:\n  model_config:\n    model_type: qwen3\n" + (body + "\n" if body else "")
    path = tmp_path / "mcore.yaml"
    path.write_text(text)
    return path


def config_of(path: Path):
    return resolve(read_config(path, "mindformers"))


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def legacy_ffn(hidden: int, multiple_of: int = 256, multiplier: float | None = None) -> int:
    """LlamaFeedForward: 4h, × (multiplier + 0.01), × 2/3, rounded up to multiple_of."""
    hidden_dim = 4 * hidden
    if multiplier is not None:
        hidden_dim = int((multiplier + 0.01) * hidden_dim)
    hidden_dim = int(2 * hidden_dim / 3)
    return multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)


# ------------------------------------------------------------------------- legacy FFN
def test_legacy_ffn_llama2_7b(tmp_path):
    item = config_of(legacy(tmp_path, "hidden_size: 4096\nnum_heads: 32\nmultiple_of: 256"))["model.ffn_hidden_size"]
    assert (item.value, item.kind) == (legacy_ffn(4096, 256), "derived")
    assert item.value == 11008                                  # the published Llama2-7B size


def test_legacy_ffn_with_ffn_dim_multiplier(tmp_path):
    path = legacy(tmp_path, "hidden_size: 4096\nnum_heads: 32\nmultiple_of: 1024\nffn_dim_multiplier: 1.3")
    item = config_of(path)["model.ffn_hidden_size"]
    assert (item.value, item.kind) == (legacy_ffn(4096, 1024, 1.3), "derived")
    assert item.value == 14336                                  # the published Llama3-8B size


@pytest.mark.parametrize("hidden, multiple_of", [(64, 16), (5120, 256), (2048, 128)])
def test_legacy_ffn_rounds_up_to_multiple_of(tmp_path, hidden, multiple_of):
    path = legacy(tmp_path, f"hidden_size: {hidden}\nnum_heads: 8\nmultiple_of: {multiple_of}")
    assert config_of(path)["model.ffn_hidden_size"].value == legacy_ffn(hidden, multiple_of)


def test_legacy_intermediate_size_wins(tmp_path):
    path = legacy(tmp_path, "hidden_size: 4096\nnum_heads: 32\nintermediate_size: 12345\nffn_dim_multiplier: 1.3")
    item = config_of(path)["model.ffn_hidden_size"]
    assert (item.value, item.kind) == (12345, "set")
    assert f"legacy.yaml:{line_of(path, 'intermediate_size')}" in item.source


def test_legacy_defaults_fp16_and_kv_heads_equal_heads(tmp_path):
    config = config_of(legacy(tmp_path, "hidden_size: 256\nnum_heads: 8"))
    assert config.generation == "legacy" and config.form == "mindformers-legacy"
    assert config["model.num_kv_heads"].value == 8
    assert (config["precision.param_dtype"].value, config["precision.param_dtype"].kind) == ("fp16", "default")
    assert config["precision.compute_dtype"].value == "fp16"
    assert config["model.norm_epsilon"].value == pytest.approx(1e-5)


# ------------------------------------------------------------------------- anchors and aliases
def test_value_reached_only_through_an_alias(tmp_path):
    path = write_yaml(tmp_path, """
        shared_model: &shared
          hidden_size: 512
          num_heads: 8
          num_layers: 3
        model:
          model_config: *shared
          arch:
            type: LlamaForCausalLM
    """)
    config = config_of(path)
    item = config["model.num_layers"]
    assert (item.value, item.kind) == (3, "set")
    assert "model.model_config.num_layers" in item.source
    assert f"mf.yaml:{line_of(path, 'num_layers: 3')}" in item.source
    assert config["model.head_dim"].value == 512 // 8


def test_merge_key_override_wins_and_names_its_own_line(tmp_path):
    path = write_yaml(tmp_path, """
        base: &base
          hidden_size: 512
          num_heads: 8
        model:
          model_config:
            <<: *base
            hidden_size: 1024
          arch:
            type: LlamaForCausalLM
    """)
    config = config_of(path)
    assert config["model.hidden_size"].value == 1024
    assert config["model.num_attention_heads"].value == 8
    assert f"mf.yaml:{line_of(path, 'hidden_size: 1024')}" in config["model.hidden_size"].source


# ------------------------------------------------------------------------- MoE
def test_legacy_moe_config_block_maps_to_moe_keys(tmp_path):
    # issue 12: MoEV2 / TopkRouterV2 take the balancing loss from aux_loss_types / aux_loss_factors and
    # ignore aux_loss_factor (0.05 here must not be read)
    path = legacy(tmp_path, "hidden_size: 256\nnum_heads: 8", top="""
        moe_config:
          expert_num: 4
          num_experts_chosen: 2
          capacity_factor: 1.5
          aux_loss_factor: 0.05
          aux_loss_types: ["expert"]
          aux_loss_factors: [0.01]
          enable_sdrop: True
          router_dense_type: "float32"
          routing_policy: "TopkRouterV2"
    """)
    config = config_of(path)
    expected = {"moe.num_experts": 4, "moe.router_topk": 2, "moe.capacity_factor": 1.5,
                "moe.aux_loss_coeff": 0.01, "moe.token_drop_policy": "position", "moe.router_dtype": "fp32",
                "moe.routing_policy": "TopkRouterV2"}
    for key, value in expected.items():
        assert config[key].value == pytest.approx(value) if isinstance(value, float) else config[key].value == value, key
        assert config[key].kind == "set" and "moe_config." in config[key].source, key


def test_legacy_without_moe_config_is_dense(tmp_path):
    config = config_of(legacy(tmp_path, "hidden_size: 256\nnum_heads: 8"))
    assert config["moe.num_experts"].value == 1


@needs_fixtures
def test_legacy_mixtral_fixture():
    config = config_of(MIXTRAL)
    assert config["moe.num_experts"].value == 8
    assert config["moe.router_topk"].value == 2
    assert config["moe.token_drop_policy"].value == "position"       # enable_sdrop: True
    assert config["model.num_kv_heads"].value == 8
    assert config["model.ffn_hidden_size"].value == 14336
    # pp = 2 > 1: batch_size · dp · micro_batch_num · interleave
    assert config["train.global_batch_size"].value == 1 * 8 * 16 * 1
    assert config["optimizer.bias_correction"].value is True          # AdamW
    assert (config["optimizer.beta1"].value, config["optimizer.beta2"].value) == (0.9, 0.95)


# ------------------------------------------------------------------------- mcore (use_legacy: False)
@needs_fixtures
def test_mcore_qwen3_fixture():
    config = config_of(QWEN3)
    assert config.generation == "mcore"
    expected = {"model.num_layers": 64, "model.num_kv_heads": 8, "model.head_dim": 128,
                "model.activation": "swiglu", "fused.flash_attention": True, "model.qk_norm": True,
                "model.untie_embeddings": True, "precision.compute_dtype": "bf16",
                "precision.param_dtype": "fp32", "model.normalization": "rmsnorm"}
    for key, value in expected.items():
        assert config[key].value == value, key
    assert "num_hidden_layers" in config["model.num_layers"].source
    assert config["precision.residual_dtype"].value == "fp32"         # fp32_residual_connection: True


def test_mcore_flash_attention_defaults_true(tmp_path):
    item = config_of(mcore(tmp_path, "num_hidden_layers: 2\nhidden_size: 64\nnum_attention_heads: 4"))["fused.flash_attention"]
    assert (item.value, item.kind) == (True, "default")


def test_legacy_flash_attention_defaults_false(tmp_path):
    item = config_of(legacy(tmp_path, "hidden_size: 64\nnum_heads: 4"))["fused.flash_attention"]
    assert (item.value, item.kind) == (False, "default")


def test_mcore_defaults_bf16_compute_fp32_params_and_dropout(tmp_path):
    config = config_of(mcore(tmp_path, "num_hidden_layers: 2\nhidden_size: 64\nnum_attention_heads: 4"))
    assert config["precision.compute_dtype"].value == "bf16"
    assert config["precision.param_dtype"].value == "fp32"
    assert config["model.hidden_dropout"].value == pytest.approx(0.1)  # mcore default 0.1!
    # issue 12: Qwen3Config (model_type qwen3) supplies num_key_value_heads=32 when the yaml is silent
    assert config["model.num_kv_heads"].value == 32 and config["model.num_kv_heads"].kind == "default"


@pytest.mark.parametrize("act, gated, expected", [("swiglu", None, "swiglu"), ("silu", True, "swiglu"),
                                                  ("gelu", False, "gelu"), ("gelu", True, "geglu"),
                                                  ("gelu", None, "geglu")])  # Qwen3Config: gated_linear_unit=True
def test_mcore_activation(tmp_path, act, gated, expected):
    lines = f"hidden_size: 64\nnum_attention_heads: 4\nhidden_act: {act}"
    if gated is not None:
        lines += f"\ngated_linear_unit: {gated}"
    assert config_of(mcore(tmp_path, lines))["model.activation"].value == expected


# ------------------------------------------------------------------------- global batch size
BATCH, DP, INTERLEAVE, GAS, MBN = 2, 3, 2, 5, 7


@pytest.mark.parametrize("pipeline,global_batch,micro_batches", [
    (1, BATCH * DP * INTERLEAVE * GAS, GAS),   # pp = 1: gradient_accumulation_steps
    (2, BATCH * DP * MBN * INTERLEAVE, MBN),   # pp > 1: micro_batch_num
])
def test_global_batch_formula_depends_on_pipeline(tmp_path, pipeline, global_batch, micro_batches):
    path = legacy(tmp_path, "hidden_size: 64\nnum_heads: 4", top=f"""
        runner_config:
          batch_size: {BATCH}
          gradient_accumulation_steps: {GAS}
        parallel_config:
          data_parallel: {DP}
          pipeline_stage: {pipeline}
          micro_batch_num: {MBN}
        micro_batch_interleave_num: {INTERLEAVE}
    """)
    config = config_of(path)
    assert (config["train.global_batch_size"].value, config["train.global_batch_size"].kind) == (global_batch, "derived")
    assert config["parallel.micro_batches"].value == micro_batches


# ------------------------------------------------------------------------- schedule and optimizer
def test_total_steps_minus_one_is_unknown(tmp_path):
    path = legacy(tmp_path, "hidden_size: 64\nnum_heads: 4", top="""
        lr_schedule:
          type: CosineWithWarmUpLR
          learning_rate: 1.e-4
          total_steps: -1
    """)
    item = config_of(path)["train.steps"]
    assert item.kind == "unknown" and item.value is None
    assert "total_steps" in item.settle


def test_warmup_ratio_times_total_steps(tmp_path):
    total, ratio = 333, 0.1
    path = legacy(tmp_path, "hidden_size: 64\nnum_heads: 4", top=f"""
        lr_schedule:
          type: CosineWithWarmUpLR
          learning_rate: 1.e-4
          warmup_ratio: {ratio}
          warmup_steps: 99
          total_steps: {total}
    """)
    config = config_of(path)
    assert config["train.steps"].value == total
    assert config["lr.warmup_steps"].value == int(total * ratio)      # the ratio overrides warmup_steps
    assert config["lr.decay_steps"].value == total - int(total * ratio)


def test_warmup_steps_without_ratio(tmp_path):
    path = legacy(tmp_path, "hidden_size: 64\nnum_heads: 4", top="""
        lr_schedule:
          type: LinearWithWarmUpLR
          learning_rate: 1.e-4
          warmup_steps: 12
          total_steps: 100
    """)
    config = config_of(path)
    assert config["lr.warmup_steps"].value == 12
    assert config["lr.decay_style"].value == "linear"


def test_fp32state_adam_has_no_bias_correction_and_eps_1e6_by_default(tmp_path):
    path = legacy(tmp_path, "hidden_size: 64\nnum_heads: 4", top="""
        optimizer:
          type: FP32StateAdamWeightDecay
          beta1: 0.9
          beta2: 0.95
    """)
    config = config_of(path)
    assert config["optimizer.bias_correction"].value is False
    eps = config["optimizer.eps"]
    assert (eps.value, eps.kind) == (pytest.approx(1e-6), "default")
    assert config["optimizer.beta2"].value == pytest.approx(0.95)


def test_adamw_has_bias_correction_and_betas_list(tmp_path):
    path = legacy(tmp_path, "hidden_size: 64\nnum_heads: 4", top="""
        optimizer:
          type: AdamW
          betas: [0.8, 0.97]
    """)
    config = config_of(path)
    assert config["optimizer.bias_correction"].value is True
    assert config["optimizer.beta1"].value == pytest.approx(0.8)
    assert config["optimizer.beta2"].value == pytest.approx(0.97)
    assert "optimizer.betas.1" in config["optimizer.beta2"].source
    assert config["optimizer.eps"].value == pytest.approx(1e-8)


def test_clip_grad_zero_when_use_clip_grad_absent(tmp_path):
    item = config_of(legacy(tmp_path, "hidden_size: 64\nnum_heads: 4"))["optimizer.clip_grad"]
    assert item.value == 0.0 and item.kind == "default"


def test_clip_grad_from_max_grad_norm(tmp_path):
    path = legacy(tmp_path, "hidden_size: 64\nnum_heads: 4", top="""
        runner_wrapper:
          type: MFTrainOneStepCell
          use_clip_grad: True
          max_grad_norm: 0.5
    """)
    assert config_of(path)["optimizer.clip_grad"].value == pytest.approx(0.5)


@needs_fixtures
def test_legacy_llama2_fixture():
    config = config_of(LLAMA2)
    assert config["model.ffn_hidden_size"].value == legacy_ffn(4096, 256)
    assert config["optimizer.bias_correction"].value is False        # FP32StateAdamWeightDecay
    assert config["optimizer.eps"].value == pytest.approx(1e-8)       # given explicitly
    assert config["train.steps"].kind == "unknown"                    # total_steps: -1
    # pp = 1: batch_size · dp · interleave · gradient_accumulation_steps
    assert config["train.global_batch_size"].value == 1 * 8 * 1 * 8
    assert config["runtime.hardware"].value == "ascend"
    assert config["optimizer.clip_grad"].value == pytest.approx(1.0)


# ------------------------------------------------------------------------- errors
def test_wrong_type_names_key_path_and_line(tmp_path):
    path = legacy(tmp_path, 'hidden_size: 64\nnum_heads: 4\nnum_layers: "abc"')
    with pytest.raises(InputError) as error:
        config_of(path)
    text = str(error.value)
    assert "model.model_config.num_layers" in text and "abc" in text
    assert f"legacy.yaml:{line_of(path, 'num_layers')}" in text


def test_yaml_syntax_error_names_line(tmp_path):
    path = write_yaml(tmp_path, "model:\n  model_config:\n    hidden_size: [64\n    num_heads: 4\n")
    with pytest.raises(InputError) as error:
        read_config(path, "mindformers")
    assert "syntax" in str(error.value).lower()
    assert "mf.yaml:" in str(error.value)
    assert str(error.value).split("mf.yaml:")[1][:1].isdigit()


def test_empty_file_is_input_error(tmp_path):
    path = write_yaml(tmp_path, "# nothing here\n")
    with pytest.raises(InputError, match="empty"):
        read_config(path, "mindformers")


@pytest.mark.skipif(not MEGATRON_YAML_CFG.is_file(), reason=f"shared fixture not found at {MEGATRON_YAML_CFG}")
def test_megatron_yaml_cfg_given_as_mindformers_is_rejected():
    with pytest.raises(InputError, match="Megatron"):
        read_config(MEGATRON_YAML_CFG, "mindformers")


def test_megatron_flat_args_given_as_mindformers_is_rejected(tmp_path):
    path = write_yaml(tmp_path, "num_layers: 2\nhidden_size: 64\n")
    with pytest.raises(InputError, match="Megatron"):
        read_config(path, "mindformers")


def test_use_legacy_must_be_boolean(tmp_path):
    path = write_yaml(tmp_path, 'use_legacy: "maybe"\nmodel:\n  model_config:\n    hidden_size: 64\n')
    with pytest.raises(InputError) as error:
        read_config(path, "mindformers")
    assert "use_legacy" in str(error.value)
