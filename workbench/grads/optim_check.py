"""``workbench optim-check``: apply the configured MindSpore optimizer to the reference's captured
gradients and compare with the reference's own update, parameter by parameter, then say why they differ.

Three streamed passes over the parameters, each parameter in flat slices of ``SLICE`` elements (Adam is
elementwise; every figure below is a sum or a maximum over slices), so memory follows one tensor of each
kind plus one slice's working set, whatever the model's size:
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
from .hypotheses import Estimates, Hypothesis, ParamData, Residual, candidates, choose, predict
from .optimizer_apply import UpdatePool, implementation
from .optimizer_settings import megatron_settings, mindformers_settings

SLICE = 1 << 18                    # elements per slice (float64 working set ~2 MB per array)
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
    keep_updated: dict | None = None   # filled with name -> our weights after the update (the caller's memory)
    observed: Path | None = None       # the MindSpore run's weights after this update from the captured gradients
                                       # (.observed): explained instead of the reference's update


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


def _slices(captured: CapturedStep, name: str, loss_scale: float, cat: str, observed=None):
    """The parameter's captured tensors as flat float64 slices (:class:`ParamData`), one slice at a time.
    With ``observed`` (:class:`.observed.ObservedUpdate`) its weights stand for the update's result, without moments
    (a weights file has none; the moments the update starts from are still the capture's)."""
    kinds = (BEFORE, GRADS, PREVIOUS + "exp_avg", PREVIOUS + "exp_avg_sq")
    kinds += () if observed is not None else (AFTER, "exp_avg", "exp_avg_sq")
    flat = {kind: captured.read(kind, name).reshape(-1) for kind in kinds if captured.has(kind)}
    if observed is not None:
        flat[AFTER] = observed.read(name).reshape(-1)
    ndim, size = len(captured.shape(name)), flat[GRADS].size
    for start in range(0, max(size, 1), SLICE):
        part = {kind: flat[kind][start:start + SLICE].astype(np.float64) for kind in flat}
        yield ParamData(name, cat, ndim, part[BEFORE], part[GRADS] / loss_scale, part[AFTER], part.get("exp_avg"),
                        part.get("exp_avg_sq"), part.get(PREVIOUS + "exp_avg"), part.get(PREVIOUS + "exp_avg_sq"))


def _require(captured: CapturedStep, update: int, observed: bool = False) -> None:
    for kind in (BEFORE,) if observed else (BEFORE, AFTER):
        if not captured.has(kind):
            raise InputError(str(captured.root / f"step_{update}" / kind), f"update {update} has no {kind}",
                             "capture with capture_gradients(..., params=True) and capture_after_step")
    for kind in ("exp_avg", "exp_avg_sq"):
        if update > 1 and not captured.has(PREVIOUS + kind):
            raise InputError(str(captured.root / f"step_{update - 1}" / kind), f"update {update} starts from Adam "
                             f"state that was not captured (update {update - 1}'s {kind})",
                             "check update 1, or capture the state of the update before")


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


class RowSums:
    """One parameter's comparison, gathered over its slices."""

    def __init__(self, name: str, cat: str, shape: tuple, weight_decay: float):
        self.head = {"name": name, "category": cat, "shape": "x".join(map(str, shape)) or "scalar",
                     "weight_decay": weight_decay}
        self.maxima = np.zeros(6)      # |p1-ref|, |ref|, |m-mref|, |mref|, |v-vref|, |vref|
        self.sums = np.zeros(4)        # <d_ours, d_ref>, |d_ours|², |d_ref|², |d_ours - d_ref|²
        self.moments, self.finite = [False, False], True

    def add(self, data: ParamData, ours: tuple) -> None:
        p1, m, v = (x.astype(np.float64) for x in ours)
        arrays = (p1, data.p1_ref, *(y for y in (m, v, data.m_ref, data.v_ref) if y is not None))
        self.finite &= all(np.isfinite(x).all() for x in arrays)
        pairs = ((p1, data.p1_ref), (m, data.m_ref), (v, data.v_ref))
        for index, (a, b) in enumerate(pairs):
            if b is not None and b.size:
                if index:
                    self.moments[index - 1] = True
                self.maxima[2 * index] = max(self.maxima[2 * index], float(np.max(np.abs(a - b))))
                self.maxima[2 * index + 1] = max(self.maxima[2 * index + 1], float(np.max(np.abs(b))))
        ours_change, ref_change = p1 - data.p0, data.p1_ref - data.p0
        self.sums += (float(np.vdot(ours_change, ref_change)), float(np.vdot(ours_change, ours_change)),
                      float(np.vdot(ref_change, ref_change)), float(np.vdot(ours_change - ref_change,
                                                                            ours_change - ref_change)))

    def row(self, rtol: float) -> dict:
        rel = [self.maxima[2 * i] / max(self.maxima[2 * i + 1], 1e-30) for i in range(3)]
        rel = [rel[0], *(rel[i + 1] if self.moments[i] else float("nan") for i in range(2))]
        norms = np.sqrt(self.sums[1] * self.sums[2])
        row = {**self.head, "max_abs_diff": float(self.maxima[0]), "max_rel_diff": rel[0],
               "update_cosine": float(self.sums[0] / norms) if norms > 0 else float("nan"),
               "update_rel_diff": float(np.sqrt(self.sums[3]) / max(np.sqrt(self.sums[2]), 1e-30)),
               "exp_avg_rel_diff": rel[1], "exp_avg_sq_rel_diff": rel[2]}
        if not self.finite:
            row["status"] = "non-finite"        # nan/inf on either side: never "ok", never a ratio
        else:
            row["status"] = "ok" if max(x for x in rel if x == x) <= rtol else "differs"
        return row


def run_check(capture: Path | str, mindformers_yaml: Path | str, options: CheckOptions | None = None):
    """The data of the check: (rows, settings, reference settings, facts, diagnosis, partial fits)."""
    from contextlib import ExitStack

    from .observed import SUBJECT, ObservedUpdate

    options = options or CheckOptions()
    capture = Path(capture)
    update = pick_step(capture, options.step)
    settings = mindformers_settings(mindformers_yaml, update)
    reference = megatron_settings(options.megatron, update) if options.megatron else None
    impl = implementation(settings.rule, options.use_mindformers)
    with ExitStack() as stack:
        captured = stack.enter_context(open_captured_step(capture, update, arch=options.arch,
                                                          config=Path(mindformers_yaml)))
        _require(captured, update, observed=options.observed is not None)
        observed = None
        if options.observed is not None:
            observed = stack.enter_context(ObservedUpdate(options.observed, captured.names,
                                                          {name: captured.shape(name) for name in captured.names}))
        loss_scale = captured.loss_scale
        norm = _global_norm(captured, loss_scale)
        coeff = _clip_coefficient(settings.clip, norm)
        sweep = _Sweep(captured, update, loss_scale, settings, coeff, observed)
        rows, estimates = sweep.apply_configured(impl, options)
        facts = {"update": update, "arch": captured.arch, "capture_format": captured.source_format,
                 "optimizer_class": impl.name, "settings": settings.describe(), "sources": settings.sources,
                 "grad_norm": norm, "clip_coefficient": coeff, "loss_scale": loss_scale,
                 "captured_meta": {k: captured.meta[k] for k in ("lr", "grad_norm", "clip_coeff", "loss_scale")
                                   if k in captured.meta}, "rtol": options.rtol, "fit_tol": options.fit_tol,
                 "subject": SUBJECT if observed is not None else "the reference",
                 "observed": str(options.observed) if observed is not None else None}
        if reference is not None:
            facts["reference_settings"] = reference.describe()
        diagnosis, partial = [], []
        if any(row["status"] != "ok" for row in rows):
            context = {"grad_norm": norm, "loss_scale": loss_scale, "subject": facts["subject"],
                       "reference_clip": reference.clip if reference else None,
                       "eps": (reference.eps,) if reference else ()}
            diagnosis, partial = sweep.diagnose(estimates, context, options)
    return rows, settings, reference, facts, diagnosis, partial


@dataclass
class _Sweep:
    """The passes over the parameters of one captured update (module doc): the configured optimizer, the hypotheses.
    ``observed``: the update being explained is that file's, not the capture's ``params_after``."""

    captured: CapturedStep
    update: int
    loss_scale: float
    settings: object
    coeff: float
    observed: object = None

    def slices(self, name: str, cat: str):
        return _slices(self.captured, name, self.loss_scale, cat, self.observed)

    def apply_configured(self, impl, options: CheckOptions) -> tuple[list[dict], Estimates]:
        rows, estimates = [], Estimates()
        pool = UpdatePool(impl, self.settings, pad_to=SLICE)
        for name in _progress(self.captured.names, options.progress, "optimizer"):
            shape = self.captured.shape(name)
            cat, wd = category(self.captured, name, len(shape)), self.settings.weight_decay_of(name, len(shape))
            sums, kept = RowSums(name, cat, shape, wd), []
            for data in self.slices(name, cat):
                ours = pool.apply(wd, data.p0, data.grad * self.coeff, self.update, data.m_prev, data.v_prev)
                sums.add(data, ours)
                estimates.add(data, self.settings, self.coeff, self.update)
                if options.keep_updated is not None:
                    kept.append(ours[0])
            if options.keep_updated is not None:
                options.keep_updated[name] = np.concatenate(kept).reshape(shape)
            rows.append(sums.row(options.rtol))
        return rows, estimates

    def diagnose(self, estimates: Estimates, context: dict, options: CheckOptions):
        hypotheses = candidates(estimates, self.settings, self.coeff, context)
        baseline = Hypothesis("configured", 0, "as configured", self.settings, self.coeff)
        everything = [baseline, *hypotheses]
        for name in _progress(self.captured.names, options.progress, "diagnosis"):
            sums = [Residual() for _ in everything]
            for data in self.slices(name, estimates.category[name]):
                for hypothesis, residual in zip(everything, sums, strict=True):
                    decays = hypothesis.decays.get(name) if hypothesis.decays else None
                    residual.add(data, predict(data, hypothesis.settings, hypothesis.coeff, self.update, decays))
            for hypothesis, residual in zip(everything, sums, strict=True):
                hypothesis.score = max(hypothesis.score, residual.score())
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
