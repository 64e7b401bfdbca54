"""Megatron-LM training-log lines, written by the torch reference trainer.

The iteration line follows ``megatron/training/training.py::training_log`` (core_v0.12)::

     [2025-01-01 12:00:00] iteration        1/       2 | consumed samples:            2 |
     elapsed time per iteration (ms): 12.3 | learning rate: 1.000000E-03 | global batch size:     2 |
     lm loss: 4.852030E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 |
     number of nan iterations:   0 |

(one line; wrapped here). Field formats: ``iteration {:8d}/{:8d}``, ``consumed samples: {:12d}``,
``elapsed time per iteration (ms): {:.1f}``, ``learning rate: {:.6E}``, ``global batch size: {:5d}``,
``lm loss: {:.6E}``, ``loss scale: {:.1f}``, ``grad norm: {:.3f}``, ``number of skipped
iterations: {:3d}``, ``number of nan iterations: {:3d}``. Megatron logs after
``opt_param_scheduler.step()``, so the printed learning rate is the one the *next* update
will use; the trainer reproduces that.

Local norms (the common "local-norm patch" on the Megatron side, mirroring MindFormers'
``local_norm/<param>: value`` monitor lines): right after an iteration line, one line per
parameter, in optimizer order, holding the sum of squares of that parameter's gradient
(before clipping) for that iteration::

    local_norm/decoder.layers.0.input_layernorm.weight: 1.234567890e-03

The value is written with ``{:.9e}``, which round-trips a float32 exactly.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

ITERATION_PATTERN = re.compile(
    r"iteration\s+(\d+)/\s*(\d+) \| consumed samples:\s+(\d+) \| elapsed time per iteration \(ms\): ([\d.]+) \| "
    r"learning rate: ([\d.E+-]+) \| global batch size:\s+(\d+) \| lm loss: ([\d.E+-]+) \| loss scale: ([\d.]+) \| "
    r"grad norm: ([\d.]+) \|")
LOCAL_NORM_PATTERN = re.compile(r"^local_norm/(\S+): ([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))$")
LOCAL_NORM_PREFIX = "local_norm/"


@dataclass(frozen=True)
class IterationRecord:
    """The values of one Megatron iteration line."""

    iteration: int
    train_iters: int
    consumed_samples: int
    elapsed_ms: float
    learning_rate: float
    global_batch_size: int
    lm_loss: float
    loss_scale: float = 1.0
    grad_norm: float | None = None
    skipped_iterations: int = 0
    nan_iterations: int = 0


def format_iteration_line(record: IterationRecord, now: datetime | None = None) -> str:
    """One line exactly as Megatron's ``training_log`` prints it (log_interval 1)."""
    stamp = (now or datetime.now()).strftime("%Y-%m-%d %H:%M:%S")
    text = f" [{stamp}]"
    text += " iteration {:8d}/{:8d} |".format(record.iteration, record.train_iters)
    text += " consumed samples: {:12d} |".format(record.consumed_samples)
    text += " elapsed time per iteration (ms): {:.1f} |".format(record.elapsed_ms)
    text += " learning rate: {:.6E} |".format(record.learning_rate)
    text += " global batch size: {:5d} |".format(record.global_batch_size)
    text += " lm loss: {:.6E} |".format(record.lm_loss)
    text += " loss scale: {:.1f} |".format(record.loss_scale)
    if record.grad_norm is not None:
        text += " grad norm: {:.3f} |".format(record.grad_norm)
    text += " number of skipped iterations: {:3d} |".format(record.skipped_iterations)
    text += " number of nan iterations: {:3d} |".format(record.nan_iterations)
    return text


def format_local_norm_line(name: str, sum_of_squares: float) -> str:
    return f"{LOCAL_NORM_PREFIX}{name}: {sum_of_squares:.9e}"


def parse_iteration_line(line: str) -> IterationRecord | None:
    """The record of an iteration line (``None`` for any other line)."""
    match = ITERATION_PATTERN.search(line)
    if match is None:
        return None
    it, total, samples, ms, lr, gbs, loss, scale, norm = match.groups()
    skipped = re.search(r"number of skipped iterations:\s*(\d+)", line)
    nans = re.search(r"number of nan iterations:\s*(\d+)", line)
    return IterationRecord(int(it), int(total), int(samples), float(ms), float(lr), int(gbs), float(loss),
                           float(scale), float(norm), int(skipped.group(1)) if skipped else 0,
                           int(nans.group(1)) if nans else 0)


def parse_local_norm_line(line: str) -> tuple[str, float] | None:
    """``(parameter name, sum of squares)`` of a local-norm line, else ``None``."""
    match = LOCAL_NORM_PATTERN.match(line.strip())
    return None if match is None else (match.group(1), float(match.group(2)))


def read_local_norms(lines) -> dict[int, dict[str, float]]:
    """Per iteration, the local norms that follow its iteration line, in file order."""
    norms: dict[int, dict[str, float]] = {}
    current = None
    for line in lines:
        record = parse_iteration_line(line)
        if record is not None:
            current = record.iteration
            continue
        parsed = parse_local_norm_line(line)
        if parsed is not None and current is not None:
            norms.setdefault(current, {})[parsed[0]] = parsed[1]
    return norms
