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

The formulas live in :mod:`.lr_megatron` and :mod:`.lr_mindformers`; the comparison, in bounded
memory for any number of updates, in :mod:`.lr_compare` (docs/lr-schedules.md). This module
keeps the names callers import.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..fileio import atomic_path

from .lr_compare import ScheduleComparison, compare_schedules, relative_difference
from .lr_megatron import MegatronSchedule, megatron_breakpoints, megatron_lr_at
from .lr_mindformers import MINDFORMERS_TYPES, MindFormersSchedule, mindformers_breakpoints, mindformers_lr_at

__all__ = ["MINDFORMERS_TYPES", "MegatronSchedule", "MindFormersSchedule", "ScheduleComparison", "compare_schedules",
           "megatron_breakpoints", "megatron_lr_at", "megatron_lr_per_update", "mindformers_breakpoints",
           "mindformers_lr_at", "mindformers_lr_per_update", "plot_schedules", "relative_difference"]


def megatron_lr_per_update(s: MegatronSchedule, n_updates: int) -> np.ndarray:
    """LR applied at updates 1..n: update k uses ``lr(num_steps=k-1)`` (n floats: for short runs)."""
    return megatron_lr_at(s, np.arange(n_updates, dtype=np.float64))


def mindformers_lr_per_update(s: MindFormersSchedule, n_updates: int) -> np.ndarray:
    """LR applied at updates 1..n: update k uses ``lr(first_global_step + k - 1)`` (n floats)."""
    start = int(s.options.get("first_global_step", 0))
    return mindformers_lr_at(s, np.arange(start, start + n_updates, dtype=np.float64))


def plot_schedules(c: ScheduleComparison, path) -> None:
    """The shared LR figure (:func:`workbench.audit.lr_figure.schedules_figure`), written atomically."""
    from ..report.figures import figure_bytes
    from .lr_figure import schedules_figure

    path = Path(path)
    with atomic_path(path) as temporary:
        temporary.write_bytes(figure_bytes(schedules_figure(c), path.suffix.lstrip(".") or "png"))
