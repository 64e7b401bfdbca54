"""``workbench localnorm``: per-parameter local norms of two runs, matched through the specs.

Both sides are brought to one quantity before anything is compared: the sum of squares of a
parameter's gradient over the whole step (L2 definitions are squared; a micro-step quantity is
never compared with a step quantity). Parameters are matched by :func:`spec.relation.correspond`,
so a fused tensor on one side (Megatron ``linear_qkv``) is compared with the sum of its parts on
the other (MindFormers ``wq`` + ``wk`` + ``wv``): squared norms add over parts. Tensor-parallel
ranks of one side are summed for split tensors and taken once for replicated ones
(``converters/megatron_parallel.yaml``). The relative difference is that of the L2 norms.

An outlier is a group whose relative difference is above ``floor`` and ``factor`` times the
median over all groups: the one parameter computed differently stands out from the shared noise.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from ..errors import InputError
from ..report.result import Figure, Result
from .schema import DEFINITION_TRAITS, LogSeries
GROUP_COLUMNS = ("step", "label", "kind", "layer", "module", "reference_names", "candidate_names",
                 "reference_sum_sq", "candidate_sum_sq", "relative_difference", "status")


@dataclass(frozen=True)
class NormThresholds:
    floor: float = 1e-4             # never an outlier below this relative difference of the L2 norms
    factor: float = 10.0            # ... nor below factor x the median over all parameters


def squared_norms(series: LogSeries) -> tuple[pd.DataFrame, str]:
    """(step, param, sum_sq) with ranks merged, and the definition it came from."""
    table = series.local_norms
    if table.empty:
        raise InputError(series.source, "no per-parameter local norms in this log",
                         "MindFormers: runner_wrapper.local_norm: True; Megatron: the local-norm patch or "
                         "--save-wgrads-interval")
    definitions = sorted(table["definition"].unique())
    if len(definitions) != 1 or definitions[0] not in DEFINITION_TRAITS:
        raise InputError(series.source, f"mixed or unknown local-norm definitions {definitions}",
                         "compare one kind of local norm at a time")
    squared, scope = DEFINITION_TRAITS[definitions[0]]
    if scope != "step":
        raise InputError(series.source, f"{definitions[0]} values are per micro step: their squares do not add up "
                         "to the step's", "log whole-step local norms (runner_wrapper.local_norm: True)")
    if (table["param"] == "").any():
        raise InputError(series.source, "local norms without parameter names",
                         "recover the names first (the Param groups block, or --names CHECKPOINT)")
    values = table["value"].astype(np.float64)
    frame = table.assign(sum_sq=values if squared else values ** 2, param=table["param"].astype(object))
    return _merge_ranks(frame), definitions[0]


def _merge_ranks(frame: pd.DataFrame) -> pd.DataFrame:
    if frame["rank"].nunique() <= 1:
        return frame.groupby(["step", "param"], sort=False, as_index=False)["sum_sq"].sum()
    from ..tensors.megatron_rules import megatron_parallel_rules, rule_for

    rules, args = megatron_parallel_rules(), SimpleNamespace(swiglu=True)
    split = {name: rule_for(name, rules, args).rule not in ("replicated", "skip") for name in frame["param"].unique()}
    summed = frame[frame["param"].map(split)].groupby(["step", "param"], sort=False, as_index=False)["sum_sq"].sum()
    first_rank = frame[~frame["param"].map(split)].sort_values("rank").drop_duplicates(["step", "param"])
    return pd.concat([summed, first_rank[["step", "param", "sum_sq"]]], ignore_index=True)


def _detect_arch(names_a: list[str], names_b: list[str]) -> str:
    """The architecture both name lists fit: each side is tried on its own (a log holds one format)."""
    from .. import spec

    found = {spec.detect_arch(list(dict.fromkeys(names)), allow_unmatched=True) for names in (names_a, names_b)}
    if len(found) > 1:
        raise InputError("local norms", f"the two logs' names fit different architectures ({', '.join(sorted(found))})",
                         "pass --arch")
    return found.pop()


def _arch_and_formats(names_a: list[str], names_b: list[str], arch: str | None):
    from .. import spec
    from ..spec.relation import naming_format

    arch_name = arch or _detect_arch(names_a, names_b)
    spec_ = spec.load_arch(arch_name)
    return spec_, naming_format(names_a, spec_), naming_format(names_b, spec_)


def compare_local_norms(reference: LogSeries, candidate: LogSeries, arch: str | None = None,
                        steps: list[int] | None = None, thresholds: NormThresholds = NormThresholds()) -> Result:
    from ..spec.relation import correspond

    norms_a, definition_a = squared_norms(reference)
    norms_b, definition_b = squared_norms(candidate)
    common = sorted(set(norms_a["step"]) & set(norms_b["step"]))
    chosen = [s for s in common if steps is None or s in steps]
    if not chosen:
        raise InputError(candidate.source, f"no common step with local norms (reference {sorted(set(norms_a['step']))[:5]}, "
                         f"candidate {sorted(set(norms_b['step']))[:5]})", "pass --step with a step both logged")
    names_a = list(dict.fromkeys(norms_a["param"]))
    names_b = list(dict.fromkeys(norms_b["param"]))
    spec_, format_a, format_b = _arch_and_formats(names_a, names_b, arch)
    groups, unmatched_a, unmatched_b = correspond(names_a, format_a, names_b, format_b, spec_)
    by_step_a = {s: dict(zip(f["param"], f["sum_sq"], strict=True)) for s, f in norms_a.groupby("step")}
    by_step_b = {s: dict(zip(f["param"], f["sum_sq"], strict=True)) for s, f in norms_b.groupby("step")}
    rows = []
    for step in chosen:
        for group in groups:
            a = sum(by_step_a[step].get(n, np.nan) for n in group.a) if group.a else np.nan
            b = sum(by_step_b[step].get(n, np.nan) for n in group.b) if group.b else np.nan
            rel = abs(np.sqrt(b) - np.sqrt(a)) / np.sqrt(a) if a > 0 else (0.0 if a == b else np.inf)
            rows.append((step, group.label, group.kind, group.layer, _module(group.label), " + ".join(group.a),
                         " + ".join(group.b), a, b, rel, "unmatched" if group.kind.startswith("only") else ""))
    table = pd.DataFrame(rows, columns=list(GROUP_COLUMNS))
    outliers = _flag_outliers(table, thresholds)
    table.loc[outliers, "status"] = "outlier"
    table.loc[table["status"] == "", "status"] = "pass"
    first = table[table["step"] == chosen[0]].sort_values("relative_difference", ascending=False)
    worst = first[first["status"] == "outlier"]
    unmatched = table[table["status"] == "unmatched"]["label"].unique().tolist()
    summary = [f"step {chosen[0]}: {len(first)} parameter groups ({format_a} vs {format_b}, arch {spec_.name}); "
               f"median relative difference of the L2 norms {np.nanmedian(first['relative_difference']):.3g}"]
    summary += [f"outlier: {row.label} ({row.relative_difference:.3g}; {row.reference_names} vs {row.candidate_names})"
                for row in worst.head(5).itertuples()]
    if unmatched or unmatched_a or unmatched_b:
        summary.append(f"unmatched: {', '.join(unmatched + unmatched_a + unmatched_b)}")
    failed = bool(len(worst) or unmatched or unmatched_a or unmatched_b)
    notes = [f"reference values are {definition_a}, candidate values {definition_b}; compared as sums of squares "
             "over the step" + ("" if definition_a == definition_b else
                                " (pre- and post-reduce values agree only on one data-parallel rank)")]
    return Result(kind="localnorm", title=f"local norms: {Path(candidate.source).name} vs the reference {Path(reference.source).name}",
                  verdict="FAIL" if failed else "PASS", exit_code=int(failed), summary=summary,
                  tables={"parameters": first, "all steps": table}, figures=_figures(table, chosen, reference, candidate),
                  sources={"reference": reference.source, "candidate": candidate.source},
                  facts={"arch": spec_.name, "formats": [format_a, format_b], "steps": chosen,
                         "thresholds": {"floor": thresholds.floor, "factor": thresholds.factor}},
                  notes=list(dict.fromkeys(notes + reference.notes + candidate.notes)),
                  terminal_columns={"parameters": ("label", "reference_sum_sq", "candidate_sum_sq",
                                                   "relative_difference", "status"), "all steps": ()})


def _module(label: str) -> str:
    parts = label.split(".")
    return ".".join(parts[2:]) if len(parts) > 2 and parts[0] == "layers" else label


def _flag_outliers(table: pd.DataFrame, t: NormThresholds) -> pd.Series:
    matched = table["status"] != "unmatched"
    median = table[matched].groupby("step")["relative_difference"].transform("median")
    limit = np.maximum(t.floor, t.factor * median.reindex(table.index).fillna(np.inf))
    return matched & (table["relative_difference"] > limit)


def _figures(table: pd.DataFrame, steps: list[int], reference: LogSeries, candidate: LogSeries) -> list[Figure]:
    first = table[(table["step"] == steps[0]) & (table["status"] != "unmatched")]
    names = f"{Path(candidate.source).name} vs {Path(reference.source).name}"

    def bars():
        from ..report.figures import bar_relative_differences

        return bar_relative_differences(list(first["label"]), list(first["relative_difference"]),
                                        title=f"step {steps[0]} local-norm relative difference: {names}",
                                        xlabel="relative difference of the L2 norm",
                                        outliers=set(first[first["status"] == "outlier"]["label"]))

    def grid():
        from ..report.figures import heatmap

        layered = first.dropna(subset=["layer"])
        modules = list(dict.fromkeys(layered["module"]))
        layers = sorted({int(v) for v in layered["layer"]})
        matrix = np.full((len(layers), len(modules)), np.nan)
        for row in layered.itertuples():
            matrix[layers.index(int(row.layer)), modules.index(row.module)] = row.relative_difference
        identical = not np.nanmax(np.abs(matrix), initial=0.0)
        return heatmap(matrix, [f"layer {i}" for i in layers], modules, log=not identical,
                       colorbar_label="relative difference of L2 norms",
                       title=f"step {steps[0]} local norms by layer and module: {names}"
                             + (" (all identical)" if identical else ""))

    figures = [Figure("bars", "relative difference per parameter", bars)]
    if first["layer"].notna().any():
        figures.append(Figure("heatmap", "relative difference by layer and module", grid))
    if len(steps) > 1:
        figures.append(Figure("ratio", "candidate / reference norm over steps", lambda: _ratio_figure(table, names)))
    return figures


def _ratio_figure(table: pd.DataFrame, names: str):
    from ..report.figures import new_figure

    matched = table[table["status"] != "unmatched"]
    worst = matched.groupby("label")["relative_difference"].max().nlargest(8).index
    fig, (axis,) = new_figure(1, height=4.5)
    for label in worst:
        rows = matched[matched["label"] == label]
        axis.plot(rows["step"], np.sqrt(rows["candidate_sum_sq"] / rows["reference_sum_sq"]), marker="o", label=label)
    axis.axhline(1.0, color="black", lw=0.6)
    axis.ticklabel_format(axis="y", useOffset=False)
    axis.xaxis.get_major_locator().set_params(integer=True)
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("candidate / reference L2 norm")
    axis.set_title(f"local-norm ratio, the {len(worst)} most different parameters: {names}")
    axis.legend(fontsize=7)
    return fig
