"""MindFormers 2.1.0 learning-rate schedules (``mindformers/core/lr/lr_schedule.py``), by ``lr_schedule.type``.

``schedule(global_step)`` for each class; ``warmup_ratio`` overrides ``warmup_steps`` as
``int(total_steps * ratio)``. MindSpore computes in float32, this module in float64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from workbench.errors import InputError

BREAKPOINT_LIMIT = 4096
"""Periodic schedules (restarts, annealing cycles) list at most this many cycle boundaries."""


@dataclass(frozen=True)
class MindFormersSchedule:
    """A ``lr_schedule`` block. ``lr_end=None`` means the class default: 0 for the cosine
    classes and ``lr_end1`` of ConstantWithCoolDownLR; 1e-7 for PolynomialWithWarmUpLR and
    WarmUpStableDecayLR; ``eta_min`` 0 for CosineAnnealing*. ``options`` holds the other
    keyword arguments: warmup_ratio, decay_steps, decay_ratio, num_cycles, power,
    decay_start_steps/ratio, keep_steps, final_steps, lr_end2, t_max, t_0, t_mult,
    first_global_step."""
    type: str
    learning_rate: float
    warmup_steps: int
    total_steps: int
    lr_end: float | None = None
    warmup_lr_init: float = 0.0
    options: dict = field(default_factory=dict)


def _steps_from_ratio(steps, ratio, total: int, where: str) -> int:
    """``_get_lr_steps``: a ratio in [0, 1] wins as ``int(total * ratio)``."""
    if ratio is None:
        if steps is None:
            raise InputError(where, "is not set", f"set {where} or the matching *_ratio")
        return int(steps)
    if not 0.0 <= float(ratio) <= 1.0:
        raise InputError(where.replace("steps", "ratio"), f"{ratio} is outside [0, 1]", "use a fraction")
    return int(total * float(ratio))


def _warmup(g, w: int, init: float, lr: float, other: np.ndarray) -> np.ndarray:
    """Linear warmup for ``g < w`` (only when w != 0); ``other`` elsewhere."""
    if w == 0:
        return other
    return np.where(g < w, init + (lr - init) * g / w, other)


def _half_cos(progress) -> np.ndarray:
    return np.maximum(0.0, 0.5 * (1.0 + np.cos(np.pi * progress)))


def _mf_lr(s: MindFormersSchedule, kind: str, g: np.ndarray) -> np.ndarray:
    o, lr, T, init = s.options, float(s.learning_rate), int(s.total_steps), float(s.warmup_lr_init)
    w = _steps_from_ratio(s.warmup_steps, o.get("warmup_ratio"), T, "lr_schedule.warmup_steps")

    def end(default: float) -> float:
        value = float(default if s.lr_end is None else s.lr_end)
        if kind in ("PolynomialWithWarmUpLR", "WarmUpStableDecayLR") and not lr > value:
            raise InputError("lr_schedule.lr_end", f"{value} must be smaller than learning_rate {lr}",
                       "MindFormers raises ValueError for this")
        return value

    if kind == "ConstantWarmUpLR":
        return _warmup(g, w, init, lr, np.full(g.shape, lr))
    if kind == "LinearWithWarmUpLR":  # decays to 0 at total_steps; there is no lr_end
        return _warmup(g, w, init, lr, lr * np.maximum(0.0, (T - g) / max(1, T - w)))
    if kind in ("CosineWithWarmUpLR", "CosineWithRestartsAndWarmUpLR"):
        e, span = end(0.0), max(1, T - w)
        d = max(1, int(o["decay_steps"])) if o.get("decay_steps") is not None else max(1, T)
        if kind == "CosineWithWarmUpLR" and o.get("decay_ratio") is not None:
            d = _steps_from_ratio(d, o["decay_ratio"], T, "lr_schedule.decay_steps")
        p = (g - w) / span
        if kind == "CosineWithWarmUpLR":
            body = e + (lr - e) * _half_cos(2.0 * float(o.get("num_cycles", 0.5)) * p)
        else:  # restarts: progress >= 1 returns a literal 0, not lr_end
            cyc = np.mod(float(o.get("num_cycles", 1.0)) * p, 1.0)
            body = np.where(p < 1.0, e + (lr - e) * _half_cos(cyc), 0.0)
        return np.where(g >= d, e, _warmup(g, w, init, lr, body))
    if kind == "PolynomialWithWarmUpLR":  # MindFormers <= 1.x: lr_end once g >= decay_steps
        e, power = end(1e-7), float(o.get("power", 1.0))
        d = max(1, int(o["decay_steps"])) if o.get("decay_steps") is not None else max(1, T - w)
        with np.errstate(invalid="ignore"):
            body = (lr - e) * np.power(1.0 - (g - w) / d, power) + e
        return _warmup(g, w, init, lr, np.where(g > T, e, body))
    if kind == "WarmUpStableDecayLR":  # decay not clamped after total_steps; the source
        # computes the stable phase as lr*g/g, which is NaN at g=0 when warmup is 0: lr here
        e = end(1e-7)
        ds = _steps_from_ratio(o.get("decay_start_steps"), o.get("decay_start_ratio"), T,
                               "lr_schedule.decay_start_steps")
        body = np.where(g < ds, lr, lr - (lr - e) * (g - ds) / (T - ds if T != ds else np.inf))
        return _warmup(g, w, init, lr, body)
    if kind == "ConstantWithCoolDownLR":
        e1 = float(o.get("lr_end1", end(0.0)))
        e2 = o.get("lr_end2") or e1  # MindFormers: `lr_end2 or lr_end1`
        d = max(1, int(o["decay_steps"])) if o.get("decay_steps") is not None else max(1, T)
        if o.get("decay_ratio") is not None:
            d = _steps_from_ratio(d, o["decay_ratio"], T, "lr_schedule.decay_steps")
        keep, fin = max(0, int(o.get("keep_steps") or 0)), max(0, int(o.get("final_steps") or 0))
        cos = e1 + (lr - e1) * _half_cos(2.0 * float(o.get("num_cycles", 0.5)) * (g - keep - w) / d)
        body = np.select([g < w + keep, g < w + keep + d, g < w + keep + d + fin], [lr, cos, e1], float(e2))
        return _warmup(g, w, init, lr, body)
    eta = end(0.0)
    if kind == "CosineAnnealingLR":  # no clamp: after t_max the curve climbs again
        return eta + (lr - eta) * _half_cos(g / _required_int(o, "t_max"))
    t0, mult = _required_int(o, "t_0"), int(o.get("t_mult", 1))
    if mult == 1:
        t_cur, t_i = np.mod(g, t0), float(t0)
    else:
        idx = np.floor(np.log(np.maximum(g, 0) / t0 * (mult - 1.0) + 1.0) / math.log(mult))
        t_i = t0 * np.power(float(mult), idx)
        t_cur = g - t0 * (1.0 - np.power(float(mult), idx)) / (1.0 - mult)
    t_cur, t_i = np.where(g < t0, g, t_cur), np.where(g < t0, float(t0), t_i)
    return eta + (lr - eta) * _half_cos(t_cur / t_i)


def _required_int(options: dict, key: str) -> int:
    if options.get(key) is None or int(options[key]) < 1:
        raise InputError(f"lr_schedule.{key}", "must be a positive integer", f"set lr_schedule.{key}")
    return int(options[key])


_MF_ALIASES = {"constant_with_warmup": "ConstantWarmUpLR", "linear": "LinearWithWarmUpLR",
               "cosine": "CosineWithWarmUpLR", "cosine_with_restarts": "CosineWithRestartsAndWarmUpLR",
               "polynomial": "PolynomialWithWarmUpLR", "cosine_annealing": "CosineAnnealingLR",
               "cosine_annealing_warm_restarts": "CosineAnnealingWarmRestarts"}
MINDFORMERS_TYPES = ("ConstantWarmUpLR", "LinearWithWarmUpLR", "CosineWithWarmUpLR",
                     "CosineWithRestartsAndWarmUpLR", "PolynomialWithWarmUpLR", "WarmUpStableDecayLR",
                     "ConstantWithCoolDownLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts")


def _kind(s: MindFormersSchedule) -> str:
    kind = _MF_ALIASES.get(s.type, s.type)
    if kind not in MINDFORMERS_TYPES:
        raise InputError("lr_schedule.type", f"unsupported schedule {s.type!r}",
                         "use one of: " + ", ".join(MINDFORMERS_TYPES + tuple(_MF_ALIASES)))
    return kind


def mindformers_lr_at(s: MindFormersSchedule, global_step: np.ndarray) -> np.ndarray:
    """``schedule.construct(global_step)`` for each value of ``global_step``."""
    return _mf_lr(s, _kind(s), np.asarray(global_step, dtype=np.float64)).astype(np.float64)


def _cycle_starts(first: float, period: float, limit: float) -> list[float]:
    """``first + k * period`` up to ``limit``, at most BREAKPOINT_LIMIT of them."""
    if period <= 0:
        return []
    count = min(BREAKPOINT_LIMIT, int((limit - first) / period) + 1) if limit >= first else 0
    return [first + k * period for k in range(count)]


def mindformers_breakpoints(s: MindFormersSchedule, last_step: float) -> list[float]:
    """The global steps up to ``last_step`` where the formula changes (cycle boundaries: the first
    BREAKPOINT_LIMIT), so a sampled comparison evaluates the schedule exactly there."""
    kind, o, total = _kind(s), s.options, int(s.total_steps)
    warmup = _steps_from_ratio(s.warmup_steps, o.get("warmup_ratio"), total, "lr_schedule.warmup_steps")
    points = [0.0, float(warmup), float(total)]
    decay = o.get("decay_steps")
    if decay is not None:
        points += [float(decay), float(warmup) + float(decay)]
    if kind == "CosineWithWarmUpLR" and o.get("decay_ratio") is not None:
        points.append(float(_steps_from_ratio(decay or total, o["decay_ratio"], total, "lr_schedule.decay_steps")))
    if kind in ("CosineWithWarmUpLR", "CosineWithRestartsAndWarmUpLR"):
        cycles = float(o.get("num_cycles", 0.5 if kind == "CosineWithWarmUpLR" else 1.0))
        if cycles > 0:
            points += _cycle_starts(warmup, max(1, total - warmup) / (2.0 * cycles), last_step)
    if kind == "WarmUpStableDecayLR":
        points.append(float(_steps_from_ratio(o.get("decay_start_steps"), o.get("decay_start_ratio"), total,
                                              "lr_schedule.decay_start_steps")))
    if kind == "ConstantWithCoolDownLR":
        keep, final = int(o.get("keep_steps") or 0), int(o.get("final_steps") or 0)
        span = int(decay) if decay is not None else total
        points += [float(warmup + keep), float(warmup + keep + span), float(warmup + keep + span + final)]
    if kind == "CosineAnnealingLR":
        points += _cycle_starts(0.0, float(_required_int(o, "t_max")), last_step)
    if kind == "CosineAnnealingWarmRestarts":
        points += _warm_restarts(_required_int(o, "t_0"), int(o.get("t_mult", 1)), last_step)
    return points


def _warm_restarts(t_0: int, mult: int, last_step: float) -> list[float]:
    if mult == 1:
        return _cycle_starts(0.0, float(t_0), last_step)
    points, start, length = [], 0.0, float(t_0)
    while start <= last_step and len(points) < BREAKPOINT_LIMIT:
        points.append(start)
        start, length = start + length, length * mult
    return points
