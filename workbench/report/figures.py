"""Shared figures (matplotlib, Agg backend, imported only when drawing).

Every figure has a title, labelled axes with units, and names both sides by their file, so a
picture read on its own says what it compares. Three kinds serve every command:

* :func:`series_with_difference` -- two (or more) series overlaid, with an optional noise band,
  over an absolute-difference panel and a relative-difference panel (log scale when the
  magnitudes span decades);
* :func:`bar_relative_differences` -- per-item relative differences, sorted, outliers highlighted;
* :func:`heatmap` -- a (layer x module) grid, log colour scale.
"""
from __future__ import annotations

import io
from typing import Mapping, Sequence

import numpy as np

SIDE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")
HIGHLIGHT = "tab:red"


def new_figure(rows: int = 1, height_ratios: Sequence[float] | None = None, width: float = 9.0,
               height: float | None = None):
    """A matplotlib Figure on the Agg canvas (no display needed) and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height or 2.4 + 2.2 * rows), constrained_layout=True)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, 1, sharex=True, gridspec_kw={"height_ratios": height_ratios} if height_ratios else None)
    return fig, (list(axes) if rows > 1 else [axes])


def relative_difference(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """|other - reference| / |reference| (0 where both are 0, inf where only the reference is)."""
    reference, other = np.asarray(reference, dtype=np.float64), np.asarray(other, dtype=np.float64)
    difference = np.abs(other - reference)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(difference == 0, 0.0, difference / np.abs(reference))


def _spans_decades(values: np.ndarray) -> bool:
    positive = values[np.isfinite(values) & (values > 0)]
    return positive.size > 1 and positive.max() / positive.min() > 100


def series_with_difference(x: np.ndarray, series: Mapping[str, np.ndarray], *, title: str, ylabel: str,
                           xlabel: str = "step", band: tuple[np.ndarray, np.ndarray] | None = None,
                           band_label: str = "reference noise band", relative_band: np.ndarray | None = None,
                           threshold: float | None = None, logy: bool | None = None):
    """Overlay of the series (the first is the reference) above |difference| and relative difference.

    ``band`` is (low, high) around the reference in the series' units; ``relative_band`` is the
    reference's own run-to-run relative spread, drawn in the relative panel; ``threshold`` a
    horizontal line there.
    """
    labels = list(series)
    x = np.asarray(x)
    values = [np.asarray(series[label], dtype=np.float64) for label in labels]
    fig, (top, middle, bottom) = new_figure(3, height_ratios=(2.2, 1, 1), height=8.0)
    if band is not None:
        top.fill_between(x, band[0], band[1], color="grey", alpha=0.25, lw=0, label=band_label)
    for index, (label, y) in enumerate(zip(labels, values, strict=True)):
        top.plot(x, y, lw=1.2, color=SIDE_COLOURS[index % len(SIDE_COLOURS)], label=label,
                 ls="-" if index == 0 else "--")
    top.set_ylabel(ylabel)
    top.set_title(wrapped(title), wrap=True)
    top.legend(fontsize=8, loc="best")
    if logy if logy is not None else _spans_decades(np.concatenate(values)):
        top.set_yscale("log")
    for index, y in enumerate(values[1:], start=1):
        colour = SIDE_COLOURS[index % len(SIDE_COLOURS)]
        middle.plot(x, y - values[0], lw=1.0, color=colour, label=f"{labels[index]} − {labels[0]}")
        bottom.plot(x, relative_difference(values[0], y), lw=1.0, color=colour, label=labels[index])
    middle.axhline(0.0, color="black", lw=0.6)
    middle.set_ylabel("difference")
    if len(labels) > 1:
        middle.legend(fontsize=7, loc="best")
    if relative_band is not None:
        bottom.fill_between(x, 0, relative_band, color="grey", alpha=0.25, lw=0, label=band_label)
    if threshold is not None:
        bottom.axhline(threshold, color=HIGHLIGHT, ls=":", lw=1.0, label=f"threshold {threshold:g}")
    bottom.set_ylabel("relative difference")
    bottom.set_xlabel(xlabel)
    relative = np.concatenate([relative_difference(values[0], y) for y in values[1:]]) if len(values) > 1 else []
    if len(relative) and _spans_decades(np.asarray(relative)):
        bottom.set_yscale("log")
    if threshold is not None or relative_band is not None:
        bottom.legend(fontsize=8, loc="best")
    return fig


def bar_relative_differences(names: Sequence[str], values: Sequence[float], *, title: str,
                             xlabel: str = "relative difference", threshold: float | None = None,
                             outliers: set[str] | None = None, max_bars: int = 40):
    """Horizontal bars, largest first (at most ``max_bars``); outliers in red; log scale when useful."""
    order = np.argsort(-np.nan_to_num(np.asarray(values, dtype=np.float64), nan=np.inf))[:max_bars]
    shown_names = [str(names[i]) for i in order][::-1]
    shown = np.asarray([values[i] for i in order], dtype=np.float64)[::-1]
    outliers = outliers or set()
    fig, (axis,) = new_figure(1, width=9.0, height=min(1.5 + 0.28 * len(shown_names), 14.0))
    colours = [HIGHLIGHT if name in outliers else "tab:blue" for name in shown_names]
    axis.barh(range(len(shown_names)), np.where(np.isfinite(shown), shown, np.nan), color=colours)
    axis.set_yticks(range(len(shown_names)), shown_names, fontsize=7)
    if _spans_decades(shown if threshold is None or not threshold > 0 else np.append(shown, threshold)):
        axis.set_xscale("log")          # values over decades, or a threshold far below them: both stay visible
    if threshold is not None:
        axis.axvline(threshold, color="grey", ls=":", lw=1.0, label=f"threshold {threshold:g}")
        axis.legend(fontsize=8, loc="lower right")
    axis.set_xlabel(xlabel)
    suffix = f" (largest {len(shown_names)} of {len(values)})" if len(values) > len(shown_names) else ""
    axis.set_title(wrapped(title + suffix), wrap=True)
    return fig


def wrapped(title: str, width: int = 80) -> str:
    """A long title on several lines (a figure clips one long line at its edge); the titles are also set with
    ``wrap=True``, which wraps again where the axes sit off-centre (long tick labels on the left)."""
    import textwrap

    return "\n".join(textwrap.wrap(title, width, break_on_hyphens=False)) or title


def heatmap(matrix: np.ndarray, row_labels: Sequence[str], column_labels: Sequence[str], *, title: str,
            colorbar_label: str, log: bool = True, xlabel: str = "module", ylabel: str = "layer"):
    """A grid of values (nan = absent), log colour scale by default."""
    from matplotlib.colors import LogNorm

    matrix = np.asarray(matrix, dtype=np.float64)
    fig, (axis,) = new_figure(1, width=max(6.0, 0.6 * len(column_labels) + 3),
                              height=max(3.0, 0.35 * len(row_labels) + 2))
    positive = matrix[np.isfinite(matrix) & (matrix > 0)]
    norm = LogNorm(vmin=positive.min(), vmax=max(positive.max(), positive.min() * 10)) if log and positive.size else None
    image = axis.imshow(np.ma.masked_invalid(np.where(matrix > 0, matrix, np.nan) if norm else matrix),
                        aspect="auto", cmap="viridis", norm=norm)
    axis.set_xticks(range(len(column_labels)), column_labels, rotation=45, ha="right", fontsize=8)
    axis.set_yticks(range(len(row_labels)), row_labels, fontsize=8)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.set_title(wrapped(title), wrap=True)
    fig.colorbar(image, ax=axis, label=colorbar_label)
    return fig


def figure_bytes(fig, kind: str = "png", dpi: int = 110) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=kind, dpi=dpi)
    return buffer.getvalue()


def figure_data_uri(fig) -> str:
    """``data:image/png;base64,...`` for embedding in a self-contained HTML page."""
    import base64

    return "data:image/png;base64," + base64.b64encode(figure_bytes(fig, "png")).decode("ascii")
