"""``workbench optim-check``: apply the configured MindSpore optimizer to the reference's captured
gradients and compare with the reference's own update, parameter by parameter, then say why they differ.

Three streamed passes over the parameters (one tensor of each kind in memory at a time):
0. the global norm of the unscaled gradients (clipping, as ``runner_wrapper`` configures it);
1. the real optimizer class (:mod:`.optimizer_apply`) on each parameter from the reference's
   pre-step weights and state → the per-parameter table and the verdict; the estimates the
   hypotheses need (:class:`.hypotheses.Estimates`);
2. when anything differs: every single-cause hypothesis predicted with the float64 model and scored.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from .captured import AFTER, BEFORE, GRADS, PREVIOUS, CapturedStep, open_captured_step
from .hypotheses import Estimates, Hypothesis, ParamData, candidates, choose, predict, residual
from .optimizer_apply import UpdatePool, implementation
from .optimizer_settings import megatron_settings, mindformers_settings

COLUMNS = ("name", "category", "shape", "weight_decay", "max_abs_diff", "max_rel_diff", "update_cosine",
           "update_rel_diff", "exp_avg_rel_diff", "exp_avg_sq_rel_diff", "status")


@dataclass(frozen=True)
class CheckOptions:
    step: int | None = None
    arch: str | None = None
    megatron: Path | None = None
    rtol: float = 1e-6                 # PASS: every parameter's weights and moments within this (max-abs relative)
    fit_tol: float = 1e-4              # a hypothesis fits: every parameter's residual below this
    use_mindformers: bool | None = None
    progress: bool = False


def category(captured: CapturedStep, name: str, ndim: int) -> str:
    logical = captured.logical(name)
    if logical == "embed":
        return "embedding"
    if logical == "lm_head":
        return "output layer"
    return "bias" if name.endswith(".bias") else "1-D" if ndim <= 1 else "weight"


def pick_step(root: Path, step: int | None) -> int:
    """The update to check: ``step``, else the first one whose grads and weights before/after were captured."""
    from ..replay.step_kinds import load_step_layout

    if step is not None:
        return step
    layout = load_step_layout()
    steps = sorted(n for n in (layout.parse_step(child.name) for child in _children(root)) if n is not None)
    for candidate in steps:
        if all(layout.folder(root, candidate, kind).is_dir() for kind in (GRADS, BEFORE, AFTER)):
            return candidate
    raise InputError(str(root), "no update with grads, params_before and params_after in this capture",
                     "capture with capture_gradients(..., params=True) and capture_after_step (docs/step-store.md)")


def _children(root: Path) -> list[Path]:
    if not root.is_dir():
        raise InputError(str(root), "not a folder", "pass the capture root (the folder holding step_N/)")
    return list(root.iterdir())


def _read(captured: CapturedStep, name: str, update: int, loss_scale: float, cat: str) -> ParamData:
    state = {kind: captured.read(kind, name).astype(np.float64) if captured.has(kind) else None
             for kind in ("exp_avg", "exp_avg_sq", PREVIOUS + "exp_avg", PREVIOUS + "exp_avg_sq")}
    return ParamData(name, cat, captured.read(BEFORE, name).astype(np.float64),
                     captured.read(GRADS, name).astype(np.float64) / loss_scale,
                     captured.read(AFTER, name).astype(np.float64), state["exp_avg"], state["exp_avg_sq"],
                     state[PREVIOUS + "exp_avg"], state[PREVIOUS + "exp_avg_sq"])


def _require(captured: CapturedStep, update: int) -> None:
    for kind in (BEFORE, AFTER):
        if not captured.has(kind):
            raise InputError(str(captured.root / f"step_{update}" / kind), f"update {update} has no {kind}",
                             "capture with capture_gradients(..., params=True) and capture_after_step")
    for kind in ("exp_avg", "exp_avg_sq"):
        if update > 1 and not captured.has(PREVIOUS + kind):
            raise InputError(str(captured.root / f"step_{update - 1}" / kind), f"update {update} starts from Adam "
                             f"state that was not captured (update {update - 1}'s {kind})",
                             "check update 1, or capture the state of the update before")


def _loss_scale(captured: CapturedStep) -> float:
    """The capture's loss scale (its gradients are divided by it), 1.0 when not recorded."""
    value = float(captured.meta.get("loss_scale", 1.0))
    if not (np.isfinite(value) and value > 0):
        raise InputError(f"{captured.folders[GRADS] / 'manifest.json'}: loss_scale", f"expected a positive number, "
                         f"found {value}", "capture again with the loss scale the step used (1.0 without scaling)")
    return value


def _global_norm(captured: CapturedStep, loss_scale: float) -> float:
    total = 0.0
    for name in captured.names:
        grad = captured.read(GRADS, name).astype(np.float64) / loss_scale
        total += float(np.vdot(grad, grad))
    return float(np.sqrt(total))


def _clip_coefficient(clip: float | None, norm: float) -> float:
    """``max_norm / (norm + 1e-6)`` below 1 (MindFormers ClipGradNorm); nan when the norm is (nan/inf gradients)."""
    if not clip:
        return 1.0
    return min(1.0, clip / (norm + 1e-6)) if np.isfinite(norm) else float("nan")


