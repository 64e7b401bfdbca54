"""Verdict logic of the CheckList rules, on canonical configs built in the test."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.audit.checklist import load_checklist
from workbench.audit.engine import evaluate
from workbench.audit.rules import RuleContext
from workbench.config.canonical import CanonicalValue, TrainingConfig


def config(framework: str, **values) -> TrainingConfig:
    canonical = {}
    for name, value in values.items():
        key = name.replace("__", ".")
        canonical[key] = (CanonicalValue(key, None, "unknown", "", "set --it") if value is ...
                          else CanonicalValue(key, value, "set", f"{key} (test)"))
    return TrainingConfig(framework, "test", Path("test"), canonical)


def item(item_id: str):
    return next(i for section in load_checklist() for i in section.items if i.id == item_id)


def verdict(item_id: str, megatron: dict, mindformers: dict, same_hardware: bool = True):
    ctx = RuleContext(config("megatron", **megatron), config("mindformers", **mindformers), same_hardware)
    result = evaluate(item(item_id), ctx)
    return result.verdict, result.message


def test_equal_pass_mismatch_unknown():
    assert verdict("num_layers", {"model__num_layers": 2}, {"model__num_layers": 2})[0] == "PASS"
    assert verdict("num_layers", {"model__num_layers": 2}, {"model__num_layers": 4}) == (
        "MISMATCH", "Megatron 2 vs MindFormers 4")
    state, message = verdict("num_layers", {"model__num_layers": ...}, {"model__num_layers": 4})
    assert state == "UNKNOWN" and "set --it" in message


def test_equal_with_recommendation_is_a_risk_when_aligned_elsewhere():
    assert verdict("adam_beta2", {"optimizer__beta2": 0.999}, {"optimizer__beta2": 0.999})[0] == "RISK"
    assert verdict("adam_beta2", {"optimizer__beta2": 0.95}, {"optimizer__beta2": 0.95})[0] == "PASS"


def test_dropout_must_be_zero_on_both():
    assert verdict("hidden_dropout", {"model__hidden_dropout": 0.1}, {"model__hidden_dropout": 0.1})[0] == "MISMATCH"
    assert verdict("hidden_dropout", {"model__hidden_dropout": 0.0}, {"model__hidden_dropout": 0.0})[0] == "PASS"


def test_warning_severity_gives_risk():
    assert verdict("seed", {"other__seed": 1}, {"other__seed": 2})[0] == "RISK"


@pytest.mark.parametrize("megatron,mindformers,same,expected", [
    (True, True, True, "PASS"), (True, True, False, "MANUAL"), (False, False, False, "PASS"),
    (True, False, True, "MISMATCH"), (True, False, False, "MISMATCH"),
])
def test_fused_kernels_depend_on_hardware(megatron, mindformers, same, expected):
    got, _ = verdict("fused_flash_attention", {"fused__flash_attention": megatron},
                     {"fused__flash_attention": mindformers}, same_hardware=same)
    assert got == expected


def test_kv_heads_names_attention_kind():
    state, message = verdict("num_kv_heads", {"model__num_kv_heads": 8, "model__num_attention_heads": 32},
                             {"model__num_kv_heads": 32, "model__num_attention_heads": 32})
    assert state == "MISMATCH" and "GQA (8 groups)" in message and "MindFormers MHA" in message


def test_vocabulary_padding_and_multiple_of_16():
    assert verdict("vocabulary", {"model__padded_vocab_size": 32000, "model__vocab_size": 32000},
                   {"model__padded_vocab_size": 32064, "model__vocab_size": 32064})[0] == "MISMATCH"
    state, message = verdict("vocabulary", {"model__padded_vocab_size": 32001, "model__vocab_size": 32001},
                             {"model__padded_vocab_size": 32001, "model__vocab_size": 32001})
    assert state == "RISK" and "multiple of 16" in message
    state, message = verdict("vocabulary", {"model__padded_vocab_size": 32256, "model__vocab_size": 32001},
                             {"model__padded_vocab_size": 32256, "model__vocab_size": 32256})
    assert state == "PASS" and "--pad-vocab-to 32256" in message


MOE = {"moe__num_experts": 8, "moe__router_topk": 2}


@pytest.mark.parametrize("cf_m,cf_f,expected", [
    (-1, -1, "PASS"), (-1, 1.1, "MISMATCH"), (1.5, 1.5, "PASS"), (1.5, 2.0, "MISMATCH"), (5.0, 5.0, "RISK"),
    (0.5, 0.5, "RISK"),
])
def test_capacity_factor_range(cf_m, cf_f, expected):
    got, _ = verdict("capacity_factor", {**MOE, "moe__capacity_factor": cf_m}, {**MOE, "moe__capacity_factor": cf_f})
    assert got == expected


def test_moe_items_do_not_apply_to_dense_models():
    state, message = verdict("capacity_factor", {"moe__num_experts": 1, "moe__capacity_factor": -1},
                             {"moe__num_experts": 1, "moe__capacity_factor": 1.1})
    assert state == "PASS" and "not applicable" in message


@pytest.mark.parametrize("m,f,expected", [(0.0, 0.0, "PASS"), (0.01, 0.01, "RISK"), (0.05, 0.05, "RISK"),
                                          (0.02, 0.05, "MISMATCH")])
def test_aux_loss(m, f, expected):
    assert verdict("aux_loss", {**MOE, "moe__aux_loss_coeff": m}, {**MOE, "moe__aux_loss_coeff": f})[0] == expected


def test_softmax_dtype_inside_flash_attention():
    both = {"fused__flash_attention": True, "precision__softmax_dtype": "bf16"}
    state, message = verdict("softmax_dtype", both, {**both, "precision__softmax_dtype": "fp32"})
    assert state == "PASS" and "inside the fused kernel" in message
    no_fa = {"fused__flash_attention": False}
    assert verdict("softmax_dtype", {**no_fa, "precision__softmax_dtype": "bf16"},
                   {**no_fa, "precision__softmax_dtype": "fp32"})[0] == "MISMATCH"


def test_warmup_falls_back_to_fractions():
    steps = {"lr__warmup_steps": ..., "lr__warmup_fraction": 0.01}
    state, message = verdict("warmup", {"lr__warmup_steps": 50.0, "lr__warmup_fraction": 0.01},
                             {**steps, "lr__warmup_fraction": 0.03})
    assert state == "MISMATCH" and "0.01" in message and "0.03" in message
    assert verdict("warmup", {"lr__warmup_steps": 50.0, "lr__warmup_fraction": 0.01},
                   {"lr__warmup_steps": 50, "lr__warmup_fraction": ...})[0] == "PASS"


def test_side_equals_checks_only_that_side():
    assert verdict("param_init_type", {"precision__param_dtype": "bf16"}, {"precision__param_dtype": "fp32"})[0] == "PASS"
    state, message = verdict("param_init_type", {"precision__param_dtype": "fp32"}, {"precision__param_dtype": "fp16"})
    assert state == "RISK" and "use fp32" in message


def test_manual_items_say_what_to_check():
    state, message = verdict("overflow_mode", {}, {})
    assert state == "MANUAL" and "INFNAN_MODE" in message


def test_parallel_sizes_are_informational():
    # issue 12: informational parallel items are INFO (never a failure, not even with --strict), not RISK
    state, message = verdict("tensor_parallel", {"parallel__tensor": 2}, {"parallel__tensor": 1})
    assert state == "INFO" and "informational" in message
