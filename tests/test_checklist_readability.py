"""Issue 12, readability: the report as a user reads it (the real CLI on real fixture pairs, or the shipped
example pair with one line changed in tmp_path)."""
from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from test_checklist_facts12 import DEEPSEEK_V3_R15, GPT_YAML, MIXTRAL_GPU_SH, MIXTRAL_SH, MIXTRAL_YAML, QWEN3_YAML, audit
from workbench.audit.lr_figure import ScheduleMarks, decimate, schedules_figure
from workbench.audit.lr_schedule import MegatronSchedule, MindFormersSchedule, compare_schedules
from workbench.cli.main import main
from workbench.knowledge import knowledge_dir
from workbench_testing import fixtures_dir

EXAMPLE_M = knowledge_dir("checklists") / "examples" / "llama_tiny_megatron.sh"
EXAMPLE_F = knowledge_dir("checklists") / "examples" / "llama_tiny_mindformers.yaml"


def terminal(capsys, monkeypatch, *args: str, columns: int = 80) -> tuple[int, list[str]]:
    monkeypatch.setenv("COLUMNS", str(columns))
    code = main(["checklist", *map(str, args)])
    return code, capsys.readouterr().out.splitlines()


def fixture(name: str) -> Path:
    return fixtures_dir("configs") / name


# ---------------------------------------------------------------- 80 columns, failing first, PASS folded
@pytest.mark.parametrize("pair", [(MIXTRAL_SH, MIXTRAL_YAML), (MIXTRAL_GPU_SH, QWEN3_YAML), (GPT_YAML, QWEN3_YAML)])
def test_80_columns_no_long_line_and_no_split_item_name(capsys, monkeypatch, pair):
    _, lines = terminal(capsys, monkeypatch, fixture(pair[0]), fixture(pair[1]), "--all")
    assert lines and max(len(line) for line in lines) <= 80, max(lines, key=len)
    report = audit(*pair)
    heads = [line for line in lines if line[:8].strip() in {i.verdict for i in report.items}]
    for item in report.items:     # every title whole on its verdict line
        assert any(line.startswith(f"{item.verdict:<8} {item.title}") for line in heads), item.title


def test_summary_and_failures_come_first_and_pass_is_folded(capsys, monkeypatch):
    code, lines = terminal(capsys, monkeypatch, fixture(MIXTRAL_SH), fixture(MIXTRAL_YAML))
    report = audit(MIXTRAL_SH, MIXTRAL_YAML)
    passed = report.counts()["PASS"]
    assert code == 1
    summary = next(i for i, line in enumerate(lines) if line.startswith("Summary:"))
    first_item = next(i for i, line in enumerate(lines) if line.startswith(("MISMATCH ", "RISK ")))
    assert summary < first_item and lines[first_item].startswith("MISMATCH")
    order = [line.split()[0] for line in lines if line.split() and line.split()[0] in
             ("MISMATCH", "RISK", "UNKNOWN", "MANUAL", "INFO", "PASS")]
    assert order == sorted(order, key=["MISMATCH", "RISK", "UNKNOWN", "MANUAL", "INFO", "PASS"].index)
    assert f"{passed} PASS (--all shows them)" in lines
    assert not any(line.startswith("PASS ") for line in lines)
    _, every = terminal(capsys, monkeypatch, fixture(MIXTRAL_SH), fixture(MIXTRAL_YAML), "--all")
    assert sum(line.startswith("PASS ") for line in every) == passed
    assert not any("--all shows them" in line for line in every)


def test_provenance_uses_the_aliases_declared_once(capsys, monkeypatch):
    _, lines = terminal(capsys, monkeypatch, fixture(MIXTRAL_SH), fixture(MIXTRAL_YAML))
    text = "\n".join(lines)
    assert lines[0] == "M = Megatron (shell): mindspeed_llm_v2.2.0__pretrain_mixtral_8x7b_ptd.sh"
    assert lines[2] == "F = MindFormers (mindformers-legacy):"            # the name wraps whole to the next line
    assert lines[3].strip() == "legacy_moe_mixtral_pretrain_mixtral-8x7b.yaml"
    assert "--seq-length (M:52)" in text and "model.model_config.seq_length (F:152)" in text
    assert "mindspeed_llm_v2.2.0__pretrain_mixtral_8x7b_ptd.sh:" not in text


