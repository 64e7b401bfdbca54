"""Tests for workbench.audit.lr_schedule.

Every expected value is worked out by hand from the formulas in the framework sources, as
the module docstring describes them. None is copied from the module's own output.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from workbench.audit.lr_schedule import (
    MegatronSchedule,
    MindFormersSchedule,
    compare_schedules,
    megatron_lr_per_update,
    mindformers_lr_per_update,
    plot_schedules,
    relative_difference,
)
from workbench.errors import InputError

LR = 1e-3


def mega(style="cosine", lr=LR, min_lr=1e-4, warmup=10, decay=110, **kw):
    return MegatronSchedule(lr=lr, min_lr=min_lr, warmup_steps=warmup, decay_steps=decay,
                            style=style, **kw)


def mf(kind, warmup=10, total=110, lr=LR, lr_end=None, init=0.0, **options):
    return MindFormersSchedule(type=kind, learning_rate=lr, warmup_steps=warmup, total_steps=total,
                               lr_end=lr_end, warmup_lr_init=init, options=options)


def at(curve: np.ndarray, step: int) -> float:
    """LR the schedule gives at scheduler step `step`, i.e. at update step+1."""
    return float(curve[step])


# --- Megatron ------------------------------------------------------------------------------
def test_megatron_first_update_uses_warmup_init_and_warmup_hits_lr_exactly():
    curve = megatron_lr_per_update(mega(warmup_init=1e-5), 200)
    assert at(curve, 0) == 1e-5                     # update 1 uses lr(num_steps=0)
    assert at(curve, 5) == pytest.approx(1e-5 + (LR - 1e-5) * 0.5, rel=1e-12)
    assert at(curve, 10) == LR                      # num_steps == warmup still warms: exactly lr
    assert np.all(np.diff(curve[:11]) > 0)


def test_megatron_default_warmup_init_is_zero():
    assert megatron_lr_per_update(mega(), 3)[0] == 0.0


def test_megatron_cosine_midpoint_and_end():
    curve = megatron_lr_per_update(mega(), 200)
    assert at(curve, 60) == pytest.approx((LR + 1e-4) / 2, rel=1e-12)   # 10 + 100/2
    assert at(curve, 110) == pytest.approx(1e-4, rel=1e-12)             # coeff 0 at decay_steps
    assert np.all(curve[111:] == 1e-4)                                  # num_steps > decay: min_lr


def test_megatron_linear_and_constant():
    lin = megatron_lr_per_update(mega("linear"), 200)
    assert at(lin, 35) == pytest.approx(1e-4 + 0.75 * (LR - 1e-4), rel=1e-12)
    const = megatron_lr_per_update(mega("constant"), 300)
    assert at(const, 5) == pytest.approx(LR / 2)
    assert np.all(const[10:] == LR)                 # constant ignores decay_steps and min_lr


def test_megatron_inverse_square_root():
    curve = megatron_lr_per_update(mega("inverse_square_root", min_lr=0.0, warmup=4, decay=1000), 1100)
    assert at(curve, 16) == pytest.approx(LR * 2 / 4, rel=1e-12)        # lr*sqrt(4)/sqrt(16)
    assert at(curve, 1001) == 0.0                                       # past decay_steps: min_lr
    floor = megatron_lr_per_update(mega("inverse-square-root", min_lr=4e-4, warmup=4, decay=1000), 200)
    assert at(floor, 100) == 4e-4                                       # lr*2/10 = 2e-4 < min


@pytest.mark.parametrize("wsd_style, step, coeff", [
    ("exponential", 90, math.sqrt(2.0) - 1.0),      # 2*0.5**0.5 - 1
    ("linear", 90, 0.5),
    ("cosine", 90, 0.5),
    ("minus_sqrt", 85, 0.5),                        # 1 - sqrt(5/20)
    ("exponential", 80, 1.0),                       # still stable at the anneal start
    ("linear", 100, 0.0),
])
def test_megatron_wsd(wsd_style, step, coeff):
    s = mega("WSD", min_lr=1e-5, warmup=0, decay=100, wsd_decay_steps=20, wsd_decay_style=wsd_style)
    curve = megatron_lr_per_update(s, 120)
    assert at(curve, step) == pytest.approx(1e-5 + coeff * (LR - 1e-5), rel=1e-12)
    assert at(curve, 101) == 1e-5


def test_megatron_bad_inputs():
    with pytest.raises(InputError) as err:
        megatron_lr_per_update(mega("wsd"), 5)
    assert "lr_wsd_decay_iters" in err.value.where
    with pytest.raises(InputError) as err:
        megatron_lr_per_update(mega("polynomial"), 5)
    assert "inverse-square-root" in str(err.value)
    with pytest.raises(InputError):
        megatron_lr_per_update(mega(warmup=110, decay=110), 5)


# --- MindFormers -------------------------------------------------------------------------
def test_constant_warmup_first_update_is_lr0():
    curve = mindformers_lr_per_update(mf("ConstantWarmUpLR", warmup=4, init=1e-6), 50)
    assert at(curve, 0) == 1e-6                     # update 1 uses global_step 0
    assert at(curve, 1) == pytest.approx(1e-6 + (LR - 1e-6) / 4, rel=1e-12)
    assert np.all(curve[4:] == LR)


def test_linear_with_warmup():
    curve = mindformers_lr_per_update(mf("LinearWithWarmUpLR", lr_end=5e-4), 200)
    assert at(curve, 10) == LR                      # (110 - 10) / (110 - 10)
    assert at(curve, 60) == pytest.approx(LR / 2, rel=1e-12)
    assert np.all(curve[110:] == 0.0)               # no lr_end in this class: decays to 0


def test_cosine_with_warmup():
    curve = mindformers_lr_per_update(mf("CosineWithWarmUpLR", lr_end=1e-4), 200)
    assert at(curve, 5) == pytest.approx(LR / 2)
    assert at(curve, 60) == pytest.approx(1e-4 + 0.9e-3 * 0.5, rel=1e-12)
    assert np.all(curve[110:] == 1e-4)              # global_step >= total_steps: lr_end
    short = mindformers_lr_per_update(mf("cosine", lr_end=1e-4, decay_steps=50), 60)
    assert at(short, 49) > 1e-4 and at(short, 50) == 1e-4
    ratio = mindformers_lr_per_update(mf("CosineWithWarmUpLR", decay_ratio=0.5), 60)
    assert at(ratio, 54) > 0.0 and at(ratio, 55) == 0.0          # int(110 * 0.5) = 55
    full = mindformers_lr_per_update(mf("CosineWithWarmUpLR", num_cycles=1.0), 200)
    assert at(full, 60) == pytest.approx(0.0, abs=1e-18)         # a full period reaches 0 mid-way


def test_cosine_with_restarts():
    s = mf("CosineWithRestartsAndWarmUpLR", warmup=0, total=100, num_cycles=2.0)
    curve = mindformers_lr_per_update(s, 120)
    assert at(curve, 25) == pytest.approx(LR / 2, rel=1e-12)      # 0.5 * (1 + cos(pi/2))
    assert at(curve, 50) == LR                                    # (2 * 0.5) % 1 == 0: restart
    assert at(curve, 100) == 0.0
    late = mindformers_lr_per_update(
        mf("CosineWithRestartsAndWarmUpLR", warmup=0, total=100, lr_end=1e-5, decay_steps=200), 160)
    assert at(late, 150) == 0.0                     # progress >= 1 gives literal 0, not lr_end


def test_polynomial_with_warmup():
    curve = mindformers_lr_per_update(mf("PolynomialWithWarmUpLR", warmup=0, total=100, power=2.0), 120)
    assert at(curve, 50) == pytest.approx((LR - 1e-7) * 0.25 + 1e-7, rel=1e-12)  # lr_end default 1e-7
    assert at(curve, 100) == pytest.approx(1e-7, rel=1e-9)
    assert at(curve, 110) == 1e-7
    with pytest.raises(InputError):
        mindformers_lr_per_update(mf("PolynomialWithWarmUpLR", lr_end=LR), 5)


def test_warmup_stable_decay():
    s = mf("WarmUpStableDecayLR", warmup=10, total=100, decay_start_ratio=0.8)
    curve = mindformers_lr_per_update(s, 120)
    assert at(curve, 5) == pytest.approx(LR / 2)
    assert at(curve, 50) == LR and at(curve, 79) == LR
    assert at(curve, 90) == pytest.approx(LR - (LR - 1e-7) * 10 / 20, rel=1e-12)
    assert at(curve, 110) < 1e-7                    # the decay is not clamped at total_steps
    with pytest.raises(InputError):
        mindformers_lr_per_update(mf("WarmUpStableDecayLR"), 5)   # no decay_start_steps/ratio


def test_constant_with_cooldown():
    s = mf("ConstantWithCoolDownLR", warmup=10, total=100, keep_steps=20, decay_steps=40,
           final_steps=10, lr_end1=1e-4, lr_end2=1e-5)
    curve = mindformers_lr_per_update(s, 100)
    assert at(curve, 5) == pytest.approx(LR / 2)
    assert at(curve, 15) == LR
    assert at(curve, 50) == pytest.approx(1e-4 + 0.9e-3 * 0.5, rel=1e-12)  # progress 20/40
    assert at(curve, 75) == 1e-4
    assert at(curve, 85) == 1e-5
    no_end2 = mf("ConstantWithCoolDownLR", warmup=10, total=100, keep_steps=20, decay_steps=40, lr_end=1e-4)
    assert at(mindformers_lr_per_update(no_end2, 100), 85) == 1e-4        # lr_end2 None -> lr_end1


def test_cosine_annealing_classes():
    ann = mindformers_lr_per_update(mf("CosineAnnealingLR", t_max=100), 200)
    assert at(ann, 0) == LR
    assert at(ann, 50) == pytest.approx(LR / 2, rel=1e-12)
    assert at(ann, 100) == pytest.approx(0.0, abs=1e-18)
    assert at(ann, 150) == pytest.approx(LR / 2, rel=1e-12)       # no clamp: climbs back up
    one = mindformers_lr_per_update(mf("CosineAnnealingWarmRestarts", t_0=10), 40)
    assert at(one, 15) == pytest.approx(at(one, 5)) == pytest.approx(LR / 2)
    two = mindformers_lr_per_update(mf("CosineAnnealingWarmRestarts", t_0=10, t_mult=2), 40)
    assert at(two, 10) == LR and at(two, 30) == LR                # restarts at 10 and 10+20
    assert at(two, 20) == pytest.approx(LR / 2, rel=1e-12)        # t_cur 10 of T_i 20
    with pytest.raises(InputError):
        mindformers_lr_per_update(mf("CosineAnnealingLR"), 5)


def test_warmup_ratio_overrides_warmup_steps_with_truncation():
    curve = mindformers_lr_per_update(mf("ConstantWarmUpLR", warmup=999, total=200, warmup_ratio=0.05), 20)
    assert at(curve, 5) == pytest.approx(LR / 2)    # int(200 * 0.05) = 10
    trunc = mindformers_lr_per_update(mf("ConstantWarmUpLR", warmup=999, total=99, warmup_ratio=0.05), 20)
    assert at(trunc, 4) == LR and at(trunc, 3) < LR  # int(4.95) = 4


def test_first_global_step_option_for_fused_adamw():
    curve = mindformers_lr_per_update(mf("ConstantWarmUpLR", warmup=4, first_global_step=-1), 3)
    assert at(curve, 0) == pytest.approx(-LR / 4)   # lr(-1) in the warmup formula
    assert at(curve, 1) == 0.0


def test_unknown_type_raises_input_error():
    with pytest.raises(InputError) as err:
        mindformers_lr_per_update(mf("StepLR"), 5)
    assert err.value.where == "lr_schedule.type"
    assert "CosineWithWarmUpLR" in str(err.value)


# --- comparison and plot ---------------------------------------------------------------------
def test_equal_schedules_have_no_differing_update():
    c = compare_schedules(mega("linear", min_lr=0.0), mf("LinearWithWarmUpLR"), 150)
    assert c.first_differing_update is None and c.worst_update is None
    assert c.max_relative_difference <= 1e-12
    c = compare_schedules(mega("cosine", min_lr=1e-5), mf("CosineWithWarmUpLR", lr_end=1e-5), 150)
    assert c.first_differing_update is None


def test_warmup_fraction_mismatch_first_differs_at_update_2():
    # Megatron --lr-warmup-fraction 0.01 of 1000 decay iters: warmup 10.0.
    # MindFormers warmup_ratio 0.03 of total_steps 1000: warmup int(30.0) = 30.
    # Update 1 uses lr(0) on both sides, which is the warmup start (0) for both, so they
    # agree. Update 2 uses lr(1): lr/10 against lr/30, the first difference. Through the
    # Megatron warmup the ratio stays n/10 against n/30, a relative difference of 2/3, the
    # largest anywhere.
    c = compare_schedules(mega("cosine", min_lr=0.0, warmup=0.01 * 1000, decay=1000),
                          mf("CosineWithWarmUpLR", warmup=0, total=1000, warmup_ratio=0.03), 1000)
    assert c.first_differing_update == 2
    assert c.megatron[0] == c.mindformers[0] == 0.0
    assert c.max_relative_difference == pytest.approx(2 / 3, rel=1e-9)
    assert 2 <= c.worst_update <= 11


def test_relative_difference_definition():
    rel = relative_difference(np.array([0.0, 1.0, 2.0, np.nan]), np.array([0.0, 0.5, -2.0, 1.0]))
    assert rel[0] == 0.0 and rel[1] == 0.5 and rel[2] == 2.0 and np.isinf(rel[3])


def test_500k_updates_are_vectorised():
    start = time.perf_counter()
    c = compare_schedules(mega("cosine", warmup=2000, decay=500_000),
                          mf("CosineWithWarmUpLR", warmup=2000, total=500_000, lr_end=1e-4), 500_000)
    assert time.perf_counter() - start < 10.0
    assert c.megatron.shape == c.mindformers.shape == (500_000,)
    assert c.megatron.dtype == np.float64 and np.all(np.isfinite(c.mindformers))
    assert c.first_differing_update is None


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    c = compare_schedules(mega(), mf("CosineWithWarmUpLR", warmup=20, lr_end=1e-4), 200)
    out = tmp_path / "plots" / "lr.png"
    plot_schedules(c, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in out.parent.iterdir()] == ["lr.png"]
