"""`workbench loss` verdicts on synthetic series with known properties, and the statistics under them."""
import numpy as np
import pandas as pd
import pytest

from workbench.errors import InputError
from workbench.logs import noise
from workbench.logs.align_steps import align
from workbench.logs.loss_compare import LossThresholds, compare_loss
from workbench.logs.schema import LogSeries


def series(name: str, values, metric: str = "lm_loss", interval: int = 1, steps=None, **extra) -> LogSeries:
    values = np.asarray(values, dtype=float)
    steps = np.arange(1, len(values) + 1) if steps is None else np.asarray(steps)
    rows = [pd.DataFrame({"run": name, "rank": -1, "step": steps, "metric": metric, "value": values, "line": 0})]
    rows += [pd.DataFrame({"run": name, "rank": -1, "step": steps, "metric": key, "value": value, "line": 0})
             for key, value in extra.items()]
    log = LogSeries(name, "test", series=pd.concat(rows, ignore_index=True))
    log.facts["log_interval"] = interval
    return log


CURVE = 3 + 5 * np.exp(-np.arange(1, 201) / 40)


def noisy(seed: int, scale: float = 1e-3, curve=CURVE):
    return curve + np.random.default_rng(seed).normal(0, scale, curve.size)


def checks(result) -> dict[str, str]:
    return dict(zip(result.tables["checks"]["check"], result.tables["checks"]["status"], strict=True))


def test_a_rerun_of_the_reference_is_aligned_and_within_noise():
    result = compare_loss(series("a.log", noisy(0)), series("b.log", noisy(1)), [series("a2.log", noisy(2))])
    assert result.verdict == "PASS" and result.exit_code == 0
    assert "oscillates around zero" in result.tables["checks"].set_index("check").loc["bias (sign test)", "detail"]


def test_a_systematic_offset_from_step_81_is_biased_and_diverges_there():
    shifted = noisy(1, curve=CURVE * np.where(np.arange(1, 201) > 80, 1.01, 1.0))
    result = compare_loss(series("a.log", noisy(0)), series("b.log", shifted), [series("a2.log", noisy(2))])
    status = checks(result)
    assert status["bias (sign test)"] == "FAIL" and status["divergence start"] == "FAIL"
    assert abs(result.tables["checks"].set_index("check").loc["divergence start", "value"] - 81) <= 2  # noise may flip one step
    assert status["step 1 relative difference"] == "PASS" and result.exit_code == 1


def test_a_steady_sign_inside_the_band_times_its_margin_is_not_bias():
    """Two fp32 implementations differ by their rounding, often with a steady sign: the bias check fails only
    beyond the noise band times its margin, the same limit the divergence test uses."""
    reference, rerun = noisy(0, scale=1e-6), noisy(2, scale=1e-6)
    band = np.nanmedian(noise.noise_band(reference, [rerun], LossThresholds().band_window))
    for factor, margin, expected in ((2.0, 4.0, "PASS"), (2.0, 1.0, "FAIL"), (8.0, 4.0, "FAIL")):
        candidate = reference * (1 - factor * band)           # below the reference at every step
        result = compare_loss(series("a.log", reference), series("b.log", candidate), [series("a2.log", rerun)],
                              thresholds=LossThresholds(band_margin=margin))
        assert checks(result)["bias (sign test)"] == expected, (factor, margin)
        assert "below the reference at 200 of 200 steps" in result.tables["checks"].set_index("check").loc[
            "bias (sign test)", "detail"]


def test_step_one_bar_is_configurable_and_quoted():
    reference, candidate = series("a.log", [10.0, 9.0, 8.0]), series("b.log", [10.002, 9.0, 8.0])
    loose = compare_loss(reference, candidate)
    tight = compare_loss(reference, candidate, thresholds=LossThresholds(step1_rtol=1e-5))
    assert checks(loose)["step 1 relative difference"] == "PASS"
    assert checks(tight)["step 1 relative difference"] == "FAIL"
    assert tight.tables["checks"].iloc[0]["value"] == pytest.approx(2e-4)


def test_nan_steps_in_the_candidate_are_spikes():
    values = noisy(1)
    values[[50, 120]] = np.nan
    result = compare_loss(series("a.log", noisy(0)), series("b.log", values))
    assert checks(result)["spikes and nan steps"] == "FAIL"


def test_megatron_lm_loss_is_compared_with_the_lm_loss_piece_not_the_mcore_total():
    megatron = series("megatron.log", [5.0, 4.0])
    mindformers = series("mf.log", [5.5, 4.5], metric="loss", lm_loss=[5.0, 4.0], load_balancing_loss=[0.5, 0.5])
    aligned = align(megatron, mindformers, "loss")
    assert aligned.candidate.tolist() == [5.0, 4.0]
    total_only = series("mf.log", [5.5, 4.5], metric="loss", load_balancing_loss=[0.5, 0.5])
    said = align(megatron, total_only, "loss").statements
    assert any("includes load_balancing_loss" in text for text in said)


def test_interval_means_are_compared_with_the_same_windows():
    fine = series("mf.log", [4.0, 2.0, 3.0, 1.0])
    coarse = series("megatron.log", [3.0, 2.0], steps=[2, 4], interval=2)
    aligned = align(coarse, fine, "loss")
    assert aligned.steps.tolist() == [2, 4] and aligned.candidate.tolist() == [3.0, 2.0]
    assert any("windows of 2 steps" in text for text in aligned.statements)


def test_no_common_step_and_a_missing_metric_are_one_line_errors():
    with pytest.raises(InputError, match="no step in common"):
        align(series("a.log", [1.0, 2.0]), series("b.log", [1.0], steps=[9]), "loss")
    with pytest.raises(InputError, match="no 'grad_norm' values"):
        align(series("a.log", [1.0]), series("b.log", [1.0]), "grad_norm")


def test_sign_test_and_binomial_tail():
    assert noise.binomial_two_sided(0, 10) == pytest.approx(2 / 1024)
    assert noise.binomial_two_sided(5, 10) == 1.0
    positives, negatives, p = noise.sign_test(np.array([1.0, -1.0, 0.0, 2.0, np.nan]))
    assert (positives, negatives) == (2, 1) and p == 1.0
    assert noise.binomial_two_sided(100, 10_000) < 1e-300 or noise.binomial_two_sided(100, 10_000) == 0.0


def test_leaves_for_good_needs_the_end_outside_for_a_minimum_run():
    assert noise.leaves_for_good(np.array([0, 1, 0, 1, 1, 1], bool)) == 3
    assert noise.leaves_for_good(np.array([1, 1, 1, 0], bool)) is None
    assert noise.leaves_for_good(np.array([0, 0, 1], bool)) is None


def test_ema_matches_tensorboard_debiasing():
    values = np.array([1.0, 2.0, 3.0])
    smoothed = noise.ema(values, 0.5)
    assert smoothed[0] == 1.0 and smoothed[1] == pytest.approx((0.5 * 0.5 * 1 + 0.5 * 2) / 0.75)
