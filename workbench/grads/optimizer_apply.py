"""Apply the configured MindSpore optimizer to ONE parameter with an injected gradient.

The optimizer check streams parameter by parameter (memory follows the largest tensor), so each
parameter gets its own optimizer instance over one ``Parameter``, with that parameter's weight decay
(its group's) and the update's lr; the state before the step is loaded into the optimizer's own
moment parameters and its step counter set to ``update − 1``. Classes:

============  =====================================================  ===========================================
rule          MindFormers installed                                   otherwise (same update, MindSpore's own)
============  =====================================================  ===========================================
adamw         ``mindformers.core.optim.AdamW`` (2.1.0: adamw.py)       ``mindspore.experimental.optim.AdamW``
adam_wd       ``mindspore.nn.AdamWeightDecay`` (MindFormers registers MindSpore's class: core/optim/build_optim.py)
============  =====================================================  ===========================================
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .optimizer_settings import ADAM_WEIGHT_DECAY, ADAMW, OptimizerSettings

PARAM_NAME = "param"       # a neutral name: nothing in MindSpore filters on it


@dataclass(frozen=True)
class Implementation:
    """Which class applies the update, and how to reach its state."""

    name: str
    build: Callable            # (parameter, settings, weight_decay, lr) -> optimizer cell
    first: str                 # attribute holding the first-moment ParameterTuple
    second: str
    counter: str | None        # step counter Parameter (None: the rule does not use it)
    reusable: bool = False     # one instance serves parameter after parameter (state reloaded each time)


def _mindformers_adamw(param, s: OptimizerSettings, weight_decay: float, lr: float):
    from mindformers.core.optim import AdamW

    return AdamW([param], learning_rate=lr, betas=(s.beta1, s.beta2), eps=s.eps, weight_decay=weight_decay)


def _mindspore_adamw(param, s: OptimizerSettings, weight_decay: float, lr: float):
    from mindspore.experimental.optim import AdamW

    return AdamW([param], lr=lr, betas=(s.beta1, s.beta2), eps=s.eps, weight_decay=weight_decay)


def _adam_weight_decay(param, s: OptimizerSettings, weight_decay: float, lr: float):
    from mindspore import nn

    return nn.AdamWeightDecay([param], learning_rate=lr, beta1=s.beta1, beta2=s.beta2, eps=s.eps,
                              weight_decay=weight_decay)


def implementation(rule: str, use_mindformers: bool | None = None) -> Implementation:
    """The class for ``rule``: MindFormers' own when installed (or asked for), else MindSpore's equivalent."""
    if rule == ADAM_WEIGHT_DECAY:
        return Implementation("mindspore.nn.AdamWeightDecay", _adam_weight_decay, "moments1", "moments2", None)
    if rule != ADAMW:
        raise ValueError(f"unknown optimizer rule {rule!r}")
    from ..installed import mindformers_installed

    if use_mindformers if use_mindformers is not None else mindformers_installed():
        return Implementation("mindformers.core.optim.AdamW", _mindformers_adamw, "exp_avg", "exp_avg_sq",
                              "global_step", reusable=True)
    return Implementation("mindspore.experimental.optim.AdamW", _mindspore_adamw, "exp_avg", "exp_avg_sq",
                          "state_step", reusable=True)


class UpdatePool:
    """Applies one optimizer configuration to parameter after parameter.

    MindSpore compiles an optimizer's kernel per instance and shape (about 0.2 s), so an instance is
    kept per (shape, weight decay) and reloaded for the next parameter of that shape (where the class
    reads reloaded state: ``Implementation.reusable``, checked by the tests); instances are
    dropped oldest first beyond ``budget_bytes`` of parameters and state, so memory stays near the
    largest tensor's working set whatever the model's size.
    """

    def __init__(self, impl: Implementation, settings: OptimizerSettings, budget_bytes: int = 256 * 2 ** 20,
                 pad_to: int | None = None):
        self.impl, self.settings, self.budget, self.pad_to = impl, settings, budget_bytes, pad_to
        self._cells: OrderedDict = OrderedDict()

    def _cell(self, shape: tuple, weight_decay: float):
        from mindspore import Parameter, Tensor

        key = (shape, float(weight_decay))
        if not self.impl.reusable:          # nn.AdamWeightDecay ignores reloaded moments: a fresh one each time
            self._cells.clear()
        elif key in self._cells:
            self._cells.move_to_end(key)
            return self._cells[key]
        param = Parameter(Tensor(np.zeros(shape, np.float32)), name=PARAM_NAME)
        cell = (param, self.impl.build(param, self.settings, float(weight_decay), float(self.settings.lr)))
        self._cells[key] = cell
        while len(self._cells) > 1 and 3 * 4 * sum(int(np.prod(k[0])) for k in self._cells) > self.budget:
            self._cells.popitem(last=False)
        return cell

    def apply(self, weight_decay: float, p0: np.ndarray, grad: np.ndarray, update: int,
              m_prev: np.ndarray | None = None, v_prev: np.ndarray | None = None):
        """(weights after, exp_avg, exp_avg_sq) as fp32 numpy, from the real optimizer class.

        With ``pad_to``, 1-D slices shorter than it are padded with zeros (zero weights with zero gradients
        stay zero under every Adam rule), so every slice runs through one compiled kernel.
        """
        from mindspore import Tensor

        from ..mindspore_quiet import quiet_constant_tensor_warning

        length = p0.shape[0] if p0.ndim == 1 else None
        if self.pad_to and length is not None and length < self.pad_to:
            p0, grad, m_prev, v_prev = (None if a is None else _padded(a, self.pad_to) for a in (p0, grad, m_prev, v_prev))
        else:
            length = None
        param, optimizer = self._cell(tuple(p0.shape), weight_decay)
        first, second = getattr(optimizer, self.impl.first)[0], getattr(optimizer, self.impl.second)[0]
        param.set_data(_tensor(p0))
        first.set_data(_tensor(m_prev if m_prev is not None else np.zeros(p0.shape)))
        second.set_data(_tensor(v_prev if v_prev is not None else np.zeros(p0.shape)))
        if self.impl.counter:
            counter = getattr(optimizer, self.impl.counter)
            counter.set_data(Tensor(np.full(counter.shape, update - 1), counter.dtype))
        with quiet_constant_tensor_warning():
            optimizer((_tensor(grad),))
        return tuple(array[:length] if length is not None else array
                     for array in (param.asnumpy(), first.asnumpy(), second.asnumpy()))


def _padded(array: np.ndarray, length: int) -> np.ndarray:
    out = np.zeros(length, np.float32)
    out[:array.shape[0]] = array
    return out


def _tensor(array: np.ndarray):
    from mindspore import Tensor

    return Tensor(np.ascontiguousarray(array, dtype=np.float32))


def apply_update(impl: Implementation, settings: OptimizerSettings, weight_decay: float, p0: np.ndarray,
                 grad: np.ndarray, update: int, m_prev: np.ndarray | None = None,
                 v_prev: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One parameter's update with a fresh optimizer instance (see :class:`UpdatePool` for many)."""
    return UpdatePool(impl, settings).apply(weight_decay, p0, grad, update, m_prev, v_prev)
