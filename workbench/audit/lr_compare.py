"""Both schedules, update by update, in bounded memory for any run length.

Update ``k`` (1-based) uses Megatron's ``lr(num_steps=k-1)`` and MindFormers'
``lr(first_global_step + k - 1)`` (see :mod:`workbench.audit.lr_schedule`). Three regimes,
chosen by the number of updates ``n`` (docs/lr-schedules.md):

* ``n <= CURVE_LIMIT``: every update at once; the curves are kept whole (for the plot);
* ``n <= SCAN_LIMIT``: every update, ``CHUNK`` at a time; exact, and the curves kept are sampled;
* larger: the schedules are evaluated at sampled updates that include every point where either
  formula changes (warmup end, decay end, WSD and cool-down phases, cycle boundaries) and its
  neighbours, the first ``HEAD`` updates, the last one, and an even and a logarithmic grid.
  The first differing update is then found exactly inside the gap before the first differing
  sample: scanned when the gap holds at most SCAN_LIMIT updates, else bisected (the schedules
  are smooth between breakpoints, where the difference grows monotonically).

Memory stays below a few tens of MB whatever ``n`` is: nothing is allocated per update beyond a chunk.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lr_megatron import MegatronSchedule, megatron_breakpoints, megatron_lr_at
from .lr_mindformers import MindFormersSchedule, mindformers_breakpoints, mindformers_lr_at

CURVE_LIMIT = 1 << 20      # updates evaluated in one go, curves kept whole (8 MiB per array)
SCAN_LIMIT = 1 << 24       # updates scanned exactly, chunk by chunk
CHUNK = 1 << 16
HEAD, GRID, LOG_GRID = 1024, 4096, 1024


@dataclass
class ScheduleComparison:
    """``steps``: the update numbers the kept curves are given at (all of 1..n, or a sample)."""

    updates: int
    megatron: np.ndarray
    mindformers: np.ndarray
    max_relative_difference: float
    worst_update: int | None
    first_differing_update: int | None
    rtol: float
    steps: np.ndarray | None = None
    exact: bool = True                       # every update was evaluated
    first_values: tuple[float, float] | None = None   # (Megatron, MindFormers) at the first differing update

    def __post_init__(self) -> None:
        if self.steps is None:
            self.steps = np.arange(1, len(self.megatron) + 1, dtype=np.int64)


def relative_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a-b| / max(|a|,|b|)``; 0 where both are 0; inf where either is NaN."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1.0), 0.0)
    return np.where(np.isnan(a) | np.isnan(b), np.inf, rel)


class _Pair:
    """Both schedules as functions of the update number."""

    def __init__(self, m: MegatronSchedule, f: MindFormersSchedule):
        self.m, self.f = m, f
        self.start = int(f.options.get("first_global_step", 0))

    def at(self, updates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = np.asarray(updates, dtype=np.float64)
        return megatron_lr_at(self.m, k - 1.0), mindformers_lr_at(self.f, self.start + k - 1.0)

    def breakpoints(self, n: int) -> np.ndarray:
        """Update numbers where either formula changes (as ``lr(k-1)``: update = step + 1)."""
        mega = np.asarray(megatron_breakpoints(self.m), dtype=np.float64) + 1.0
        mf = np.asarray(mindformers_breakpoints(self.f, self.start + n), dtype=np.float64) - self.start + 1.0
        return np.concatenate([mega, mf])


def sample_updates(n: int, breakpoints: np.ndarray) -> np.ndarray:
    """Sorted unique update numbers in [1, n]: head, grids, last, and each breakpoint's neighbourhood."""
    near = np.floor(breakpoints)[:, None] + np.arange(-2, 3)[None, :]
    parts = [np.arange(1, min(n, HEAD) + 1, dtype=np.float64), np.linspace(1, n, GRID),
             np.geomspace(1, n, LOG_GRID), near.ravel(), np.array([float(n)])]
    points = np.unique(np.round(np.concatenate(parts)))
    return points[(points >= 1) & (points <= n)].astype(np.int64)


def _first_over(pair: _Pair, low: int, high: int, rtol: float) -> int | None:
    """The first update in [low, high] beyond ``rtol``, scanning CHUNK updates at a time."""
    for start in range(low, high + 1, CHUNK):
        chunk = np.arange(start, min(high, start + CHUNK - 1) + 1, dtype=np.int64)
        over = np.flatnonzero(relative_difference(*pair.at(chunk)) > rtol)
        if over.size:
            return int(chunk[over[0]])
    return None


def _bisect(pair: _Pair, low: int, high: int, rtol: float) -> int:
    """Smallest update in (low, high] beyond ``rtol``, given ``high`` is and ``low`` is not."""
    while high - low > 1:
        middle = (low + high) // 2
        if relative_difference(*pair.at(np.array([middle])))[0] > rtol:
            high = middle
        else:
            low = middle
    return high


def _scan_all(pair: _Pair, n: int, rtol: float) -> tuple[float, int, int | None]:
    """(peak, worst update, first update beyond rtol) over every update, CHUNK at a time."""
    peak, worst, first = -1.0, 1, None
    for start in range(1, n + 1, CHUNK):
        chunk = np.arange(start, min(n, start + CHUNK - 1) + 1, dtype=np.int64)
        rel = relative_difference(*pair.at(chunk))
        index = int(np.argmax(rel))
        if rel[index] > peak:
            peak, worst = float(rel[index]), int(chunk[index])
        if first is None and (over := np.flatnonzero(rel > rtol)).size:
            first = int(chunk[over[0]])
    return peak, worst, first


def compare_schedules(m: MegatronSchedule, f: MindFormersSchedule, n_updates: int,
                      rtol: float = 1e-6) -> ScheduleComparison:
    """Both schedules over updates 1..n; update numbers in the result are 1-based."""
    pair, n = _Pair(m, f), int(n_updates)
    steps = np.arange(1, n + 1, dtype=np.int64) if n <= CURVE_LIMIT else sample_updates(n, pair.breakpoints(n))
    a, b = pair.at(steps)
    rel = relative_difference(a, b)
    worst = int(np.argmax(rel)) if rel.size else 0
    peak, worst_update = (float(rel[worst]), int(steps[worst])) if rel.size else (0.0, 1)
    over = np.flatnonzero(rel > rtol)
    first = int(steps[over[0]]) if over.size else None
    exact = n <= CURVE_LIMIT
    if not exact and n <= SCAN_LIMIT:
        peak, worst_update, first = _scan_all(pair, n, rtol)
        exact = True
    elif not exact and first is not None and over[0] > 0 and steps[over[0] - 1] < first - 1:
        low = int(steps[over[0] - 1])
        inside = _first_over(pair, low + 1, first - 1, rtol) if first - low - 1 <= SCAN_LIMIT else \
            _bisect(pair, low, first, rtol)
        first = inside if inside is not None else first
    first_values = tuple(float(x[0]) for x in pair.at(np.array([first]))) if first is not None else None
    return ScheduleComparison(
        updates=n, megatron=a, mindformers=b, max_relative_difference=peak,
        worst_update=worst_update if peak > rtol else None, first_differing_update=first, rtol=rtol,
        steps=steps, exact=exact, first_values=first_values)
