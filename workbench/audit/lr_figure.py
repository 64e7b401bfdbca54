"""The LR-schedule figure (``workbench checklist --plot-lr``): three panels over the optimizer updates,

1. both learning rates, sides named by their file in the legend;
2. each side divided by its own peak (lr / peak), so schedules with different peaks still show where
   warmup ends and how fast each decays;
3. the relative difference, with the tolerance as a line (log scale when it spans decades);

with each side's warmup end and decay end marked, and the assumed MindFormers run length said on the
plot. Long schedules are decimated to at most ``BUCKETS`` pixel buckets, each keeping its minimum and
its maximum (so a one-update spike survives); the figure costs the same for 1 k or 15 M updates.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BUCKETS = 2000
SIDE_STYLE = (("tab:blue", "-"), ("tab:orange", "--"))


@dataclass
class ScheduleMarks:
    """Where each side's phases end (update numbers), and the assumed run length if any."""

    warmup: dict[str, float] = field(default_factory=dict)     # side label -> warmup end
    decay: dict[str, float] = field(default_factory=dict)      # side label -> decay end
    assumed: str = ""                                           # e.g. "MindFormers run length assumed 2000 updates"


def decimate(x: np.ndarray, *series: np.ndarray, buckets: int = BUCKETS) -> tuple[np.ndarray, ...]:
    """At most ``2 * buckets`` points per series: in each bucket of consecutive samples, the sample where
    any series is lowest and where it is highest (both, in update order). Short inputs come back whole."""
    x = np.asarray(x)
    n = len(x)
    if n <= 2 * buckets:
        return (x, *(np.asarray(s, dtype=np.float64) for s in series))
    size = -(-n // buckets)
    padded = size * buckets
    keep = []
    for values in series:
        values = np.asarray(values, dtype=np.float64)
        grid = np.concatenate([values, np.full(padded - n, values[-1])]).reshape(buckets, size)
        start = np.arange(buckets) * size
        keep += [np.minimum(start + np.argmin(grid, axis=1), n - 1), np.minimum(start + np.argmax(grid, axis=1), n - 1)]
    index = np.unique(np.concatenate(keep + [np.array([0, n - 1])]))
    return (x[index], *(np.asarray(s, dtype=np.float64)[index] for s in series))


def _peak(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def _relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1.0), 0.0)


def _marks(axes, marks: ScheduleMarks, labels: list[str]) -> None:
    for index, label in enumerate(labels):
        colour = SIDE_STYLE[index % 2][0]
        side = label.split(" (")[0]
        for kind, where, style in (("warmup end", marks.warmup.get(side), ":"), ("decay end", marks.decay.get(side), "-.")):
            if where is None or where <= 0:
                continue
            for axis_index, axis in enumerate(axes):
                axis.axvline(where, color=colour, ls=style, lw=0.9, alpha=0.8,
                             label=f"{side} {kind} ({where:,.0f})" if axis_index == 0 else None)


def schedules_figure(comparison, megatron_name: str = "Megatron", mindformers_name: str = "MindFormers",
                     marks: ScheduleMarks | None = None):
    """Figure of a :class:`workbench.audit.lr_compare.ScheduleComparison`; sides named by file."""
    from ..report.figures import new_figure

    marks = marks or ScheduleMarks()
    x, lr_m, lr_f = decimate(np.asarray(comparison.steps), comparison.megatron, comparison.mindformers)
    labels = [f"Megatron ({megatron_name})", f"MindFormers ({mindformers_name})"]
    fig, (top, middle, bottom) = new_figure(3, height_ratios=(2.0, 1.6, 1.0), height=9.0)
    title = f"Learning-rate schedules over {comparison.updates:,} updates: max relative difference " \
            f"{comparison.max_relative_difference:.3g}"
    if comparison.first_differing_update:
        title += f"\nfirst beyond rtol {comparison.rtol:g} at update {comparison.first_differing_update:,}"
    if marks.assumed:
        title += f"\n{marks.assumed}"
    for index, (label, values) in enumerate(zip(labels, (lr_m, lr_f), strict=True)):
        colour, style = SIDE_STYLE[index]
        peak = _peak(values)
        top.plot(x, values, color=colour, ls=style, lw=1.2, label=label)
        middle.plot(x, values / peak, color=colour, ls=style, lw=1.2, label=f"{label.split(' (')[0]}: peak {peak:.3g}")
    _marks((top, middle, bottom), marks, labels)
    top.set_title(title, fontsize=10)
    top.set_ylabel("learning rate")
    top.legend(fontsize=7, loc="best")
    middle.set_ylabel("lr / peak")
    middle.set_ylim(-0.05, 1.08)
    middle.legend(fontsize=7, loc="best")
    relative = _relative(lr_m, lr_f)
    bottom.plot(x, relative, color="tab:red", lw=1.0, label="|Megatron − MindFormers| / max")
    bottom.axhline(comparison.rtol, color="black", ls=":", lw=0.8, label=f"rtol {comparison.rtol:g}")
    positive = relative[relative > 0]
    if positive.size and positive.max() / max(positive.min(), 1e-300) > 100:
        bottom.set_yscale("log")
    bottom.set_ylabel("relative difference")
    sampled = len(comparison.steps) != comparison.updates
    bottom.set_xlabel("optimizer update" + (f" (curves at {len(comparison.steps):,} sampled updates, every breakpoint "
                                            "kept)" if sampled else ""))
    bottom.legend(fontsize=7, loc="best")
    return fig
