"""The LR simulation in bounded memory for any run length (issue 8): 1e12 updates, exact where it matters.

Expected values are written from the frameworks' formulas here (``get_lr`` of Megatron's
OptimizerParamScheduler; MindFormers' CosineWithWarmUpLR), not read from the module.
"""
from __future__ import annotations

import json
import math
import tracemalloc

import numpy as np
import pytest

from workbench.audit import lr_compare
from workbench.audit.lr_schedule import (MegatronSchedule, MindFormersSchedule, compare_schedules, megatron_lr_at,
                                         mindformers_lr_at)
from workbench.cli.main import main
from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS

N = 10**12
LR, MIN_LR, WARMUP = 1e-3, 1e-4, 2000
PEAK_MB = 32


def megatron_cosine(update: int) -> float:
    """Megatron cosine with warmup, at update k (it uses lr(num_steps=k-1))."""
    n = update - 1
    if n <= WARMUP:
        return LR * n / WARMUP
    ratio = (n - WARMUP) / (N - WARMUP)
    return MIN_LR + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (LR - MIN_LR)


def peak_mb(function):
    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_1e12_updates_in_bounded_memory_with_exact_values_at_chosen_updates():
    m = MegatronSchedule(lr=LR, min_lr=MIN_LR, warmup_steps=WARMUP, decay_steps=N, style="cosine")
    f = MindFormersSchedule(type="CosineWithWarmUpLR", learning_rate=LR, warmup_steps=WARMUP, total_steps=N,
                            lr_end=MIN_LR)
    c, peak = peak_mb(lambda: compare_schedules(m, f, N))
    assert peak < PEAK_MB
    assert c.updates == N and not c.exact and len(c.steps) < 20_000
    assert c.steps[0] == 1 and c.steps[-1] == N
    sampled = set(c.steps.tolist())
    assert {1, 2, WARMUP, WARMUP + 1, WARMUP + 2, N - 1, N} <= sampled   # warmup end and decay end included
    for index in [*range(0, len(c.steps), 397), len(c.steps) - 1]:
        update = int(c.steps[index])
        assert c.megatron[index] == pytest.approx(megatron_cosine(update), rel=1e-12, abs=1e-18)
        # MindFormers at global step g = update - 1: lr_end + (lr - lr_end) * 0.5 * (1 + cos(pi * (g - w) / (T - w)))
        g = update - 1
        want = LR * g / WARMUP if g < WARMUP else \
            MIN_LR + (LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * (g - WARMUP) / (N - WARMUP)))
        assert c.mindformers[index] == pytest.approx(want, rel=1e-12, abs=1e-18)
    assert c.first_differing_update is None          # the same schedule on both sides


def cosine_pair_threshold(rtol: float = 1e-6) -> float:
    """Where Megatron cosine (min_lr 1e-4) and MindFormers cosine (lr_end 0) part by ``rtol``, by bisection
    on the continuous step n of the formulas: rel(n) = min_lr (1 - h) / (min_lr + (lr - min_lr) h),
    h = (1 + cos(pi n / N)) / 2."""
    def rel(n: float) -> float:
        h = 0.5 * (1.0 + math.cos(math.pi * n / N))
        return MIN_LR * (1.0 - h) / (MIN_LR + (LR - MIN_LR) * h)
    low, high = 0.0, N / 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (low, middle) if rel(middle) > rtol else (middle, high)
    return high


def spy(monkeypatch, name: str) -> list:
    """Record the calls of a real lr_compare helper (it still runs): which search found the update."""
    calls, real = [], getattr(lr_compare, name)
    monkeypatch.setattr(lr_compare, name, lambda *args: calls.append(args[1:3]) or real(*args))
    return calls


