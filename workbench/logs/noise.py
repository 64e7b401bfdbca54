"""Statistics of aligned per-step series: relative differences, the reference's noise band,
smoothing, a sign test, spikes and the step where a difference leaves the noise for good.

Every function takes plain float arrays over the same aligned steps (nan where a value is
missing) and returns numbers a verdict can quote.
"""
from __future__ import annotations

import math

import numpy as np


def relative(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """|other - reference| / |reference| (0 where equal, inf where only the reference is 0)."""
    reference, other = np.asarray(reference, np.float64), np.asarray(other, np.float64)
    difference = np.abs(other - reference)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(difference == 0, 0.0, difference / np.abs(reference))


def ema(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing: debiased exponential moving average with ``weight`` in [0, 1)."""
    values = np.asarray(values, np.float64)
    if weight <= 0 or values.size == 0:
        return values.copy()
    out = np.empty_like(values)
    last, count = 0.0, 0
    for index, value in enumerate(values):
        if not math.isfinite(value):
            out[index] = value
            continue
        last = last * weight + (1 - weight) * value
        count += 1
        out[index] = last / (1 - weight ** count)
    return out


def noise_band(reference: np.ndarray, reruns: list[np.ndarray], window: int) -> np.ndarray:
    """Per step, the largest relative spread of the reference's reruns around the reference,
    widened by a rolling maximum over ``window`` steps (one rerun touches the reference by chance
    at some steps; the noise there is not zero)."""
    if not reruns:
        return np.full(np.asarray(reference).shape, np.nan)
    spread = np.nanmax(np.vstack([relative(reference, rerun) for rerun in reruns]), axis=0)
    return rolling_max(spread, window)


def rolling_max(values: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling maximum (nan ignored) over ``window`` steps."""
    values = np.asarray(values, np.float64)
    half = max(int(window), 1) // 2
    out = np.empty_like(values)
    for index in range(values.size):
        chunk = values[max(0, index - half): index + half + 1]
        out[index] = np.nanmax(chunk) if np.isfinite(chunk).any() else np.nan
    return out


def sign_test(differences: np.ndarray) -> tuple[int, int, float]:
    """(positives, negatives, two-sided p-value) of the signs of nonzero finite differences:
    a small p says the difference is biased to one side rather than oscillating around zero."""
    finite = np.asarray(differences, np.float64)
    finite = finite[np.isfinite(finite) & (finite != 0)]
    positives, negatives = int((finite > 0).sum()), int((finite < 0).sum())
    return positives, negatives, binomial_two_sided(min(positives, negatives), positives + negatives)


def binomial_two_sided(k: int, n: int) -> float:
    """P(X <= k or X >= n - k) for X ~ Binomial(n, 1/2), exact (log space) for any n."""
    if n == 0:
        return 1.0
    log_terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
                 for i in range(k + 1)]
    peak = max(log_terms)
    tail = math.exp(peak) * sum(math.exp(term - peak) for term in log_terms)
    return min(1.0, 2 * tail)


def leaves_for_good(outside: np.ndarray, minimum_run: int = 3) -> int | None:
    """Index of the first step after which every step is outside (True), when that run is at
    least ``minimum_run`` steps long; None when the series ends inside or only briefly outside."""
    outside = np.asarray(outside, bool)
    if outside.size == 0 or not outside[-1]:
        return None
    inside = np.flatnonzero(~outside)
    start = int(inside[-1]) + 1 if inside.size else 0
    return start if outside.size - start >= minimum_run else None


def spikes(values: np.ndarray, window: int = 20, factor: float = 0.5) -> np.ndarray:
    """Steps whose value exceeds the median of the preceding ``window`` steps by ``factor``
    (relative), or is not finite: loss and grad-norm spikes as a person sees them on the curve."""
    values = np.asarray(values, np.float64)
    flagged = np.zeros(values.size, bool)
    for index in range(values.size):
        if not math.isfinite(values[index]):
            flagged[index] = True
            continue
        before = values[max(0, index - window): index]
        before = before[np.isfinite(before)]
        if before.size >= 3:
            median = float(np.median(before))
            flagged[index] = values[index] > median + factor * abs(median)
    return flagged
