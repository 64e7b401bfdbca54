"""The two tidy tables every training-log reader returns, and the vocabulary of their columns.

Scalar series (losses, norms, lr, ...): one row per (run, rank, step, metric)::

    run     str    the run's label (default: the file's stem)
    rank    int    the rank that printed it (-1: not known / the only one)
    step    int    the 1-based optimizer UPDATE the value belongs to (not the line's own counter:
                   Megatron prints the next update's lr on iteration N's line, so that lr is step N+1)
    metric  str    canonical metric name (METRICS below; per-format aliases live in datasets/ YAML)
    value   float  nan where the log printed nan / None
    line    int    1-based line number in the source file (0: not from a text line)

Every int column (rank, step, line; micro_step, position, numel below) is int32, or int64 in a table
where one of that column's values does not fit (``tables.narrow``).

Per-parameter local norms: one row per (run, rank, step, micro_step, position)::

    run, rank, step, line   as above
    micro_step  int    -1 when the value covers the whole step
    position    int    0-based position in the printed order (optimizer order for nameless lists)
    param       str    the parameter name, "" when the source prints none (names are recovered later)
    numel       int    element count when the source says it (MindFormers ``norm_size``), else -1
    value       float  the number as printed
    definition  str    what the number IS (DEFINITIONS below); never mix definitions in a comparison
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

SERIES_COLUMNS = ("run", "rank", "step", "metric", "value", "line")
LOCAL_NORM_COLUMNS = ("run", "rank", "step", "micro_step", "position", "param", "numel", "value",
                      "definition", "line")

METRICS = {
    "loss": "the loss as printed (MindFormers mcore: lm + aux + mtp; Megatron prints no total)",
    "lm_loss": "language-model cross entropy (Megatron 'lm loss'; MindFormers 'lm_loss' pieces)",
    "load_balancing_loss": "MoE auxiliary load-balancing loss",
    "z_loss": "MoE router z-loss",
    "mtp_loss": "multi-token-prediction loss (all depths summed unless mtp_<i>_loss)",
    "grad_norm": "pre-clip global L2 norm of the gradients",
    "lr": "learning rate used by the update in `step`",
    "loss_scale": "dynamic/static loss scale",
    "params_norm": "L2 norm of the parameters",
    "num_zeros": "number of zero gradient elements",
    "skipped_iterations": "iterations skipped in the log interval",
    "nan_iterations": "iterations with nan in the log interval",
    "overflow": "1.0 when the step overflowed (update skipped), else 0.0",
    "step_time_ms": "wall time per step / iteration in milliseconds",
    "throughput": "throughput as printed (TFLOP/s per device)",
    "consumed_samples": "samples consumed so far",
    "global_batch_size": "global batch size",
    "skipped_samples": "samples skipped so far (Megatron 'skipped samples')",
    "decoupled_lr": "Megatron's decoupled learning rate (embedding / output layer), used by `step`",
    "theoretical_throughput": "MindSpeed-LLM's theoretical throughput per NPU (TFLOP/s)",
}

DEFINITIONS = {
    "sum_sq_step": "sum of squares of the fp32 gradient, unscaled, before the DP reduce, whole step "
                   "(MindFormers runner_wrapper.local_norm; the Megatron local-norm patch)",
    "l2_micro_step": "L2 norm of the rank-local gradient before the reduce, per micro step "
                     "(MindFormers monitor_config / TrainingStateMonitor)",
    "l2_over_grad_factor": "L2 norm divided by the gradient factor (MindFormers PyNative trainer monitor)",
    "sum_sq_reduced": "sum of squares of the DP-reduced gradient before unscale/clip "
                      "(computed from Megatron --save-wgrads-interval files)",
    "l2_reduced": "L2 norm of the reduced gradient (msprobe monitor grad_reduced)",
    "l2_unreduced": "L2 norm of the rank-local gradient (msprobe monitor grad_unreduced)",
}


DEFINITION_TRAITS = {            # definition -> (the value is a sum of squares, the span it covers)
    "sum_sq_step": (True, "step"), "sum_sq_reduced": (True, "step"), "l2_reduced": (False, "step"),
    "l2_unreduced": (False, "step"), "l2_micro_step": (False, "micro_step"),
    "l2_over_grad_factor": (False, "micro_step"),
}
assert set(DEFINITION_TRAITS) == set(DEFINITIONS), "every definition has its traits, beside its meaning"

@dataclass
class LogSeries:
    """What a log reader returns: the two tables, what the reader learned, and what it noticed."""

    source: str
    format: str                                            # e.g. "megatron", "mindformers"
    series: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(SERIES_COLUMNS)))
    local_norms: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(LOCAL_NORM_COLUMNS)))
    facts: dict = field(default_factory=dict)              # e.g. {"log_interval": 10, "version": "r1.7+"}
    notes: list[str] = field(default_factory=list)         # said to the user (interval means, shifts, '...')
    param_order: list[str] | None = None                   # names in optimizer order, when the log says them

    def metric(self, name: str) -> pd.Series:
        """``value`` indexed by ``step`` for one metric (rank-less view; first rank wins)."""
        rows = self.series[self.series["metric"] == name].drop_duplicates("step")
        return rows.set_index("step")["value"].sort_index()