def test_first_difference_beyond_the_scan_window_is_found_by_bisection(monkeypatch):
    """The two cosines part ~2e9 updates in, where samples lie ~5e7 apart (beyond the scan limit):
    the gap is bisected; the difference grows monotonically there."""
    bisected = spy(monkeypatch, "_bisect")
    m = MegatronSchedule(lr=LR, min_lr=MIN_LR, warmup_steps=0, decay_steps=N, style="cosine")
    f = MindFormersSchedule(type="CosineWithWarmUpLR", learning_rate=LR, warmup_steps=0, total_steps=N, lr_end=0.0)
    c, peak = peak_mb(lambda: compare_schedules(m, f, N))
    assert peak < PEAK_MB
    first = c.first_differing_update
    assert abs((first - 1) - cosine_pair_threshold()) <= 2          # update k evaluates step k - 1
    assert len(bisected) == 1 and bisected[0][1] - bisected[0][0] > lr_compare.SCAN_LIMIT
    window = np.arange(first - 3, first + 3, dtype=np.float64)
    a, b = megatron_lr_at(m, window - 1), mindformers_lr_at(f, window - 1)
    rel = np.abs(a - b) / np.maximum(a, b)
    assert (rel[:3] <= 1e-6).all() and (rel[3:] > 1e-6).all()
    assert c.first_values == (pytest.approx(a[3], rel=1e-15), pytest.approx(b[3], rel=1e-15))


def test_first_difference_inside_a_gap_is_scanned(monkeypatch):
    """Linear (Megatron) against cosine (MindFormers) after the same warmup: relative difference
    ~ (k - w) / (N - w), beyond 1e-6 about 1e6 updates after warmup: between two log-grid samples."""
    scanned = spy(monkeypatch, "_first_over")
    m = MegatronSchedule(lr=LR, min_lr=0.0, warmup_steps=WARMUP, decay_steps=N, style="linear")
    f = MindFormersSchedule(type="CosineWithWarmUpLR", learning_rate=LR, warmup_steps=WARMUP, total_steps=N,
                            lr_end=0.0)
    c, peak = peak_mb(lambda: compare_schedules(m, f, N))
    assert peak < PEAK_MB
    first = c.first_differing_update
    window = np.arange(first - 2, first + 2, dtype=np.float64)
    a, b = megatron_lr_at(m, window - 1), mindformers_lr_at(f, window - 1)
    rel = np.abs(a - b) / np.maximum(a, b)
    assert (rel[:2] <= 1e-6).all() and (rel[2:] > 1e-6).all()
    assert 999_000 < first - WARMUP < 1_001_000
    assert len(scanned) == 1 and scanned[0][0] < first <= scanned[0][1]
    assert c.first_differing_update not in set(c.steps.tolist())   # found between samples, not at one


def test_middle_lengths_are_scanned_exactly(monkeypatch):
    """Past the whole-curve limit and below the scan limit every update is still evaluated."""
    monkeypatch.setattr(lr_compare, "CURVE_LIMIT", 1000)
    m = MegatronSchedule(lr=LR, min_lr=0.0, warmup_steps=10, decay_steps=5000, style="cosine")
    f = MindFormersSchedule(type="CosineWithWarmUpLR", learning_rate=LR, warmup_steps=10, total_steps=5001,
                            lr_end=0.0)
    sampled = compare_schedules(m, f, 5000)
    monkeypatch.setattr(lr_compare, "CURVE_LIMIT", 1 << 20)
    whole = compare_schedules(m, f, 5000)
    assert sampled.exact and len(sampled.steps) < 5000 and len(whole.steps) == 5000
    assert (sampled.first_differing_update, sampled.worst_update) == (whole.first_differing_update, whole.worst_update)
    assert sampled.max_relative_difference == whole.max_relative_difference


def test_checklist_with_1e12_train_iters(tmp_path, capsys):
    """Through the CLI (before: a 7 TiB allocation). Memory is measured on the library calls above."""
    megatron = tmp_path / "train.sh"
    megatron.write_text(EXAMPLE_MEGATRON.read_text().replace("--train-iters 20", "--train-iters 1e12"))
    mindformers = tmp_path / "run.yaml"
    mindformers.write_text(EXAMPLE_MINDFORMERS.read_text().replace("total_steps: 20", "total_steps: 1000000000000"))
    assert main(["checklist", str(megatron), str(mindformers), "--format", "json"]) == 0
    item = next(i for i in json.loads(capsys.readouterr().out)["items"] if i["id"] == "lr_schedule")
    assert item["details"]["updates"] == N and item["details"]["exact"] is False
    assert item["verdict"] == "PASS" and "sampled updates (every breakpoint included)" in item["message"]
