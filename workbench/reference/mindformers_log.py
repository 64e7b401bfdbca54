"""MindFormers training-log text, as ``MFLossMonitor`` and ``_get_loss_output`` print it (docs/framework-facts.md §3-4).

Pure formatting: no mindspore import. The lines below are what MindFormers' stdout logger writes
(``%(asctime)s - mindformers - INFO - %(message)s``) in sink mode::

    2025-01-01 12:00:00,123 - mindformers - INFO - { Epoch:[  1/  1], step:[    2/   19], loss: 10.633, \
per_step_time: 1752ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0, global_norm: [1.508834], \
train_throughput_per_npu: 0.001T
    2025-01-01 12:00:00,123 - mindformers - INFO -   10.5% |█████     | 1.14155 samples/s/p  0:00:29 }

With ``runner_wrapper.local_norm: True`` the wrapper returns per-parameter *sums of squares* (optimizer
order) and the per-parameter sizes, and the monitor logs them before the loss line::

    2025-01-01 12:00:00,123 - mindformers - INFO -  norm_size: (8192, 64, 64, ...)
    local_norm:
    [1.2345678e-03 4.5e-05 ...]

``norm_size`` is the tuple of ``P.Size`` of each gradient, printed as a Python tuple; ``local_norm`` is
the float32 array printed the way numpy prints it (long arrays wrap; more than 1000 values would be
summarised with ``...`` exactly as MindFormers' print would).
"""
from __future__ import annotations

import ast
import datetime as _dt
import re
from pathlib import Path

import numpy as np

LOGGER_NAME = "mindformers"
_FLOAT = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf")


def line_prefix(when: _dt.datetime | None = None) -> str:
    """``2025-01-01 12:00:00,123 - mindformers - INFO - `` (logging's default asctime)."""
    when = when or _dt.datetime.now()
    return f"{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d} - {LOGGER_NAME} - INFO - "


def format_lr(lr: float) -> str:
    """The lr as MindFormers prints a float32 numpy value: ``1e-05``, ``0.001``, ``0.0``."""
    return str(np.float32(lr))


def format_global_norm(global_norm: float) -> str:
    """``ClipGradNorm`` returns a float32 tensor of shape (1,): printed ``[1.508834]``."""
    return str(np.array([global_norm], dtype=np.float32))


def format_loss_message(epoch: int, epochs: int, step: int, steps: int, loss: float, per_step_ms: float,
                        lr: float, global_norm: float, overflow: bool = False, loss_scale: float = 1.0,
                        throughput_tflops: float | None = None, mean_loss: float | None = None) -> str:
    """The ``{ Epoch:[...]`` message; ``mean_loss`` switches to the non-sink ``loss:[cur/mean]`` form."""
    loss_text = "loss: %5.3f" % loss if mean_loss is None else "loss:[%5.3f/%5.3f]" % (loss, mean_loss)
    tail = ", train_throughput_per_npu: %.3fT" % throughput_tflops if throughput_tflops is not None else ""
    return ("{ Epoch:[%3d/%3d], step:[%5d/%5d], %s, per_step_time: %dms, lr: %s, overflow cond: %s, "
            "loss_scale: %s, global_norm: %s%s" % (epoch, epochs, step, steps, loss_text, int(per_step_ms),
                                                   format_lr(lr), bool(overflow), np.float32(loss_scale),
                                                   format_global_norm(global_norm), tail))


def format_progress_message(percent: float, samples_per_second: float, seconds_remaining: float) -> str:
    """The second ``MFLossMonitor`` line: progress bar, samples/s/p and the time left."""
    bar = ("|%%-%ds|" % 50) % (int(50 * percent / 100) * "\u2588")
    remaining = _dt.timedelta(seconds=int(seconds_remaining))
    return "  %4.1f%% %s %.5f samples/s/p  %s }" % (percent, bar, samples_per_second, remaining)


def format_local_norm_message(sizes, local_norms) -> str:
    """`` norm_size: (…)`` then ``local_norm:`` then the float32 array (a three-plus-line message)."""
    sizes = tuple(int(size) for size in sizes)
    return f" norm_size: {sizes}\nlocal_norm:\n{np.asarray(local_norms, dtype=np.float32)}"


def parse_local_norm_block(text: str) -> tuple[tuple[int, ...], np.ndarray]:
    """Read back the sizes and values of one local-norm block (the first one in ``text``)."""
    sizes_match = re.search(r"norm_size: (\([^)]*\))", text)
    start = text.index("local_norm:", sizes_match.end() if sizes_match else 0)
    body = text[text.index("[", start):]
    body = body[:body.index("]") + 1]
    values = np.array([float(x) for x in _FLOAT.findall(body)], dtype=np.float32)
    sizes = tuple(ast.literal_eval(sizes_match.group(1))) if sizes_match else ()
    return sizes, values


class MindFormersLogWriter:
    """Append MindFormers-formatted lines to a file (each message gets the logger prefix once)."""

    def __init__(self, path: str | Path, clock=None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        self._clock = clock or _dt.datetime.now

    def info(self, message: str) -> None:
        self._file.write(line_prefix(self._clock()) + message + "\n")
        self._file.flush()

    def step(self, *, epoch: int, epochs: int, step: int, steps: int, loss: float, per_step_ms: float, lr: float,
             global_norm: float, global_batch_size: int, throughput_tflops: float | None = None,
             local_norm: tuple | None = None) -> None:
        """All lines MindFormers writes for one step: local-norm block (optional), loss line, progress."""
        if local_norm is not None:
            self.info(format_local_norm_message(*local_norm))
        self.info(format_loss_message(epoch, epochs, step, steps, loss, per_step_ms, lr, global_norm,
                                      throughput_tflops=throughput_tflops))
        seconds = max(per_step_ms, 1e-3) / 1000.0
        percent = ((epoch - 1) * steps + step) / (epochs * steps) * 100
        remaining = ((epochs - epoch + 1) * steps - step) * seconds
        self.info(format_progress_message(percent, global_batch_size / seconds, remaining))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "MindFormersLogWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
