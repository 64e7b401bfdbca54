"""The Adam-family update in float64 numpy: the model the diagnoses vary (one setting at a time).

For one parameter ``p`` with gradient ``g`` (already unscaled and clipped) at update ``t`` (from 1)::

    m ← β1·m + (1 − β1)·g          v ← β2·v + (1 − β2)·g²          (state before update 1: zeros)
    AdamW            p ← p·(1 − lr·wd) − lr · m̂ / (sqrt(v̂) + eps),  m̂ = m/(1 − β1ᵗ), v̂ = v/(1 − β2ᵗ)
    AdamWeightDecay  p ← p − lr · (m / (sqrt(v) + eps) + wd·p)      (no bias correction)

Both are ``p − lr·wd·p − lr·u`` with the same direction ``u`` up to the bias correction, so at
update 1 with bias correction ``u = g/(|g| + eps)`` and without it ``u = (1−β1)·g/(sqrt(1−β2)·|g| + eps)``:
a missing bias correction looks like an lr scaled by ``(1−β1)/sqrt(1−β2)`` except where ``|g| ≈ eps``.
Sources: see :mod:`.optimizer_settings`. The real optimizers (MindSpore / MindFormers classes) are
applied by :mod:`.optimizer_apply`; tests check that this model agrees with them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AdamStep:
    """Hyper-parameters of one update of one parameter."""

    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    bias_correction: bool
    step: int = 1


def moments(g: np.ndarray, beta1: float, beta2: float, m_prev=None, v_prev=None) -> tuple[np.ndarray, np.ndarray]:
    """Adam's moments after this update (float64)."""
    m = (1.0 - beta1) * g if m_prev is None else beta1 * m_prev + (1.0 - beta1) * g
    v = (1.0 - beta2) * g * g if v_prev is None else beta2 * v_prev + (1.0 - beta2) * g * g
    return m, v


def direction(m: np.ndarray, v: np.ndarray, s: AdamStep) -> np.ndarray:
    """``u``: the step direction before the lr (bias-corrected or not)."""
    if s.bias_correction:
        return (m / (1.0 - s.beta1 ** s.step)) / (np.sqrt(v / (1.0 - s.beta2 ** s.step)) + s.eps)
    return m / (np.sqrt(v) + s.eps)


def adam_update(p: np.ndarray, g: np.ndarray, s: AdamStep, m_prev=None, v_prev=None):
    """(new parameter, m, v), all float64."""
    p, g = np.asarray(p, np.float64), np.asarray(g, np.float64)
    m, v = moments(g, s.beta1, s.beta2, m_prev, v_prev)
    return p - s.lr * s.weight_decay * p - s.lr * direction(m, v, s), m, v
