"""Simulate the learning rate each framework applies at every optimizer update.

Update ``k`` (1-based) is the k-th *successful* optimizer update.

Megatron (``megatron/core/optimizer_param_scheduler.py``, ``megatron/training/training.py``):
``OptimizerParamScheduler.__init__`` calls ``step(0)``, which writes ``get_lr()`` into the
param groups. ``train_step`` runs ``optimizer.step()`` and only then, if the update
succeeded, calls ``opt_param_scheduler.step(increment=global_batch_size)``. So update ``k``
uses ``lr(num_steps=k-1)``. Skipped updates (loss-scale overflow) do not advance it. Counts
are in samples (iterations times global_batch_size). Every threshold scales by the same
factor, so this module works in iterations. ``--lr-warmup-fraction f`` gives
``warmup = f * lr_decay_iters``, which can be fractional: pass it as a float. ``get_lr``
checks, in order: warmup, linear from ``lr_warmup_init`` while
``num_steps <= warmup`` (if warmup > 0); style ``constant``, which gives max_lr;
``num_steps > decay_steps``, which gives min_lr; the decay style.

MindFormers 2.1.0 (``mindformers/core/lr/lr_schedule.py``) on MindSpore >= 2.2: the
optimizer evaluates ``schedule(global_step)`` and then ``global_step += 1``. ``global_step``
starts at 0, so update ``k`` uses ``lr(k-1)``, and the first update uses ``lr(0)``.
MindFormers ``FusedAdamW`` (``AdamW`` with ``use_fused=True``) starts ``global_step``
at -1. For it set ``options["first_global_step"] = -1``; this was read from the source,
not run. ``warmup_ratio`` overrides ``warmup_steps`` as ``int(total_steps * ratio)``.
MindSpore does the arithmetic in float32; this module uses float64, so expect differences
near 1e-7 relative.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.errors import InputError
from workbench.fileio import atomic_path

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


def _bad(where: str, problem: str, fix: str) -> InputError:
    return InputError(where=where, problem=problem, fix=fix)


def _megatron_style(name: str, table: dict, where: str) -> str:
    """Look ``name`` up case-insensitively (``inverse_square_root`` is accepted too)."""
    key = str(name).strip().lower()
    key = key.replace("_", "-") if key.replace("_", "-") in table else key
    if key not in table:
        raise _bad(where, f"unknown value {name!r}", "use one of: " + ", ".join(sorted(set(table.values()))))
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
        raise _bad("megatron.lr_decay_iters", f"needs 0 <= warmup ({w}) < decay steps ({d})",
                   "Megatron asserts lr_warmup_steps < lr_decay_steps")
    n = np.asarray(num_steps, dtype=np.float64)
    hi, lo = float(s.lr), float(s.min_lr)
    if style == "constant":
        out = np.full(n.shape, hi)
    elif style == "inverse-square-root":
        out = np.maximum(lo, hi * math.sqrt(max(w, 1.0)) / np.sqrt(np.maximum(n, 1.0)))
    else:
        coeff = _decay_coeff(style, np.clip((n - w) / (d - w), 0.0, 1.0)) if style != "WSD" else None
        if coeff is None:
            if s.wsd_decay_steps is None:
                raise _bad("megatron.lr_wsd_decay_iters", "WSD needs lr_wsd_decay_iters",
                           "set --lr-wsd-decay-iters")
            wsd_style = _megatron_style(s.wsd_decay_style, _WSD_STYLES, "megatron.lr_wsd_decay_style")
            anneal_start = d - float(s.wsd_decay_steps)
            wsd_ratio = np.clip((n - anneal_start) / max(float(s.wsd_decay_steps), 1e-300), 0.0, 1.0)
            coeff = np.where(n <= anneal_start, 1.0, _decay_coeff(wsd_style, wsd_ratio))
        out = lo + coeff * (hi - lo)
    if style != "constant":
        out = np.where(n > d, lo, out)
    if w > 0:
        out = np.where(n <= w, s.warmup_init + (hi - s.warmup_init) * n / w, out)
    return out


def megatron_lr_per_update(s: MegatronSchedule, n_updates: int) -> np.ndarray:
    """LR applied at updates 1..n: update k uses ``lr(num_steps=k-1)``."""
    return megatron_lr_at(s, np.arange(n_updates, dtype=np.float64))


# --- MindFormers ------------------------------------------------------------------------
def _steps_from_ratio(steps, ratio, total: int, where: str) -> int:
    """``_get_lr_steps``: a ratio in [0, 1] wins as ``int(total * ratio)``."""
    if ratio is None:
        if steps is None:
            raise _bad(where, "is not set", f"set {where} or the matching *_ratio")
        return int(steps)
    if not 0.0 <= float(ratio) <= 1.0:
        raise _bad(where.replace("steps", "ratio"), f"{ratio} is outside [0, 1]", "use a fraction")
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
            raise _bad("lr_schedule.lr_end", f"{value} must be smaller than learning_rate {lr}",
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
        raise _bad(f"lr_schedule.{key}", "must be a positive integer", f"set lr_schedule.{key}")
    return int(options[key])


_MF_ALIASES = {"constant_with_warmup": "ConstantWarmUpLR", "linear": "LinearWithWarmUpLR",
               "cosine": "CosineWithWarmUpLR", "cosine_with_restarts": "CosineWithRestartsAndWarmUpLR",
               "polynomial": "PolynomialWithWarmUpLR", "cosine_annealing": "CosineAnnealingLR",
               "cosine_annealing_warm_restarts": "CosineAnnealingWarmRestarts"}
MINDFORMERS_TYPES = ("ConstantWarmUpLR", "LinearWithWarmUpLR", "CosineWithWarmUpLR",
                     "CosineWithRestartsAndWarmUpLR", "PolynomialWithWarmUpLR", "WarmUpStableDecayLR",
                     "ConstantWithCoolDownLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts")


def mindformers_lr_at(s: MindFormersSchedule, global_step: np.ndarray) -> np.ndarray:
    """``schedule.construct(global_step)`` for each value of ``global_step``."""
    kind = _MF_ALIASES.get(s.type, s.type)
    if kind not in MINDFORMERS_TYPES:
        raise _bad("lr_schedule.type", f"unsupported schedule {s.type!r}",
                   "use one of: " + ", ".join(MINDFORMERS_TYPES + tuple(_MF_ALIASES)))
    return _mf_lr(s, kind, np.asarray(global_step, dtype=np.float64)).astype(np.float64)


def mindformers_lr_per_update(s: MindFormersSchedule, n_updates: int) -> np.ndarray:
    """LR applied at updates 1..n: update k uses ``lr(first_global_step + k - 1)``."""
    start = int(s.options.get("first_global_step", 0))
    return mindformers_lr_at(s, np.arange(start, start + n_updates, dtype=np.float64))


# --- comparison ---------------------------------------------------------------------------
@dataclass
class ScheduleComparison:
    updates: int
    megatron: np.ndarray
    mindformers: np.ndarray
    max_relative_difference: float
    worst_update: int | None
    first_differing_update: int | None
    rtol: float


def relative_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a-b| / max(|a|,|b|)``; 0 where both are 0; inf where either is NaN."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1.0), 0.0)
    return np.where(np.isnan(a) | np.isnan(b), np.inf, rel)


def compare_schedules(m: MegatronSchedule, f: MindFormersSchedule, n_updates: int,
                      rtol: float = 1e-6) -> ScheduleComparison:
    """Both schedules over updates 1..n; update numbers in the result are 1-based."""
    a, b = megatron_lr_per_update(m, n_updates), mindformers_lr_per_update(f, n_updates)
    rel = relative_difference(a, b)
    worst = int(np.argmax(rel)) if rel.size else 0
    peak = float(rel[worst]) if rel.size else 0.0
    over = np.flatnonzero(rel > rtol)
    return ScheduleComparison(
        updates=n_updates, megatron=a, mindformers=b, max_relative_difference=peak,
        worst_update=worst + 1 if peak > rtol else None,
        first_differing_update=int(over[0]) + 1 if over.size else None, rtol=rtol)


def plot_schedules(c: ScheduleComparison, path) -> None:
    """Two panels (both curves; relative difference), rendered with Agg, written atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    x = np.arange(1, c.updates + 1)
    fig = Figure(figsize=(9, 6), constrained_layout=True)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.plot(x, c.megatron, label="Megatron", lw=1.2)
    top.plot(x, c.mindformers, label="MindFormers", lw=1.2, ls="--")
    top.set_ylabel("learning rate")
    top.legend()
    top.set_title(f"max relative difference {c.max_relative_difference:.3g}"
                  + (f", first beyond rtol={c.rtol:g} at update {c.first_differing_update}"
                     if c.first_differing_update else ""))
    bottom.plot(x, relative_difference(c.megatron, c.mindformers), color="tab:red", lw=1.0)
    bottom.axhline(c.rtol, color="grey", ls=":", lw=1.0)
    bottom.set_ylabel("relative difference")
    bottom.set_xlabel("optimizer update")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary:
        fig.savefig(temporary, format=(path.suffix.lstrip(".") or "png"), dpi=110)
