"""``workbench loss``: two runs' curves, the reference's own noise, and verdicts with numbers.

The method's checks, in order (thresholds are :class:`LossThresholds`, all configurable):

* step 1 -- with the same weights and data the first loss must agree: relative difference
  <= ``step1_rtol`` (default 1 %, the method's bar for mixed precision on different hardware;
  an fp32 pair on the same hardware agrees to ~1e-6, so pass ``--step1-rtol 1e-5`` there);
* mean relative error over all common steps <= ``mean_rtol`` (default 1 %: above it the method
  calls the run misaligned) -- or within the reference's own noise when baselines are given;
* bias -- a sign test on candidate - reference: a difference that keeps one sign (p <
  ``bias_p``) is a systematic error (lr, schedule, precision), one that oscillates is noise;
* divergence start -- the first step after which the (EMA-smoothed) relative difference stays
  outside the noise band (the reference reruns' spread; without reruns, ``mean_rtol``) for good;
* spikes and nan/overflow steps more frequent than in the reference (and its reruns);
* late-stage gap -- the mean relative difference over the last ``late_fraction`` of the steps.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..report.result import Figure, Result
from . import noise
from .align_steps import AlignedSeries, align
from .schema import LogSeries

CHECK_COLUMNS = ("check", "status", "value", "threshold", "detail")
STEP_COLUMNS = ("step", "reference", "candidate", "difference", "relative_difference", "noise_band", "outside")


@dataclass(frozen=True)
class LossThresholds:
    step1_rtol: float = 1e-2
    mean_rtol: float = 1e-2
    bias_p: float = 1e-2
    smoothing: float = 0.0            # EMA weight for the divergence test and the plot (TensorBoard's slider)
    band_window: int = 5              # rolling-max window of the noise band, in steps
    band_margin: float = 1.0          # outside means > margin x band
    late_fraction: float = 0.1
    minimum_run: int = 3              # steps a divergence must last to count


def compare_loss(reference: LogSeries, candidate: LogSeries, baselines: list[LogSeries] = (),
                 metric: str = "loss", thresholds: LossThresholds = LossThresholds(), shift: int = 0) -> Result:
    aligned = align(reference, candidate, metric, list(baselines), shift)
    t = thresholds
    rel = noise.relative(aligned.reference, aligned.candidate)
    band = noise.noise_band(aligned.reference, aligned.baselines, t.band_window)
    limit = band * t.band_margin if aligned.baselines else np.full(rel.shape, t.mean_rtol)
    smoothed = noise.ema(rel, t.smoothing)
    outside = smoothed > limit
    checks = [_step1(aligned, rel, band, t), _mean(rel, band, aligned, t), _bias(aligned, rel, band, t),
              _divergence(aligned, outside, t), _spikes(aligned), _late(aligned, rel, band, t)]
    table = pd.DataFrame(checks, columns=list(CHECK_COLUMNS))
    failed = table[table["status"] == "FAIL"]
    steps = pd.DataFrame({"step": aligned.steps, "reference": aligned.reference, "candidate": aligned.candidate,
                          "difference": aligned.candidate - aligned.reference, "relative_difference": rel,
                          "noise_band": band, "outside": outside}, columns=list(STEP_COLUMNS))
    summary = [_summary_line(row) for row in table.itertuples()]
    verdict = "FAIL" if len(failed) else "PASS"
    return Result(
        kind="loss", title=f"{aligned.metric}: {Path(reference.source).name} (reference) vs "
                           f"{Path(candidate.source).name}", verdict=verdict,
        exit_code=1 if len(failed) else 0, summary=summary, tables={"checks": table, "steps": steps},
        figures=[_figure(aligned, reference, candidate, band, t)],
        sources={"reference": reference.source, "candidate": candidate.source,
                 **{f"baseline {i + 1}": base.source for i, base in enumerate(baselines)}},
        facts={"metric": aligned.metric, "thresholds": asdict(t), "steps": len(aligned.steps),
               "alignment": aligned.statements},
        notes=list(dict.fromkeys(aligned.statements + reference.notes + candidate.notes)),
        terminal_columns={"checks": ("check", "status", "detail"), "steps": ()})


def _summary_line(row) -> str:
    """``check: STATUS (value vs limit; detail)`` -- every verdict with its number."""
    numbers = ""
    if _finite(row.value):
        numbers = f"{row.value:.3g}" + (f" vs limit {row.threshold:.3g}" if _finite(row.threshold) else "")
        numbers += "; "
    return f"{row.check}: {row.status} ({numbers}{row.detail})"


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and bool(np.isfinite(value))


def _row(check: str, passed: bool | None, value, threshold, detail: str) -> tuple:
    status = "INFO" if passed is None else ("PASS" if passed else "FAIL")
    return (check, status, value, threshold, detail)


def _step1(a: AlignedSeries, rel: np.ndarray, band: np.ndarray, t: LossThresholds) -> tuple:
    first = int(a.steps[0])
    limit = max(t.step1_rtol, float(band[0]) if a.baselines and np.isfinite(band[0]) else 0.0)
    return _row(f"step {first} relative difference", bool(rel[0] <= limit), float(rel[0]), limit,
                f"{a.candidate[0]:.6g} vs {a.reference[0]:.6g}")


def _mean(rel: np.ndarray, band: np.ndarray, a: AlignedSeries, t: LossThresholds) -> tuple:
    mean = float(np.nanmean(rel))
    limit = max(t.mean_rtol, float(np.nanmean(band))) if a.baselines else t.mean_rtol
    return _row("mean relative difference", mean <= limit, mean, limit, f"over {len(rel)} steps")


def _bias(a: AlignedSeries, rel: np.ndarray, band: np.ndarray, t: LossThresholds) -> tuple:
    positives, negatives, p = noise.sign_test(a.candidate - a.reference)
    biased = p < t.bias_p
    # beyond the reference's noise as the divergence test reads it: the band times its margin (a rerun's spread
    # is one sample of that noise); a steady sign inside it is the two implementations' rounding, not an error
    noise_level = float(np.nanmedian(band)) * t.band_margin if a.baselines else t.mean_rtol / 10
    beyond_noise = float(np.nanmedian(rel)) > noise_level
    side = "above" if positives > negatives else "below"
    detail = (f"candidate {side} the reference at {max(positives, negatives)} of {positives + negatives} steps, "
              f"p={p:.2g}: {'biased' if biased else 'oscillates around zero'}")
    return _row("bias (sign test)", not (biased and beyond_noise), p, t.bias_p, detail)


def _divergence(a: AlignedSeries, outside: np.ndarray, t: LossThresholds) -> tuple:
    start = noise.leaves_for_good(outside, t.minimum_run)
    what = "the reference's noise band" if a.baselines else f"the relative bar {t.mean_rtol:g}"
    if start is None:
        return _row("divergence start", True, None, None, f"stays within {what}")
    return _row("divergence start", False, int(a.steps[start]), None,
                f"outside {what} from step {int(a.steps[start])} to the end")


def _spikes(a: AlignedSeries) -> tuple:
    counts = [int(noise.spikes(values).sum()) for values in (a.reference, *a.baselines)]
    candidate = int(noise.spikes(a.candidate).sum())
    return _row("spikes and nan steps", candidate <= max(counts), candidate, max(counts),
                f"candidate {candidate}, reference runs {counts}")


def _late(a: AlignedSeries, rel: np.ndarray, band: np.ndarray, t: LossThresholds) -> tuple:
    count = max(int(round(len(rel) * t.late_fraction)), 1)
    gap = float(np.nanmean(rel[-count:]))
    limit = max(t.mean_rtol, float(np.nanmean(band[-count:]))) if a.baselines else t.mean_rtol
    return _row("late-stage gap", gap <= limit, gap, limit, f"mean over the last {count} steps")


def _figure(a: AlignedSeries, reference: LogSeries, candidate: LogSeries, band: np.ndarray,
            t: LossThresholds) -> Figure:
    def draw():
        from ..report.figures import series_with_difference

        ref, cand = noise.ema(a.reference, t.smoothing), noise.ema(a.candidate, t.smoothing)
        bounds = (ref * (1 - band), ref * (1 + band)) if a.baselines else None
        smoothed = f" (EMA {t.smoothing:g})" if t.smoothing else ""
        ref_name, cand_name = Path(reference.source).name, Path(candidate.source).name
        bands = f", noise band of {len(a.baselines)} reruns" if a.baselines else ""
        return series_with_difference(
            a.steps, {f"reference: {ref_name}": ref, f"candidate: {cand_name}": cand},
            title=f"{a.metric}{smoothed}: {cand_name} vs the reference {ref_name}{bands}",
            ylabel=f"{a.metric} (as logged)" if "loss" in a.metric else a.metric,
            xlabel="optimizer step", band=bounds, relative_band=band if a.baselines else None,
            threshold=t.mean_rtol)

    return Figure("loss", f"{a.metric} of both runs, their difference and the reference's noise", draw)


def keep_first_steps(series: LogSeries, count: int) -> LogSeries:
    """``series`` with only its first ``count`` logged steps (``workbench loss --only-steps``)."""
    from dataclasses import replace

    first = sorted(series.series["step"].unique())[:count]
    return replace(series, series=series.series[series.series["step"].isin(first)])