# ---------------------------------------------------------------- fixes: side, key, value
@pytest.mark.parametrize("pair,item_id,fix", [
    ((MIXTRAL_SH, MIXTRAL_YAML), "seq_length", "MindFormers: set model.model_config.seq_length: 32768"),
    ((MIXTRAL_SH, MIXTRAL_YAML), "fused_rope", "Megatron: remove --use-fused-rotary-pos-emb"),
    ((MIXTRAL_SH, MIXTRAL_YAML), "compute_dtype", "MindFormers: set model.model_config.compute_dtype: bfloat16"),
    ((MIXTRAL_SH, MIXTRAL_YAML), "deterministic", "Megatron: add --npu-deterministic"),
    ((MIXTRAL_GPU_SH, MIXTRAL_YAML), "fused_rope", "Megatron: add --no-rope-fusion"),        # GPU mcore fuses by default
    ((GPT_YAML, QWEN3_YAML), "norm_epsilon", "MindFormers: set model.model_config.rms_norm_eps: 1e-05"),
    ((GPT_YAML, QWEN3_YAML), "rampup_batch_size", "Megatron: remove rampup_batch_size"),
    ((GPT_YAML, QWEN3_YAML), "qk_norm", "Megatron: add --qk-layernorm"),           # Qwen3 fixes q/k norm on
    ((MIXTRAL_SH, MIXTRAL_YAML), "aux_loss", "Megatron: set --moe-aux-loss-coeff 0"),
])
def test_each_fix_names_side_key_and_value(capsys, monkeypatch, pair, item_id, fix):
    from workbench.audit.fixes import fix_line

    assert fix in fix_line(audit(*pair).item(item_id).fix)
    _, lines = terminal(capsys, monkeypatch, fixture(pair[0]), fixture(pair[1]), columns=200)
    assert any(fix in line for line in lines if line.strip().startswith("fix:"))


def test_pass_and_info_items_have_no_fix():
    report = audit(MIXTRAL_SH, MIXTRAL_YAML)
    assert all(not item.fix for item in report.items if item.verdict in ("PASS", "INFO"))


# ---------------------------------------------------------------- critical notes, not interpreted
def test_a_dropped_if_branch_is_critical_in_the_summary(capsys, monkeypatch):
    # the Mixtral GPU script sets LOGGING_ARGS inside an `if` on a variable it does not know
    _, lines = terminal(capsys, monkeypatch, fixture(MIXTRAL_GPU_SH), fixture(QWEN3_YAML))
    critical = lines.index("Critical (check these first):")
    first_item = next(i for i, line in enumerate(lines) if line.startswith(("MISMATCH ", "RISK ")))
    block = " ".join(lines[critical:first_item])
    assert "inside `if` not applied" in block and "assumed: MindFormers total_steps" in block
    assert not any(line.startswith("Note (Megatron)") and "inside `if`" in line for line in lines[first_item:])


def test_another_model_class_is_critical(tmp_path):
    yaml = tmp_path / "pretrain_deepseek3_671b.yaml"
    yaml.write_text(DEEPSEEK_V3_R15)
    from workbench.report.checklist_data import report_to_dict

    report = audit(MIXTRAL_SH, yaml)
    assert any("DeepseekV3ForCausalLM" in note for note in report.critical())
    assert report_to_dict(report)["critical"] == report.critical()


def test_not_interpreted_lists_only_non_default_values():
    # examples/gpt3/gpt_config.yaml (core_v0.12.1) writes ~100 arguments, most at Megatron's defaults or null
    names = audit(GPT_YAML, QWEN3_YAML).megatron.not_interpreted
    assert "overlap_p2p_comm" in names and "tp_comm_atomic_ag" in names          # False / True: not the defaults
    for default_or_null in ("fp16", "sample_rate", "fp8_amax_history_len", "init_method", "timers", "batch_p2p_comm"):
        assert default_or_null not in names
    assert len(names) < 15
    # reading the TransformerConfig name layernorm_zero_centered_gamma: True (core_v0.12.1 arguments.py:1012)
    assert audit(GPT_YAML, QWEN3_YAML).item("zero_centered_gamma").verdict == "MISMATCH"


