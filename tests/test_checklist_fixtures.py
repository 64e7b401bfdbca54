"""The CheckList on the real configs of ../shared/fixtures/configs."""
from __future__ import annotations

import json
from itertools import product

import pytest

from workbench_testing import fixtures_dir
from workbench.audit.engine import run_checklist
from workbench.audit.rules import VERDICTS
from workbench.report.checklist_result import checklist_result
from workbench.report.emit import render

MEGATRON_FILES = ["mindspeed_llm_v2.2.0__pretrain_llama2_7b_ptd.sh", "megatron_core_v0.12.1_gpt_config.yaml",
                  "extra__megatron_core_v0.12.1__train_mixtral_8x7b_distributed.sh",
                  "mindspeed_llm_v2.2.0__pretrain_mixtral_8x7b_ptd.sh"]
MINDFORMERS_FILES = ["legacy_llama2_pretrain_llama2_7b.yaml", "legacy_moe_mixtral_pretrain_mixtral-8x7b.yaml",
                     "mcore_qwen3_pretrain_qwen3_32b_4k.yaml"]


def test_every_fixture_config_is_covered():
    on_disk = {path.name for path in fixtures_dir("configs").rglob("*") if path.is_file()}
    assert on_disk == set(MEGATRON_FILES) | set(MINDFORMERS_FILES)


@pytest.mark.parametrize("megatron,mindformers", list(product(MEGATRON_FILES, MINDFORMERS_FILES)))
def test_every_pair_gives_a_complete_report(megatron, mindformers):
    configs = fixtures_dir("configs")
    report = run_checklist(configs / "megatron" / megatron, configs / "mindformers" / mindformers)
    assert len(report.items) > 60
    assert all(item.verdict in VERDICTS and item.message for item in report.items)
    for item in report.items:  # every known value carries its provenance
        for value in item.megatron + item.mindformers:
            assert value.source or value.settle, (item.id, value)
    result = checklist_result(report)
    data = json.loads(render(result, "json"))
    assert data["schema"] == "workbench.checklist/1" and len(data["items"]) == len(report.items)
    assert "<table>" in render(result, "html") and "| Verdict |" in render(result, "md")


@pytest.fixture(scope="module")
def llama2_report():
    configs = fixtures_dir("configs")
    return run_checklist(configs / "megatron" / MEGATRON_FILES[0], configs / "mindformers" / MINDFORMERS_FILES[0])


@pytest.mark.parametrize("item_id", ["learning_rate", "min_lr", "warmup", "weight_decay", "optimizer_type",
                                     "compute_dtype", "global_batch_size", "lr_schedule"])
def test_llama2_pair_finds_the_known_mismatches(llama2_report, item_id):
    assert llama2_report.item(item_id).verdict == "MISMATCH", llama2_report.item(item_id).message


def test_llama2_pair_flags_param_init_type_and_parallel_optimizer(llama2_report):
    assert llama2_report.item("param_init_type").verdict in ("MISMATCH", "RISK")
    assert "fp16" in llama2_report.item("param_init_type").message
    assert llama2_report.item("parallel_optimizer").verdict in ("MISMATCH", "RISK")


def test_llama2_pair_explains_softmax_inside_flash_attention(llama2_report):
    item = llama2_report.item("softmax_dtype")
    assert item.verdict == "PASS"
    assert "FlashAttention" in item.message and "fused kernel" in item.message


def test_llama2_pair_ffn_equal_with_multiple_of_derivation(llama2_report):
    item = llama2_report.item("ffn_hidden_size")
    assert item.verdict == "PASS"
    assert item.megatron[0].value == item.mindformers[0].value == 11008
    assert item.mindformers[0].kind == "derived" and "multiple_of 256" in item.mindformers[0].source


def test_llama2_pair_values_name_their_lines(llama2_report):
    lr = llama2_report.item("learning_rate")
    assert "--lr (mindspeed_llm_v2.2.0__pretrain_llama2_7b_ptd.sh:" in lr.megatron[0].source
    assert lr.mindformers[0].source.startswith("lr_schedule.learning_rate (legacy_llama2_pretrain_llama2_7b.yaml:")


def test_llama2_pair_warmup_uses_assumed_run_length(llama2_report):
    warmup = llama2_report.item("warmup")
    assert "50" in warmup.message and "150" in warmup.message  # 0.01 × 5000 vs int(5000 × 0.03)
    assert llama2_report.assumptions and "total_steps" in llama2_report.assumptions[0]


def test_mixtral_pair_checks_moe_items():
    configs = fixtures_dir("configs")
    report = run_checklist(configs / "megatron" / MEGATRON_FILES[3], configs / "mindformers" / MINDFORMERS_FILES[1])
    assert report.item("router_topk").verdict == "PASS"            # 2 and num_experts_chosen 2
    assert report.item("capacity_factor").verdict == "MISMATCH"    # Megatron dropless vs capacity 1.1
    assert report.item("aux_loss").verdict == "MISMATCH"           # 0.02 vs 0.05
    assert report.item("routing_policy").verdict == "PASS"         # TopkRouterV2
    assert report.item("token_drop").verdict == "MISMATCH"         # sdrop position vs probs