def _rel(a: np.ndarray | None, b: np.ndarray | None) -> float:
    if a is None or b is None:
        return float("nan")
    return float(np.max(np.abs(a - b), initial=0.0) / max(float(np.max(np.abs(b), initial=0.0)), 1e-30))


def _row(data: ParamData, ours: tuple, wd: float, rtol: float) -> dict:
    p1, m, v = (x.astype(np.float64) for x in ours)
    change_ours, change_ref = p1 - data.p0, data.p1_ref - data.p0
    norms = np.linalg.norm(change_ours) * np.linalg.norm(change_ref)
    row = {"name": data.name, "category": data.category, "shape": "x".join(map(str, data.p0.shape)) or "scalar",
           "weight_decay": wd, "max_abs_diff": float(np.max(np.abs(p1 - data.p1_ref), initial=0.0)),
           "max_rel_diff": _rel(p1, data.p1_ref),
           "update_cosine": float(np.vdot(change_ours, change_ref) / norms) if norms > 0 else float("nan"),
           "update_rel_diff": float(np.linalg.norm(change_ours - change_ref) / max(np.linalg.norm(change_ref), 1e-30)),
           "exp_avg_rel_diff": _rel(m, data.m_ref), "exp_avg_sq_rel_diff": _rel(v, data.v_ref)}
    if not all(np.isfinite(x).all() for x in (p1, data.p1_ref, *(y for y in (m, v, data.m_ref, data.v_ref) if y is not None))):
        row["status"] = "non-finite"        # nan/inf on either side: never "ok", never a ratio
        return row
    worst = max(x for x in (row["max_rel_diff"], row["exp_avg_rel_diff"], row["exp_avg_sq_rel_diff"]) if x == x)
    row["status"] = "ok" if worst <= rtol else "differs"
    return row


def run_check(capture: Path | str, mindformers_yaml: Path | str, options: CheckOptions | None = None):
    """The data of the check: (rows, settings, reference settings, facts, diagnosis, partial fits)."""
    options = options or CheckOptions()
    capture = Path(capture)
    update = pick_step(capture, options.step)
    settings = mindformers_settings(mindformers_yaml, update)
    reference = megatron_settings(options.megatron, update) if options.megatron else None
    impl = implementation(settings.rule, options.use_mindformers)
    with open_captured_step(capture, update, arch=options.arch, config=Path(mindformers_yaml)) as captured:
        _require(captured, update)
        loss_scale = _loss_scale(captured)
        norm = _global_norm(captured, loss_scale)
        coeff = _clip_coefficient(settings.clip, norm)
        rows, estimates, pool = [], Estimates(), UpdatePool(impl, settings)
        for name in _progress(captured.names, options.progress, "optimizer"):
            data = _read(captured, name, update, loss_scale, category(captured, name, len(captured.shape(name))))
            wd = settings.weight_decay_of(name, data.p0.ndim)
            ours = pool.apply(wd, data.p0, data.grad * coeff, update, data.m_prev, data.v_prev)
            rows.append(_row(data, ours, wd, options.rtol))
            estimates.add(data, settings, coeff, update)
        facts = {"update": update, "arch": captured.arch, "capture_format": captured.source_format,
                 "optimizer_class": impl.name, "settings": settings.describe(), "sources": settings.sources,
                 "grad_norm": norm, "clip_coefficient": coeff, "loss_scale": loss_scale,
                 "captured_meta": {k: captured.meta[k] for k in ("lr", "grad_norm", "clip_coeff", "loss_scale")
                                   if k in captured.meta}, "rtol": options.rtol, "fit_tol": options.fit_tol}
        if reference is not None:
            facts["reference_settings"] = reference.describe()
        diagnosis, partial = [], []
        if any(row["status"] != "ok" for row in rows):
            context = {"grad_norm": norm, "loss_scale": loss_scale,
                       "reference_clip": reference.clip if reference else None,
                       "eps": (reference.eps,) if reference else ()}
            diagnosis, partial = _diagnose(captured, update, loss_scale, settings, coeff, estimates, context, options)
    return rows, settings, reference, facts, diagnosis, partial


def _diagnose(captured, update, loss_scale, settings, coeff, estimates, context, options):
    hypotheses = candidates(estimates, settings, coeff, context)
    baseline = Hypothesis("configured", 0, "as configured", settings, coeff)
    everything = [baseline, *hypotheses]
    for name in _progress(captured.names, options.progress, "diagnosis"):
        data = _read(captured, name, update, loss_scale, estimates.category[name])
        for hypothesis in everything:
            decays = hypothesis.decays.get(name) if hypothesis.decays else None
            score = residual(data, predict(data, hypothesis.settings, hypothesis.coeff, update, decays))
            hypothesis.score = max(hypothesis.score, score)
    fitting = [h for h in hypotheses if h.score <= options.fit_tol]
    partial = sorted((h for h in hypotheses if h.score < baseline.score), key=lambda h: h.score)[:3]
    return choose(fitting), ([] if fitting else [baseline, *partial])


def _progress(names: list[str], enabled: bool, label: str):
    if not enabled:
        return names
    from ..convert.progress import progress_bar

    def iterate():
        with progress_bar(len(names), label, enabled=True) as advance:
            for name in names:
                yield name
                advance(1)
    return iterate()
