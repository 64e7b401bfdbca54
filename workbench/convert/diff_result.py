"""``workbench weights diff`` as a :class:`Result`: the per-tensor table, a verdict, a summary,
and a bar chart of the tensors' relative differences (largest first) for the HTML report."""
from __future__ import annotations

from pathlib import Path

from ..report.result import Figure, Result


def weights_diff_result(frame, a: Path | str, b: Path | str, tolerance) -> Result:
    """``frame`` from :func:`workbench.convert.diff.diff_checkpoints`; exit 0 only when all match."""
    from .diff import summary

    counts = summary(frame)
    all_match = counts["all_match"]
    bar = "exactly (bit for bit)" if tolerance.exact else f"within atol={tolerance.atol:g}, rtol={tolerance.rtol:g}"
    lines = [f"{counts['tensors']} tensors compared {bar}: "
             + ", ".join(f"{count} {status}" for status, count in counts.items() if status not in ("tensors", "all_match"))]
    compared = frame[frame["rel_diff"].notna()] if "rel_diff" in frame else frame.iloc[0:0]
    if len(compared):
        worst = compared.loc[compared["rel_diff"].idxmax()]
        lines.append(f"largest relative difference {worst['rel_diff']:.3g} in {worst['name']} "
                     f"(max |a-b| {worst['max_abs_diff']:.3g})")
    figures = [_bars(compared, Path(a).name, Path(b).name)] if len(compared) else []
    return Result(kind="weights_diff", title=f"weights diff: {Path(a).name} vs {Path(b).name}",
                  verdict="MATCH" if all_match else "MISMATCH", exit_code=0 if all_match else 1,
                  summary=lines, tables={"tensors": frame}, figures=figures,
                  sources={"A": str(a), "B": str(b)},
                  facts={"atol": tolerance.atol, "rtol": tolerance.rtol, "counts": counts})


def _bars(compared, name_a: str, name_b: str) -> Figure:
    from ..report.figures import bar_relative_differences

    names, values = list(compared["name"]), list(compared["rel_diff"])
    outliers = set(compared.loc[compared["status"] != "match", "name"])
    return Figure("relative_difference", "Relative difference per tensor",
                  lambda: bar_relative_differences(
                      names, values, outliers=outliers,
                      title=f"‖A − B‖ / ‖A‖ per tensor (A: {name_a}, B: {name_b}; red: not matching)",
                      xlabel="relative L2 difference (unitless)"))
