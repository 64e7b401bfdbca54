"""MindFormers training-log text, as ``MFLossMonitor`` and ``_get_loss_output`` print it (docs/framework-facts.md §3-4).

Pure formatting: no mindspore import. The lines below are what MindFormers 2.1.0's stdout logger
writes in sink mode. The format is ``'%(asctime)s - %(name)s[%(filepath)s:%(lineno)d] - %(levelname)s
- %(message)s'`` with the logger named ``f"mindformers{get_log_path()}"`` (default ``./output/log``) and
``filepath`` the caller's path from ``mindformers/`` on (mindspore-lab/mindformers:mindformers/tools/logger.py
@r1.8.0, DEFAULT_STDOUT_FORMAT, ``_DataFormatter`` and ``get_logger``; ``get_log_path`` in
mindformers/tools/utils.py). Call sites (mindformers/core/callback/callback.py@r1.8.0): the step line at
line 616, the progress line at 633, the local-norm block at 158; ``Param groups`` at
mindformers/trainer/optimizer_grouped_parameters.py:181::

    2025-01-01 12:00:00,123 - mindformers./output/log[mindformers/core/callback/callback.py:616] - INFO - \
{ Epoch:[  1/  1], step:[    2/   19], loss: 10.633120, per_step_time: 1752ms, lr: 1e-05, overflow cond: \
False, loss_scale: 1.0, global_norm: [1.508834], train_throughput_per_npu: 0.001T
    2025-01-01 12:00:00,123 - mindformers./output/log[mindformers/core/callback/callback.py:633] - INFO - \
  10.5% |█████     | 1.14155 samples/s/p  0:00:29 }

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
import json
import re
from pathlib import Path

import numpy as np

LOGGER_NAME = "mindformers./output/log"        # f"mindformers{get_log_path()}" with the default log path
CALLBACK = "mindformers/core/callback/callback.py"
STEP_LINE, PROGRESS_LINE, NORM_LINE = 616, 633, 158
GROUPS_SITE = ("mindformers/trainer/optimizer_grouped_parameters.py", 181)
_FLOAT = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf")


def line_prefix(when: _dt.datetime | None = None, site: tuple[str, int] = (CALLBACK, STEP_LINE)) -> str:
    """``2025-01-01 12:00:00,123 - mindformers./output/log[mindformers/...py:616] - INFO - ``."""
    when = when or _dt.datetime.now()
    return (f"{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d} - {LOGGER_NAME}[{site[0]}:{site[1]}]"
            " - INFO - ")


def format_lr(lr: float) -> str:
    """The lr as MindFormers prints a float32 numpy value: ``1e-05``, ``0.001``, ``0.0``."""
    return str(np.float32(lr))


def format_global_norm(global_norm: float) -> str:
    """``ClipGradNorm`` returns a float32 tensor of shape (1,): printed ``[1.508834]``."""
    return str(np.array([global_norm], dtype=np.float32))


def format_loss_message(epoch: int, epochs: int, step: int, steps: int, loss: float, per_step_ms: float,
                        lr: float, global_norm: float, overflow: bool = False, loss_scale: float = 1.0,
                        throughput_tflops: float | None = None, mean_loss: float | None = None) -> str:
    """The ``{ Epoch:[...]`` message (r1.7+ / 2.1.0: ``loss: {:5.6f}``); ``mean_loss`` switches to the
    non-sink ``loss:[cur/mean]`` form."""
    loss_text = f"loss: {loss:5.6f}" if mean_loss is None else f"loss:[{loss:5.6f}/{mean_loss:5.6f}]"
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


def format_param_groups(named_shapes, weight_decay: float) -> str:
    """``Param groups = {json}``: groups ``weight_decay`` / ``no_weight_decay`` (``.bias`` and 1-D
    parameters) in first-seen order over the trainable parameters, ``json.dumps(indent=2)``
    (optimizer_grouped_parameters.py@r1.8.0, lines 140-181)."""
    groups: dict[str, dict] = {}
    for name, shape in named_shapes:
        plain = name.endswith(".bias") or len(tuple(shape)) == 1
        group = groups.setdefault("no_weight_decay" if plain else "weight_decay",
                                  {"weight_decay": 0.0 if plain else float(weight_decay), "params": []})
        group["params"].append(name)
    return "Param groups = " + json.dumps(groups, indent=2)


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

    def info(self, message: str, site: tuple[str, int] = (CALLBACK, STEP_LINE)) -> None:
        self._file.write(line_prefix(self._clock(), site) + message + "\n")
        self._file.flush()

    def param_groups(self, named_shapes, weight_decay: float) -> None:
        """The start-up ``Param groups`` block (names in optimizer order)."""
        self.info(format_param_groups(named_shapes, weight_decay), GROUPS_SITE)

    def step(self, *, epoch: int, epochs: int, step: int, steps: int, loss: float, per_step_ms: float, lr: float,
             global_norm: float, global_batch_size: int, throughput_tflops: float | None = None,
             local_norm: tuple | None = None) -> None:
        """All lines MindFormers writes for one step: local-norm block (optional), loss line, progress."""
        if local_norm is not None:
            self.info(format_local_norm_message(*local_norm), (CALLBACK, NORM_LINE))
        self.info(format_loss_message(epoch, epochs, step, steps, loss, per_step_ms, lr, global_norm,
                                      throughput_tflops=throughput_tflops))
        seconds = max(per_step_ms, 1e-3) / 1000.0
        percent = ((epoch - 1) * steps + step) / (epochs * steps) * 100
        remaining = ((epochs - epoch + 1) * steps - step) * seconds
        self.info(format_progress_message(percent, global_batch_size / seconds, remaining), (CALLBACK, PROGRESS_LINE))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "MindFormersLogWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
