"""Why an optimizer update differs: single-cause hypotheses fitted to the reference's update.

Each hypothesis changes ONE thing in the configured optimizer (:class:`~.optimizer_settings.OptimizerSettings`)
and predicts every parameter's update with the float64 model (:mod:`.adam_math`). A hypothesis
*fits* when, for every parameter, the predicted weights after the step and the predicted Adam moments
(where the capture has them) agree with the reference's within ``fit_tol`` (L2 norm of the difference
over the L2 norm of the reference's change, resp. of the moment). Values the hypothesis needs are
estimated from the capture first (least squares over all parameters, or per parameter):

================  ==========================================================  ============
hypothesis        estimate                                                     free values
================  ==========================================================  ============
weight_decay_groups  per parameter: ŵ = −⟨Δp + lr·u, p⟩ / (lr·⟨p, p⟩); decayed if ŵ > wd/2    per group
weight_decay      median ŵ over the parameters both sides decay               1
learning_rate     r = Σ⟨Δp_ref, Δp⟩ / Σ⟨Δp, Δp⟩                               1
bias_correction   the other rule (AdamW ↔ AdamWeightDecay)                    0
beta1, beta2      from the moments: m = β1·m₀ + (1−β1)·g, v = β2·v₀ + (1−β2)·g²   1
eps               a grid of common values (and the reference config's)        0
clipping          the other clip setting (none ↔ the configured or reference threshold)   0
loss_scale        gradients × S or ÷ S (S: the capture's loss scale)          0
gradient_scale    c = Σ⟨m_ref, m⟩ / Σ⟨m, m⟩ (any other gradient factor)        1
================  ==========================================================  ============

The diagnosis is the fitting hypothesis with the fewest free values (then the closest fit); when
none fits, the best partial fits are reported as such, never as causes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .adam_math import AdamStep, adam_update
from .optimizer_settings import ADAM_WEIGHT_DECAY, ADAMW, RULE_NAMES, OptimizerSettings

EPS_GRID = (1e-5, 1e-6, 1e-7, 1e-8, 1e-10, 1e-15)
BETA2_GRID = (0.95, 0.98, 0.99, 0.999)
TINY = 1e-30
REFERENCE = "the reference"        # whose update the hypotheses explain (context["subject"] names another)
FP32_ROUNDING = 2.0 ** -21         # 4 ulps (relative) of an fp32 tensor's L2 norm


@dataclass
class ParamData:
    """A slice of one parameter's captured tensors (flat, float64), under the configured side's name.

    Adam is elementwise, so a parameter is processed in slices and every score below is a sum over them."""

    name: str
    category: str                   # embedding | output layer | bias | 1-D | weight
    ndim: int                       # the whole parameter's (weight decay grouping looks at it)
    p0: np.ndarray
    grad: np.ndarray                # unscaled (÷ loss scale), before clipping
    p1_ref: np.ndarray
    m_ref: np.ndarray | None = None
    v_ref: np.ndarray | None = None
    m_prev: np.ndarray | None = None
    v_prev: np.ndarray | None = None


@dataclass
class Hypothesis:
    key: str
    free: int
    claim: str                              # what the reference does differently, in words
    settings: OptimizerSettings
    coeff: float                            # gradient factor (clip coefficient, loss scale) applied
    decays: dict[str, bool] | None = None   # per-parameter weight decay flags (grouping)
    evidence: list[str] = field(default_factory=list)
    score: float = 0.0                      # worst residual over the parameters


def predict(data: ParamData, settings: OptimizerSettings, coeff: float, update: int, decays: bool | None = None):
    """(weights after, m, v) of the float64 model under ``settings``."""
    decayed = settings.decays(data.name, data.ndim) if decays is None else decays
    step = AdamStep(settings.lr, settings.beta1, settings.beta2, settings.eps,
                    settings.weight_decay if decayed else 0.0, settings.bias_correction, update)
    return adam_update(data.p0, data.grad * coeff, step, data.m_prev, data.v_prev)


class Residual:
    """Sums of squares over a parameter's slices; :meth:`score` is the worst of: the weights' difference
    relative to the reference's change, and each captured moment's difference relative to the moment."""

    def __init__(self):
        self.sums = np.zeros(7)          # |p1-ref|², |ref-p0|², |ref|², |m-mref|², |mref|², |v-vref|², |vref|²
        self.moments = [False, False]

    def add(self, data: ParamData, predicted) -> None:
        p1, m, v = predicted
        self.sums[:3] += (_sq(p1 - data.p1_ref), _sq(data.p1_ref - data.p0), _sq(data.p1_ref))
        for index, (ours, ref) in enumerate(((m, data.m_ref), (v, data.v_ref))):
            if ref is not None:
                self.moments[index] = True
                self.sums[3 + 2 * index: 5 + 2 * index] += (_sq(ours - ref), _sq(ref))

    def score(self) -> float:
        """fp32 weights carry rounding of a few ulps of |p| whatever the model: that much of the weights'
        difference is forgiven (it dominates when the change is tiny next to the weights)."""
        root = np.sqrt(self.sums)
        excess = max(0.0, root[0] - FP32_ROUNDING * root[2])
        scores = [excess / max(root[1], root[2] * 1e-7, TINY)]
        scores += [root[3 + 2 * i] / max(root[4 + 2 * i], TINY) for i in range(2) if self.moments[i]]
        return float(max(scores))


def _sq(array: np.ndarray) -> float:
    return float(np.vdot(array, array))


@dataclass
class Estimates:
    """Sums gathered in one pass over the parameters (see the module table)."""

    lr_num: float = 0.0
    lr_den: float = 0.0
    scale_num: float = 0.0
    scale_den: float = 0.0
    beta1_num: float = 0.0
    beta1_den: float = 0.0
    beta2_num: float = 0.0
    beta2_den: float = 0.0
    wd_sums: dict[str, list[float]] = field(default_factory=dict)   # name -> [−⟨decay part, p0⟩, lr·⟨p0, p0⟩]
    ndim: dict[str, int] = field(default_factory=dict)
    category: dict[str, str] = field(default_factory=dict)
    has_state: bool = True

    def add(self, data: ParamData, settings: OptimizerSettings, coeff: float, update: int) -> None:
        p1, m, v = predict(data, settings, coeff, update)
        ours, ref = p1 - data.p0, data.p1_ref - data.p0
        self.lr_num += float(np.vdot(ref, ours))
        self.lr_den += float(np.vdot(ours, ours))
        self.ndim[data.name], self.category[data.name] = data.ndim, data.category
        sums = self.wd_sums.setdefault(data.name, [0.0, 0.0])
        plain = predict(data, settings, coeff, update, decays=False)[0]
        sums[0] -= float(np.vdot(data.p1_ref - plain, data.p0))          # the decay part is −lr·ŵ·p0
        sums[1] += settings.lr * float(np.vdot(data.p0, data.p0))
        if data.m_ref is None or data.v_ref is None:
            self.has_state = False
            return
        self.scale_num += float(np.vdot(data.m_ref, m))
        self.scale_den += float(np.vdot(m, m))
        g = data.grad * coeff
        m0 = np.zeros_like(g) if data.m_prev is None else data.m_prev
        v0 = np.zeros_like(g) if data.v_prev is None else data.v_prev
        # m = β1·m0 + (1−β1)·g  ⇔  m − g = β1·(m0 − g); the same for v with g²
        self.beta1_num += float(np.vdot(data.m_ref - g, m0 - g))
        self.beta1_den += float(np.vdot(m0 - g, m0 - g))
        self.beta2_num += float(np.vdot(data.v_ref - g * g, v0 - g * g))
        self.beta2_den += float(np.vdot(v0 - g * g, v0 - g * g))

    @property
    def wd_hat(self) -> dict[str, float]:
        """Per parameter: the weight decay the reference applied, given everything else as configured."""
        return {name: num / den if den > TINY else 0.0 for name, (num, den) in self.wd_sums.items()}

    def ratio(self, num: str, den: str) -> float | None:
        denominator = getattr(self, den)
        return getattr(self, num) / denominator if denominator > TINY else None


def candidates(est: Estimates, s: OptimizerSettings, coeff: float, context: dict) -> list[Hypothesis]:
    """Every single-cause hypothesis worth testing against this capture."""
    who = context.get("subject", REFERENCE)
    found: list[Hypothesis] = []
    found += _weight_decay_hypotheses(est, s, coeff, who)
    lr_ratio = est.ratio("lr_num", "lr_den")
    if lr_ratio is not None and abs(lr_ratio - 1.0) > 1e-4:
        found.append(Hypothesis("learning_rate", 1, f"{who}'s lr is {lr_ratio:.4g} × this config's: "
                                f"{s.lr * lr_ratio:.6g} instead of {s.lr:.6g}", s.with_(lr=s.lr * lr_ratio), coeff))
    other = ADAM_WEIGHT_DECAY if s.rule == ADAMW else ADAMW
    found.append(Hypothesis("bias_correction", 0, f"{who} updates as {RULE_NAMES[other]}, this config as "
                            f"{s.type_name}: {RULE_NAMES[s.rule]}", s.with_(rule=other), coeff))
    found += _beta_hypotheses(est, s, coeff, who)
    found += [Hypothesis("eps", 0, f"{who}'s eps is {eps:g}, this config's {s.eps:g}", s.with_(eps=eps), coeff)
              for eps in sorted({*EPS_GRID, *context.get("eps", ())}) if not np.isclose(eps, s.eps, rtol=1e-3)]
    found += _gradient_factor_hypotheses(est, s, coeff, context, who)
    return found


def _weight_decay_hypotheses(est: Estimates, s: OptimizerSettings, coeff: float, who: str) -> list[Hypothesis]:
    found, wd_hat = [], est.wd_hat
    scale = max(s.weight_decay, *[abs(w) for w in wd_hat.values()], TINY)
    reference_decays = {name: wd_hat[name] > scale / 2 for name in wd_hat}
    ours = {name: s.decays(name, est.ndim[name]) for name in wd_hat}
    differ = [name for name in ours if ours[name] != reference_decays[name]]
    if differ and s.weight_decay > 0:
        found.append(Hypothesis("weight_decay_groups", len({est.category[n] for n in differ}),
                                _grouping_claim(differ, reference_decays, est.category, who), s, coeff, reference_decays))
    both = [wd_hat[name] for name in ours if ours[name] and reference_decays[name]]
    if both:
        value = float(np.median(both))
        if not np.isclose(value, s.weight_decay, rtol=1e-2):
            found.append(Hypothesis("weight_decay", 1, f"{who}'s weight decay is {value:.4g}, this config's "
                                    f"{s.weight_decay:g}", s.with_(weight_decay=value), coeff))
    return found


def _grouping_claim(differ: list[str], reference_decays: dict[str, bool], category: dict[str, str], who: str) -> str:
    kinds = sorted({category[name] for name in differ})
    decayed_there = [n for n in differ if reference_decays[n]]
    how = "decays" if decayed_there else "does not decay"
    return (f"{who} {how} {len(differ)} parameter(s) that this config "
            f"{'does not' if decayed_there else 'does'} ({', '.join(kinds)}): e.g. {differ[0]}")


def _beta_hypotheses(est: Estimates, s: OptimizerSettings, coeff: float, who: str) -> list[Hypothesis]:
    found = []
    beta1 = est.ratio("beta1_num", "beta1_den") if est.has_state else None
    if beta1 is not None and not np.isclose(beta1, s.beta1, rtol=0, atol=1e-4):
        found.append(Hypothesis("beta1", 1, f"{who}'s beta1 is {beta1:.4g}, this config's {s.beta1:g} "
                                "(from the first moment)", s.with_(beta1=beta1), coeff))
    beta2 = est.ratio("beta2_num", "beta2_den") if est.has_state else None
    if beta2 is not None and not np.isclose(beta2, s.beta2, rtol=0, atol=1e-5):
        found.append(Hypothesis("beta2", 1, f"{who}'s beta2 is {beta2:.5g}, this config's {s.beta2:g} "
                                "(from the second moment)", s.with_(beta2=beta2), coeff))
    if not est.has_state:               # without moments, a grid (beta2 only matters without bias correction)
        found += [Hypothesis("beta2", 0, f"{who}'s beta2 is {b:g}, this config's {s.beta2:g}",
                             s.with_(beta2=b), coeff) for b in BETA2_GRID if not np.isclose(b, s.beta2)]
    return found


def _gradient_factor_hypotheses(est: Estimates, s: OptimizerSettings, coeff: float, context: dict,
                                who: str) -> list[Hypothesis]:
    """Clipping on/off, a loss scale left in, or another factor estimated from the first moment."""
    found, norm, loss_scale = [], context["grad_norm"], context.get("loss_scale", 1.0)
    for clip in sorted({c for c in (s.clip, context.get("reference_clip"), 1.0) if c} | {0.0}):
        other = min(1.0, clip / (norm + 1e-6)) if clip else 1.0
        if not np.isclose(other, coeff, rtol=1e-6):
            claim = (f"{who} clips at {clip:g} (coefficient {other:.4g})" if clip else
                     f"{who} does not clip") + (f"; this config clips at {s.clip:g} (coefficient {coeff:.4g})"
                                                        if coeff < 1 else "; this config does not clip")
            found.append(Hypothesis("clipping", 0, claim, s.with_(clip=clip or None), other))
    if loss_scale != 1.0:
        for factor, how in ((loss_scale, "not unscaled"), (1.0 / loss_scale, "unscaled twice")):
            found.append(Hypothesis("loss_scale", 0, f"{who}'s gradients were {how} (loss scale {loss_scale:g})",
                                    s, coeff * factor))
    scale = est.ratio("scale_num", "scale_den") if est.has_state else None
    if scale is not None and not np.isclose(scale, 1.0, rtol=1e-4):
        found.append(Hypothesis("gradient_scale", 1, f"{who}'s gradients are {scale:.4g} × the captured ones "
                                "after clipping (a clipping coefficient or a scale this config does not apply)",
                                s, coeff * scale))
    return found


def choose(fitting: list[Hypothesis]) -> list[Hypothesis]:
    """The diagnosis: the fitting hypotheses with the fewest free values, best fit first."""
    if not fitting:
        return []
    fewest = min(h.free for h in fitting)
    return sorted((h for h in fitting if h.free == fewest), key=lambda h: h.score)[:1]
