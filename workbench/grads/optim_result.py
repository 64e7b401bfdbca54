"""The optimizer check as a :class:`~workbench.report.result.Result`: table, diagnosis, evidence, figure."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..report.result import Figure, Result
from .hypotheses import Hypothesis
from .optim_check import COLUMNS, CheckOptions, run_check
from .optimizer_settings import OptimizerSettings

SETTINGS = ("optimizer", "lr", "beta1", "beta2", "eps", "weight_decay", "clip")
# which settings each cause is about (the evidence rows shown beside it)
CAUSE_SETTINGS = {"learning_rate": ("lr",), "weight_decay": ("weight_decay",), "weight_decay_groups": ("weight_decay",),
                  "bias_correction": ("optimizer",), "beta1": ("beta1",), "beta2": ("beta2",), "eps": ("eps",),
                  "clipping": ("clip",), "loss_scale": (), "gradient_scale": ("clip",)}


def optim_check(capture: Path | str, mindformers_yaml: Path | str, options: CheckOptions | None = None) -> Result:
    """Run the check and build its report (exit 0 pass, 1 differences)."""
    options = options or CheckOptions()
    rows, settings, reference, facts, diagnosis, partial = run_check(capture, mindformers_yaml, options)
    table = pd.DataFrame(rows, columns=COLUMNS)
    failed = bool((table["status"] != "ok").any())
    names = {"capture": str(capture), "config": str(mindformers_yaml)}
    if options.observed:
        names["observed update"] = str(options.observed)
    if options.megatron:
        names["reference config"] = str(options.megatron)
    causes = pd.DataFrame([_cause_row(h, settings, reference, facts, "diagnosis") for h in diagnosis]
                          + [_cause_row(h, settings, reference, facts, "closest, does not fit") for h in partial],
                          columns=("cause", "status", "claim", "residual", "evidence"))
    summary = _summary(table, failed, diagnosis, partial, facts, options.rtol)
    return Result(kind="optim_check", title=_title(capture, mindformers_yaml, facts), verdict="FAIL" if failed else "PASS",
                  exit_code=int(failed), summary=summary,
                  tables={"parameters": table, "diagnosis": causes, "settings": _settings_table(settings, reference, facts)},
                  figures=[_figure(table, capture, mindformers_yaml, options.rtol, facts)], sources=names, facts=facts,
                  notes=_notes(facts),
                  terminal_columns={"parameters": ("name", "category", "max_rel_diff",
                                                   "exp_avg_rel_diff", "exp_avg_sq_rel_diff", "status"),
                                    "diagnosis": ("cause", "claim", "evidence"), "settings": ()})


def _title(capture, mindformers_yaml, facts: dict) -> str:
    whose = (f"the MindSpore run's update {facts['update']} ({Path(facts['observed']).name}) from the reference's "
             f"gradients" if facts["observed"] else f"the reference's update {facts['update']}")
    return f"optimizer check: {Path(mindformers_yaml).name} applied to {whose} ({Path(capture).name})"


def _summary(table: pd.DataFrame, failed: bool, diagnosis: list[Hypothesis], partial: list[Hypothesis], facts: dict,
             rtol: float) -> list[str]:
    finite = table["max_rel_diff"].dropna()
    worst = table.loc[finite.idxmax()] if len(finite) else None
    lines = [f"{len(table) - int((table['status'] != 'ok').sum())} of {len(table)} parameters within {rtol:g} "
             f"(weights after the step and Adam moments, max |diff| / max |reference|)"]
    if failed and worst is not None:
        lines.append(f"worst weights: {worst['name']} ({worst['category']}) relative difference {worst['max_rel_diff']:.3g}, "
                     f"update cosine {worst['update_cosine']:.6f}")
    non_finite = table.loc[table["status"] == "non-finite", "name"]
    if len(non_finite):
        lines.insert(1, f"{len(non_finite)} parameter(s) with nan/inf after the step (e.g. {non_finite.iloc[0]}); "
                        f"global gradient norm {facts['grad_norm']:.6g}")
    for hypothesis in diagnosis:
        lines.append(f"cause ({hypothesis.key}): {hypothesis.claim} — this alone reproduces {facts['subject']}'s update "
                     f"(residual {hypothesis.score:.2g} ≤ {facts['fit_tol']:g})")
    if failed and not diagnosis:
        closest = ", ".join(f"{h.key} ({h.score:.2g})" for h in partial if h.key != "configured") or "none"
        worst_names = table.sort_values("update_rel_diff", ascending=False)["name"].head(3)
        lines.append(f"no single cause reproduces {facts['subject']}'s update (several at once, or something outside "
                     f"the optimizer); closest: {closest}; worst parameters: {', '.join(worst_names)}")
    lines.append(f"applied {facts['optimizer_class']} with lr {facts['settings']['lr']:.6g}, clip coefficient "
                 f"{facts['clip_coefficient']:.6g} (global gradient norm {facts['grad_norm']:.6g})")
    return lines


def _cause_row(h: Hypothesis, settings: OptimizerSettings, reference: OptimizerSettings | None, facts: dict,
               status: str) -> dict:
    return {"cause": h.key, "status": status, "claim": h.claim, "residual": h.score,
            "evidence": "; ".join(_evidence(h, settings, reference, facts))}


def _evidence(h: Hypothesis, settings: OptimizerSettings, reference: OptimizerSettings | None, facts: dict) -> list[str]:
    meta, lines = facts["captured_meta"], []
    if h.key == "configured":
        return ["the configured optimizer, for comparison"]
    for key in CAUSE_SETTINGS.get(h.key, ()):
        ours = settings.describe()[key]
        source = settings.sources.get("clip_grad" if key == "clip" else key, "")
        lines.append(f"this config: {key} {ours}" + (f" ({source})" if source else ""))
        if reference is not None:
            theirs = reference.describe()["rule" if key == "optimizer" else key]
            lines.append(f"reference config: {key} {theirs}")
    if h.key == "learning_rate" and "lr" in meta:
        lines.append(f"the capture records lr {meta['lr']:.6g} for this update")
    if h.key in ("clipping", "gradient_scale") and "clip_coeff" in meta:
        lines.append(f"the capture records clip coefficient {meta['clip_coeff']:.6g}")
    if h.key == "loss_scale":
        lines.append(f"the capture records loss scale {facts['loss_scale']:g}")
    if h.key == "bias_correction":
        factor = (1 - settings.beta1) / np.sqrt(1 - settings.beta2)
        lines.append(f"without bias correction update 1 is (1-beta1)/sqrt(1-beta2) = {factor:.4g} × as large")
    return lines


def _settings_table(settings: OptimizerSettings, reference: OptimizerSettings | None, facts: dict) -> pd.DataFrame:
    ours, theirs = settings.describe(), reference.describe() if reference else {}
    sources = {**settings.sources, "clip": settings.sources.get("clip_grad", "")}
    meta = facts["captured_meta"]
    return pd.DataFrame([{"setting": key, "this config": ours[key], "source": sources.get(key, ""),
                          "reference config": theirs.get("rule" if key == "optimizer" else key, ""),
                          "capture": meta.get(key, "")} for key in SETTINGS])


def _notes(facts: dict) -> list[str]:
    notes = [f"optimizer class: {facts['optimizer_class']}" + ("" if facts["optimizer_class"].startswith("mindformers")
             else " (MindFormers is not installed here: MindSpore's class with the same update)"),
             "gradients are the reference's, divided by its loss scale and clipped as this config clips; "
             "weights before the step and Adam state from the capture"]
    return notes


def _figure(table: pd.DataFrame, capture, yaml_path, rtol: float, facts: dict) -> Figure:
    against = (f"the MindSpore run's update {Path(facts['observed']).name}" if facts.get("observed")
               else f"reference capture {Path(capture).name}")
    theirs = "MindSpore run" if facts.get("observed") else "reference"

    def draw():
        from ..report.figures import bar_relative_differences

        values = np.nanmax(table[["max_rel_diff", "exp_avg_rel_diff", "exp_avg_sq_rel_diff"]].to_numpy(float), axis=1)
        return bar_relative_differences(list(table["name"]), list(values), threshold=rtol,
                                        outliers=set(table.loc[table["status"] != "ok", "name"]),
                                        title=f"{Path(yaml_path).name} vs {against}: per-parameter difference "
                                              "after the step",
                                        xlabel=f"max |ours − {theirs}| / max |{theirs}| (weights, exp_avg, exp_avg_sq)")
    return Figure("parameters", "per-parameter difference after the step", draw)
