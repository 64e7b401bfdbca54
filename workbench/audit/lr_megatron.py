"""Megatron's learning rate: ``OptimizerParamScheduler.get_lr`` (megatron/core/optimizer_param_scheduler.py).

Counts are in iterations (Megatron counts samples, iterations times global_batch_size; every
threshold scales by the same factor). ``get_lr`` checks, in order: linear warmup from
``lr_warmup_init`` while ``num_steps <= warmup`` (if warmup > 0); style ``constant``, which gives
max_lr; ``num_steps > decay_steps``, which gives min_lr; the decay style.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workbench.errors import InputError

_MEGATRON_STYLES = {"constant": "constant", "linear": "linear", "cosine": "cosine",
                    "inverse-square-root": "inverse-square-root", "wsd": "WSD"}
_WSD_STYLES = {"exponential": "exponential", "linear": "linear", "cosine": "cosine",
               "minus_sqrt": "minus_sqrt", "1-sqrt": "minus_sqrt"}


@dataclass(frozen=True)
class MegatronSchedule:
    """Megatron arguments in *iterations*: ``--lr``, ``--min-lr`` (default 0),
    ``--lr-warmup-iters`` (default 0), ``--lr-decay-iters`` (default train_iters),
    ``--lr-decay-style`` (default linear), ``--lr-warmup-init`` (default 0),
    ``--lr-wsd-decay-iters``, ``--lr-wsd-decay-style`` (default exponential)."""
    lr: float
    min_lr: float
    warmup_steps: float
    decay_steps: float
    style: str
    warmup_init: float = 0.0
    wsd_decay_steps: float | None = None
    wsd_decay_style: str = "exponential"


def _megatron_style(name: str, table: dict, where: str) -> str:
    """Look ``name`` up case-insensitively (``inverse_square_root`` is accepted too)."""
    key = str(name).strip().lower()
    key = key.replace("_", "-") if key.replace("_", "-") in table else key
    if key not in table:
        raise InputError(where, f"unknown value {name!r}", "use one of: " + ", ".join(sorted(set(table.values()))))
    return table[key]


def _decay_coeff(style: str, ratio: np.ndarray) -> np.ndarray:
    """Megatron's decay coefficient (1 -> 0) for ``ratio`` in [0, 1]."""
    if style == "linear":
        return 1.0 - ratio
    if style == "cosine":
        return 0.5 * (np.cos(np.pi * ratio) + 1.0)
    if style == "exponential":
        return 2.0 * np.power(0.5, ratio) - 1.0
    return 1.0 - np.sqrt(ratio)  # minus_sqrt


def megatron_lr_at(s: MegatronSchedule, num_steps: np.ndarray) -> np.ndarray:
    """``OptimizerParamScheduler.get_lr`` evaluated at each value of ``num_steps``."""
    style = _megatron_style(s.style, _MEGATRON_STYLES, "megatron.lr_decay_style")
    w, d = float(s.warmup_steps), float(s.decay_steps)
    if d <= 0 or w >= d:
        raise InputError("megatron.lr_decay_iters", f"needs 0 <= warmup ({w}) < decay steps ({d})",
                         "Megatron asserts lr_warmup_steps < lr_decay_steps")
    n = np.asarray(num_steps, dtype=np.float64)
    hi, lo = float(s.lr), float(s.min_lr)
    if style == "constant":
        out = np.full(n.shape, hi)
    elif style == "inverse-square-root":
        out = np.maximum(lo, hi * math.sqrt(max(w, 1.0)) / np.sqrt(np.maximum(n, 1.0)))
    else:
        coeff = _decay_coeff(style, np.clip((n - w) / (d - w), 0.0, 1.0)) if style != "WSD" else _wsd_coeff(s, n)
        out = lo + coeff * (hi - lo)
    if style != "constant":
        out = np.where(n > d, lo, out)
    if w > 0:
        out = np.where(n <= w, s.warmup_init + (hi - s.warmup_init) * n / w, out)
    return out


def _wsd_coeff(s: MegatronSchedule, n: np.ndarray) -> np.ndarray:
    """WSD: 1 until ``decay_steps - wsd_decay_steps``, then the WSD decay style down to 0."""
    if s.wsd_decay_steps is None:
        raise InputError("megatron.lr_wsd_decay_iters", "WSD needs lr_wsd_decay_iters", "set --lr-wsd-decay-iters")
    wsd_style = _megatron_style(s.wsd_decay_style, _WSD_STYLES, "megatron.lr_wsd_decay_style")
    anneal_start = float(s.decay_steps) - float(s.wsd_decay_steps)
    wsd_ratio = np.clip((n - anneal_start) / max(float(s.wsd_decay_steps), 1e-300), 0.0, 1.0)
    return np.where(n <= anneal_start, 1.0, _decay_coeff(wsd_style, wsd_ratio))


def megatron_breakpoints(s: MegatronSchedule) -> list[float]:
    """The ``num_steps`` where the formula changes: start, warmup end, WSD anneal start, decay end."""
    points = [0.0, float(s.warmup_steps), float(s.decay_steps)]
    if s.wsd_decay_steps is not None:
        points.append(float(s.decay_steps) - float(s.wsd_decay_steps))
    return points