# ---------------------------------------------------------------- INFO verdict
def test_a_tp_difference_is_info_and_strict_still_passes(tmp_path, capsys):
    yaml = tmp_path / EXAMPLE_F.name
    text = EXAMPLE_F.read_text()
    assert text.count("  model_parallel: 1\n") == 1
    yaml.write_text(text.replace("  model_parallel: 1\n", "  model_parallel: 2\n"))
    out = tmp_path / "checklist.json"
    assert main(["checklist", str(EXAMPLE_M), str(yaml), "--strict", "--format", "json", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    item = next(i for i in data["items"] if i["id"] == "tensor_parallel")
    assert item["verdict"] == "INFO" and item["fix"] == {}
    assert data["summary"]["INFO"] >= 1 and data["summary"]["RISK"] == 0 and data["exit_code"] == 0
    capsys.readouterr()


# ---------------------------------------------------------------- --plot-lr
def test_decimation_keeps_a_one_update_spike_and_bounds_the_points():
    x = np.arange(1, 1_000_001)
    y = np.full(x.size, 1e-4)
    y[654_321] = 5e-4
    xs, ys = decimate(x, y, buckets=500)
    assert xs.size <= 2 * 500 + 2 and ys.max() == 5e-4 and xs[np.argmax(ys)] == 654_322
    assert xs[0] == 1 and xs[-1] == 1_000_000


def test_fifteen_million_updates_plot_in_bounded_time_and_memory(tmp_path):
    n = 15_000_000
    megatron = MegatronSchedule(lr=3e-4, min_lr=3e-5, warmup_steps=2000, decay_steps=n, style="cosine")
    mindformers = MindFormersSchedule(type="CosineWithWarmUpLR", learning_rate=1.5e-4, warmup_steps=2000,
                                      total_steps=n, lr_end=3e-5, warmup_lr_init=0.0, options={})
    tracemalloc.start()
    start = time.perf_counter()
    try:
        comparison = compare_schedules(megatron, mindformers, n)
        figure = schedules_figure(comparison, "a.sh", "b.yaml", ScheduleMarks({"Megatron": 2000.0}, {"Megatron": n}))
        figure.savefig(tmp_path / "lr.png", dpi=80)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 180       # seconds under a loaded CI machine; ~10 s on an idle one
    assert peak < 100e6                              # flat: a 15 M float64 curve alone would be 120 MB
    top, middle, bottom = figure.axes[:3]
    assert top.get_ylabel() == "learning rate" and middle.get_ylabel() == "lr / peak"
    assert bottom.get_xlabel().startswith("optimizer update") and bottom.get_ylabel() == "relative difference"
    assert {line.get_label() for line in top.get_lines()} >= {"Megatron (a.sh)", "MindFormers (b.yaml)"}
    normalised = [line.get_ydata() for line in middle.get_lines()[:2]]
    assert all(abs(np.max(y) - 1.0) < 1e-9 for y in normalised)     # both peaks visible at 1
    assert (tmp_path / "lr.png").stat().st_size > 10_000


def test_plot_names_files_marks_phases_and_the_assumed_run_length(tmp_path):
    from workbench.report.checklist_result import lr_figure

    report = audit(MIXTRAL_SH, MIXTRAL_YAML)      # MindFormers total_steps -1: Megatron's 2000 assumed
    figure = lr_figure(report).draw()
    top = figure.axes[0]
    labels = {line.get_label() for line in top.get_lines()}
    assert "Megatron (mindspeed_llm_v2.2.0__pretrain_mixtral_8x7b_ptd.sh)" in labels
    assert {"Megatron warmup end (2)", "MindFormers warmup end (60)", "Megatron decay end (1,280)"} <= labels
    assert "MindFormers run length assumed 2,000 updates" in top.get_title()


def test_html_report_embeds_the_plot(tmp_path):
    html, png = tmp_path / "checklist.html", tmp_path / "lr.png"
    main(["checklist", str(fixture(MIXTRAL_SH)), str(fixture(MIXTRAL_YAML)), "--format", "html", "--out", str(html),
          "--plot-lr", str(png)])
    page = html.read_text()
    assert 'id="figure-lr_schedule"' in page and "data:image/png;base64," in page and png.stat().st_size > 10_000
    assert page.index("MISMATCH (") < page.index("<details>") < page.index("PASS (")
