"""Silence MindSpore's recompile warning that prints whole gradient tensors.

``mindspore.experimental.optim.AdamW`` re-packs the gradients into a plain tuple for its jitted
kernel, and MindSpore then logs every gradient tensor in a "Constant value tensor are detected"
warning (mindspore 2.10.0 mindspore/graph/api.py); the kernel does not recompile. Used by the
reference trainer and the optimizer check.
"""
from __future__ import annotations

import contextlib
import logging


class _DropConstantTensorWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Constant value tensor are detected")


@contextlib.contextmanager
def quiet_constant_tensor_warning():
    from mindspore import log as ms_log

    logger, drop = ms_log._get_logger(), _DropConstantTensorWarning()  # pylint: disable=protected-access
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)
