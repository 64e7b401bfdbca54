"""Captured gradients in a MindSpore optimizer's parameter order (the injection side of issue 10 §3).

MindSpore's training cells hand the optimizer a tuple of gradients in ``optimizer.parameters`` order
(``MFTrainOneStepCell.construct``: mindformers core/callback... wrapper order, see docs/optim-check.md).
:func:`gradients_in_order` builds that tuple from a :class:`~.captured.CapturedStep` opened with the
target format of the network (MindFormers names): every optimizer parameter must have a captured
gradient of its shape, and every captured gradient must be used; otherwise one error names the file
and the parameter.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..errors import InputError
from .captured import GRADS, CapturedStep


def parameter_names(parameters: Iterable) -> list[str]:
    """Names of MindSpore ``Parameter`` objects (or plain names) in order."""
    return [getattr(param, "name", param) for param in parameters]


def check_correspondence(captured: CapturedStep, names: list[str], shapes: dict[str, tuple] | None = None) -> None:
    """Each optimizer parameter has a captured gradient of its shape; each captured gradient is used."""
    known = set(captured.names)
    missing = [name for name in names if name not in known]
    if missing:
        raise InputError(str(captured.folders[GRADS]), f"no captured gradient for optimizer parameter {missing[0]!r} "
                         f"({len(missing)} of {len(names)} missing; the capture maps to {captured.target_format} "
                         f"names such as {captured.names[0]!r})",
                         "pass the --arch and target format of this network, or capture every trainable parameter")
    unused = [name for name in captured.names if name not in set(names)]
    if unused:
        raise InputError(captured.where(GRADS, unused[0]), f"captured gradient {unused[0]!r} matches no optimizer "
                         f"parameter ({len(unused)} such)", "train every captured parameter, or capture this network")
    for name in names:
        if shapes and tuple(shapes[name]) != captured.shape(name):
            raise InputError(captured.where(GRADS, name), f"gradient of {name!r} has shape {captured.shape(name)}, "
                             f"the parameter {tuple(shapes[name])}", "capture from the same model size")


def gradients_in_order(captured: CapturedStep, parameters: Iterable, kind: str = GRADS) -> list[np.ndarray]:
    """The captured ``kind`` tensors (fp32), one per parameter, in the parameters' order."""
    parameters = list(parameters)
    names = parameter_names(parameters)
    shapes = {name: tuple(param.shape) for name, param in zip(names, parameters, strict=True) if hasattr(param, "shape")}
    check_correspondence(captured, names, shapes or None)
    return [captured.read(kind, name) for name in names]
