"""`workbench optim-check`: the configured MindSpore optimizer applied to a real torch reference capture
(tests/optim_capture.py: one Megatron-style AdamW step of the torch reference model, captured by the real
hook). The clean case passes within 1e-6; each planted fault is found and named, with no other cause."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the reference capture is a real torch training step")
pytest.importorskip("mindspore", reason="optim-check applies MindSpore's optimizer classes")

sys.path.insert(0, str(Path(__file__).parent))
from optim_capture import mindformers_yaml, reference_capture  # noqa: E402

from workbench.cli.main import main  # noqa: E402


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    root = tmp_path_factory.mktemp("captures")
    return {"clipped": reference_capture(root / "clipped"),                 # Megatron: clip 1.0, wd 0.1, no 1-D decay
            "unclipped": reference_capture(root / "unclipped", clip=None),
            "decay_1d": reference_capture(root / "decay_1d", decay_1d=True),
            "two_steps": reference_capture(root / "two_steps", steps=2)}


def check(capsys, capture: Path, yaml_path: Path, *extra: str) -> tuple[int, dict]:
    code = main(["optim-check", "--capture", str(capture), "--mindformers", str(yaml_path), "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_clean_capture_passes_every_parameter_within_1e_6(capsys, captures, tmp_path):
    code, report = check(capsys, captures["clipped"], mindformers_yaml(tmp_path / "mf.yaml"))
    rows = report["tables"]["parameters"]
    assert (code, report["verdict"], report["schema"]) == (0, "PASS", "workbench.optim_check/1")
    assert len(rows) == 21 and all(row["status"] == "ok" for row in rows)
    assert max(max(r["max_rel_diff"], r["exp_avg_rel_diff"], r["exp_avg_sq_rel_diff"]) for r in rows) <= 1e-6
    assert {r["category"] for r in rows} == {"embedding", "output layer", "1-D", "weight"}
    assert report["tables"]["diagnosis"] == []
    assert report["facts"]["clip_coefficient"] < 1.0        # the clipping path was exercised


FAULTS = {  # name: (capture, yaml changes, expected cause, words the claim must hold)
    "weight decay on 1-D parameters": ("decay_1d", {}, "weight_decay_groups", ("decays 5", "1-D")),
    "weight decay 0.1 vs 0.01": ("clipped", {"weight_decay": 0.01}, "weight_decay", ("0.1", "0.01")),
    "lr off by 10 %": ("clipped", {"lr": 1.1e-2}, "learning_rate", ("0.9091", "0.01 instead of 0.011")),
    "beta2 0.999 vs 0.95": ("clipped", {"betas": (0.9, 0.999)}, "beta2", ("0.95", "0.999")),
    "eps 1e-6 vs 1e-8": ("clipped", {"eps": 1e-6}, "eps", ("1e-08", "1e-06")),
    "AdamWeightDecay vs AdamW": ("clipped", {"optimizer": "AdamWeightDecay"}, "bias_correction",
                                 ("AdamW (bias correction)", "AdamWeightDecay")),
    "clip 1.0 vs none": ("unclipped", {"clip": 1.0}, "clipping", ("does not clip", "clips at 1")),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_planted_fault_is_named_alone(capsys, captures, tmp_path, fault):
    capture, changes, cause, words = FAULTS[fault]
    code, report = check(capsys, captures[capture], mindformers_yaml(tmp_path / "mf.yaml", **changes))
    diagnosis = report["tables"]["diagnosis"]
    assert (code, report["verdict"]) == (1, "FAIL")
    assert [row["cause"] for row in diagnosis] == [cause], diagnosis
    assert diagnosis[0]["status"] == "diagnosis" and diagnosis[0]["residual"] <= report["facts"]["fit_tol"]
    assert all(word in diagnosis[0]["claim"] for word in words), diagnosis[0]["claim"]
    assert any(line.startswith(f"cause ({cause})") for line in report["summary"])


def test_update_two_starts_from_the_captured_state_of_update_one(capsys, captures, tmp_path):
    code, report = check(capsys, captures["two_steps"], mindformers_yaml(tmp_path / "mf.yaml"), "--step", "2")
    assert (code, report["verdict"], report["facts"]["update"]) == (0, "PASS", 2)
    code, report = check(capsys, captures["two_steps"], mindformers_yaml(tmp_path / "b.yaml", betas=(0.8, 0.95)),
                         "--step", "2")                   # beta1 only shows from update 2 on (and in the moments)
    assert code == 1 and [row["cause"] for row in report["tables"]["diagnosis"]] == ["beta1"]
    assert "0.9" in report["tables"]["diagnosis"][0]["claim"]


def test_megatron_config_is_shown_as_evidence(capsys, captures, tmp_path):
    script = tmp_path / "pretrain.sh"
    script.write_text("torchrun pretrain_gpt.py --lr 0.01 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 "
                      "--adam-eps 1e-8 --clip-grad 1.0 --lr-decay-style constant --train-iters 10\n")
    code, report = check(capsys, captures["clipped"], mindformers_yaml(tmp_path / "mf.yaml", eps=1e-6),
                         "--megatron", str(script))
    evidence = report["tables"]["diagnosis"][0]["evidence"]
    assert code == 1 and "reference config: eps 1e-08" in evidence and "this config: eps 1e-06" in evidence
    settings = {row["setting"]: row for row in report["tables"]["settings"]}
    assert settings["eps"]["reference config"] == 1e-8 and settings["eps"]["this config"] == 1e-6


def test_html_and_figure_are_written(captures, tmp_path, capsys):
    out, plot = tmp_path / "check.html", tmp_path / "check.png"
    code = main(["optim-check", "--capture", str(captures["clipped"]), "--mindformers",
                 str(mindformers_yaml(tmp_path / "mf.yaml", lr=1.1e-2)), "--out", str(out), "--plot", str(plot)])
    html = out.read_text()
    assert code == 1 and "learning_rate" in html and "data:image/" in html and "clipped" in html
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_model_of_the_diagnoses_agrees_with_the_real_optimizer_classes():
    """The float64 model the hypotheses use reproduces MindSpore's classes, and a pooled (reused) instance
    gives what a fresh one gives, at update 1 and from a reloaded state at update 2."""
    from workbench.grads.adam_math import AdamStep, adam_update
    from workbench.grads.optimizer_apply import UpdatePool, apply_update, implementation
    from workbench.grads.optimizer_settings import OptimizerSettings

    rng = np.random.default_rng(0)
    for rule in ("adamw", "adam_weight_decay"):
        settings = OptimizerSettings(rule, rule, 1e-2, 0.9, 0.95, 1e-8, 0.1, None)
        impl, pool = implementation(rule, use_mindformers=False), None
        pool = UpdatePool(impl, settings)
        for update in (1, 2, 2):
            p0, g = rng.standard_normal((16, 8)), rng.standard_normal((16, 8)) * 1e-3
            m0, v0 = (None, None) if update == 1 else (rng.standard_normal((16, 8)) * 1e-4, rng.random((16, 8)) * 1e-7)
            pooled = pool.apply(0.1, p0, g, update, m0, v0)
            fresh = apply_update(impl, settings, 0.1, p0, g, update, m0, v0)
            model = adam_update(p0.astype(np.float32), g.astype(np.float32),
                                AdamStep(1e-2, 0.9, 0.95, 1e-8, 0.1, rule == "adamw", update),
                                None if m0 is None else m0.astype(np.float32), None if v0 is None else v0.astype(np.float32))
            for a, b, c in zip(pooled, fresh, model, strict=True):
                np.testing.assert_array_equal(a, b)
                np.testing.assert_allclose(a, c, rtol=0, atol=1e-6 * np.abs(c).max())


def test_a_tp2_capture_checks_exactly_like_the_tp1_one(capsys, tmp_path):
    """The hook's rank folders of a TP=2 x PP=2 run merge (converters/megatron_parallel.yaml) before the check:
    the same table and diagnosis as the TP=1 capture. This capture decays every parameter (torch AdamW's one
    group), so both name the 1-D weight-decay grouping."""
    from test_grad_capture import DEEP, capture_rank, full_step

    full = full_step(tmp_path)
    for tp_rank in range(2):
        for pp_rank in range(2):
            capture_rank(tmp_path / "tp2", full, 2, 2, tp_rank, pp_rank)
    yaml_path = mindformers_yaml(tmp_path / "mf.yaml", lr=3e-4, weight_decay=0.01, clip=None, config=DEEP)
    reports = {run: check(capsys, tmp_path / run, yaml_path) for run in ("tp1", "tp2")}
    assert reports["tp1"][0] == reports["tp2"][0] == 1
    assert reports["tp1"][1]["tables"] == reports["tp2"][1]["tables"]
    assert [row["cause"] for row in reports["tp2"][1]["tables"]["diagnosis"]] == ["weight_decay_groups"]


def test_two_faults_at_once_are_not_forced_into_one_cause(capsys, captures, tmp_path):
    code, report = check(capsys, captures["clipped"], mindformers_yaml(tmp_path / "mf.yaml", lr=1.1e-2, eps=1e-6))
    diagnosis = report["tables"]["diagnosis"]
    assert code == 1 and all(row["status"] != "diagnosis" for row in diagnosis)
    assert {row["cause"] for row in diagnosis} >= {"configured"} and all(row["residual"] > 1e-4 for row in diagnosis)
    line = next(line for line in report["summary"] if line.startswith("no single cause"))
    assert "worst parameters: " in line and "model." in line
