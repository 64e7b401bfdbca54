"""Inject captured reference gradients into one MindSpore training step (issue 10 §3).

:class:`InjectTrainOneStepCell` is a training-step wrapper Cell in the order of MindFormers'
``MFTrainOneStepCell.construct`` (mindformers 2.1.0 ``mindformers/wrapper/wrapper.py``)::

    grads (loss x scale_sense) -> unscale -> grad_reducer (DP all-reduce)
        -> [at="before_clip": injected]      overflow check -> clip (pre-clip global norm returned)
        -> [at="after_clip": injected]       -> optimizer (skipped on overflow)

On the chosen ``step`` (the update number, counting from 1 like the step store's ``step_N``) the
gradients at that point are replaced by the captured ones; on every other step the Cell is the plain
step. ``before_clip`` (default) tests clipping and the optimizer; ``after_clip`` the optimizer alone.
Clipping is ``ClipGradNorm``'s (mindformers 2.1.0 ``mindformers/core/clip_grad.py``): every gradient
times ``min(max_norm / (norm + 1e-6), 1)``, which is also Megatron's coefficient; the same function
the MindSpore reference trainer uses (``workbench.reference.ms_train``).

The captured gradients are Megatron's ``main_grad`` before ``optimizer.step()``, i.e. still multiplied
by the loss scale (``meta.loss_scale``; workbench/replay/grad_capture.py): :func:`injected_gradients`
divides by it, since they enter after MindFormers' unscale. Step counting uses a Parameter
(``grad_injection.updates_done``) so the choice also works inside a compiled graph.
"""
from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Parameter, ParameterTuple, Tensor, nn, ops

from ..errors import InputError
from ..reference.ms_train import norms_and_clip
from .captured import BEFORE, CapturedStep, open_captured_step
from .inject import gradients_in_order

BEFORE_CLIP, AFTER_CLIP = "before_clip", "after_clip"
POSITIONS = (BEFORE_CLIP, AFTER_CLIP)


def check_position(at: str, where: str = "at") -> str:
    if at not in POSITIONS:
        raise InputError(where, f"expected one of {', '.join(POSITIONS)}, got {at!r}",
                         "before_clip tests clipping and the optimizer, after_clip the optimizer alone")
    return at


def check_step(step, where: str = "step") -> int:
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise InputError(where, f"expected the update number (an integer >= 1), got {step!r}",
                         "pick a step_N folder of the capture")
    return step


def injected_gradients(captured: CapturedStep, parameters) -> tuple[Tensor, ...]:
    """The captured gradients, unscaled, as Tensors of each parameter's dtype, in ``parameters`` order."""
    parameters = list(parameters)
    scale = captured.loss_scale
    arrays = gradients_in_order(captured, parameters)
    return tuple(Tensor(array / np.float32(scale) if scale != 1.0 else array, param.dtype)
                 for array, param in zip(arrays, parameters, strict=True))


def load_injected_gradients(capture_dir: Path | str, step: int, parameters, *, arch: str | None = None,
                            config: Path | str | None = None) -> tuple[Tensor, ...]:
    """Open step ``step`` of a capture (MindFormers names) and return :func:`injected_gradients`."""
    with open_captured_step(capture_dir, check_step(step), arch=arch, config=config, kinds=()) as captured:
        return injected_gradients(captured, parameters)


def load_params_before(captured: CapturedStep, network: nn.Cell) -> None:
    """Set every trainable parameter of ``network`` to the capture's ``params_before`` (strict)."""
    if not captured.has(BEFORE):
        raise InputError(str(captured.folders.get(BEFORE, captured.root / f"step_{captured.step}" / BEFORE)),
                         f"step {captured.step} has no params_before (the weights the update starts from)",
                         "capture with capture_gradients(..., params=True)")
    parameters = list(network.trainable_params())
    for param, value in zip(parameters, gradients_in_order(captured, parameters, kind=BEFORE), strict=True):
        param.set_data(Tensor(value, param.dtype))


class GradientInjection(nn.Cell):
    """``construct(grads)``: the injected gradients on call number ``step`` (from 1), else ``grads``.

    ``gradients``: one Tensor per optimizer parameter, in ``optimizer.parameters`` order and dtype."""

    def __init__(self, gradients: tuple[Tensor, ...], step: int):
        super().__init__()
        self.gradients = tuple(gradients)
        self.step = Tensor(check_step(step), ms.int32)
        self.updates_done = Parameter(Tensor(0, ms.int32), name="grad_injection.updates_done", requires_grad=False)

    def construct(self, grads):
        current = self.updates_done + 1
        ops.assign_add(self.updates_done, Tensor(1, ms.int32))
        if current == self.step:
            return self.gradients        # built in each parameter's dtype, the dtype of its gradient
        return grads


def all_finite(grads) -> Tensor:
    """True when no gradient holds inf or nan (the overflow test, with ops every device has)."""
    return ops.stack([ops.isfinite(grad).all() for grad in grads]).all()


class InjectTrainOneStepCell(nn.Cell):
    """One training step of ``network`` (returns its loss) with ``optimizer``, gradients injected on ``step``.

    ``construct(*inputs)`` returns ``(loss, overflow, global_norm)`` (the pre-clip global norm of the
    gradients that reach clipping). ``max_grad_norm=None``: no clipping. The optimizer must take its
    gradients in ``optimizer.parameters`` order (MindSpore optimizers do).
    """

    def __init__(self, network: nn.Cell, optimizer: nn.Cell, gradients: tuple[Tensor, ...], step: int, *,
                 at: str = BEFORE_CLIP, max_grad_norm: float | None = None, scale_sense: float = 1.0):
        super().__init__(auto_prefix=False)
        self.network, self.optimizer = network, optimizer
        self.weights = ParameterTuple(optimizer.parameters)
        if len(gradients) != len(self.weights):
            raise ValueError(f"{len(gradients)} injected gradients for {len(self.weights)} optimizer parameters")
        self.at = check_position(at)
        self.injection = GradientInjection(gradients, step)
        self.max_grad_norm = float(max_grad_norm or 0.0)
        self.scale_sense = Tensor(scale_sense, ms.float32)
        self.grad = ops.GradOperation(get_by_list=True, sens_param=True)
        self.grad_reducer = nn.Identity()      # one device; MFTrainOneStepCell's reducer is the DP all-reduce

    def construct(self, *inputs):
        loss = self.network(*inputs)
        sens = ops.ones_like(loss) * ops.cast(self.scale_sense, ops.dtype(loss))
        grads = self.grad(self.network, self.weights)(*inputs, sens)
        grads = tuple(grad * ops.cast(1.0 / self.scale_sense, ops.dtype(grad)) for grad in grads)
        grads = self.grad_reducer(grads)
        if self.at == BEFORE_CLIP:
            grads = self.injection(grads)
        overflow = ops.logical_not(all_finite(grads))
        grads, _, global_norm = norms_and_clip(grads, self.max_grad_norm)
        if self.at == AFTER_CLIP:
            grads = self.injection(grads)
        if not overflow:
            loss = ops.depend(loss, self.optimizer(grads))
        return loss, overflow, global_norm
