"""A dump comparison as a :class:`workbench.report.result.Result` (kind ``compare``): the summary (matched and
unmatched counts per side, the first divergence, the top suspects), the detail table (status colour-coded in
xlsx like msprobe's workbooks), the unmatched rows with their reasons, and the model → layer → module →
operator tree (collapsible in HTML)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..report.result import Result
from .hierarchy import call_totals, flat, hang, joined_totals
from .verdict_first import Calls, calls_of, combined, first_divergence, suspects

DETAIL_FIRST = ("status", "worst_rel", "tolerance", "note", "level", "relation", "step", "rank", "order", "pass",
                "io", "slot", "layer", "logical_module", "a_name", "b_name", "a_dtype", "b_dtype", "a_shape", "b_shape")


@dataclass(frozen=True)
class Differing:
    """The pairs that differ (status ``error``) among some units' pairs: how many, and the earliest by (step, rank,
    order; the first of equal keys), named, with whether an output of its unit agreed before it."""

    errors: int
    key: tuple                            # the earliest's (step, rank, order)
    where: str                            # "a_name ↔ b_name (io, step S rank R)"
    agreed_before: bool


@dataclass(frozen=True)
class Digest:
    """What the summary and the tree are read from, besides counts: the diverging calls, the per-call totals, the
    number of pairs and the differing pairs. Each unit's is found where the unit is compared (a pool's worker);
    :func:`joined_digests` combines them exactly, so the parent does not walk the joined pairs row by row again
    (and a CSV report's units need not send their pairs at all: :func:`.compare_run.compare_unit`)."""

    calls: Calls
    totals: list
    pairs: int
    differing: Differing | None


def digest(evaluated, totals: bool = True) -> Digest:
    """``totals=False`` leaves out the per-call totals, which only the tree uses (a CSV report has none:
    :func:`compare_result`'s ``hierarchy``)."""
    return Digest(calls_of(evaluated), call_totals(evaluated) if totals else [], len(evaluated),
                  differing_of(evaluated))


def joined_digests(parts: list[Digest]) -> Digest:
    """The digest of the units' pairs joined in unit order (``tests/test_compare_units.py`` holds it equal)."""
    if len(parts) == 1:
        return parts[0]
    return Digest(combined([p.calls for p in parts]), joined_totals([p.totals for p in parts]),
                  sum(p.pairs for p in parts), joined_differing([p.differing for p in parts]))


def differing_of(evaluated) -> Differing | None:
    """The differing pairs of ``evaluated``, or None when none differs."""
    import numpy as np

    errors = np.flatnonzero(evaluated["status"].to_numpy(dtype=object) == "error") if len(evaluated) else []
    if not len(errors):
        return None
    keys = [evaluated[column].to_numpy()[errors] for column in ("order", "rank", "step")]
    earliest = evaluated.iloc[int(errors[np.lexsort(keys)[0]])]          # stable: the first of equal keys
    unit = (evaluated["step"] == earliest["step"]) & (evaluated["rank"] == earliest["rank"])
    agreed_before = (unit & (evaluated["order"] < earliest["order"]) & (evaluated["io"] == "output")
                     & (evaluated["status"] == "pass")).any()            # columns, not a copy of the table
    where = (f"{earliest['a_name']} ↔ {earliest['b_name']} ({earliest['io']}, step {earliest['step']} rank "
             f"{earliest['rank']})")
    return Differing(len(errors), (earliest["step"], earliest["rank"], earliest["order"]), where, bool(agreed_before))


def joined_differing(parts: list[Differing | None]) -> Differing | None:
    """The differing pairs of units joined in unit order: counts summed, the earliest of the units' earliest (a
    stable sort, as on the joined pairs; a unit's pairs share one (step, rank), so its own earlier pairs are
    the ones that agreed before)."""
    import numpy as np

    found = [part for part in parts if part is not None]
    if not found:
        return None
    keys = [np.array([part.key[i] for part in found]) for i in (2, 1, 0)]    # lexsort: the last key first
    return replace(found[int(np.lexsort(keys)[0])], errors=sum(part.errors for part in found))


def detail_columns(columns) -> list[str]:
    """The pairs table's columns as the report shows them: :data:`DETAIL_FIRST`, then the rest in order."""
    return [*DETAIL_FIRST, *(c for c in columns if c not in DETAIL_FIRST)]


def in_report_order(evaluated):
    """The pairs with :func:`detail_columns`' order, sharing their column arrays: ``evaluated[columns]`` copied
    every column (25 ms for 72k pairs) of a table that is not changed afterwards."""
    import pandas as pd

    columns = detail_columns(evaluated.columns)
    if list(evaluated.columns) == columns:
        return evaluated
    if not evaluated.columns.is_unique:
        return evaluated[columns]
    return pd.DataFrame({name: evaluated[name] for name in columns}, copy=False)


def compare_result(matching, evaluated, sources: dict[str, str], total_a: int, total_b: int,
                   found: Digest | None = None, hierarchy: bool = True) -> Result:
    """The report; ``found`` is ``digest(evaluated)`` when the caller has it (the units' digests joined), and
    then ``evaluated`` may be the pairs' columns without their rows (a CSV report, whose rows the units wrote).
    ``hierarchy=False`` when the report is only the pairs' CSV (``--format csv``, whose units also send back
    only the unmatched rows' sides): the model → layer → module → operator tree and its table, which only the
    other formats show, are not built (a tenth of a second for 30k calls)."""
    import numpy as np

    found = digest(evaluated) if found is None else found
    first = first_divergence(evaluated, found.calls)
    suspect_table = suspects(evaluated, calls=found.calls)
    tree = hang(found.totals) if hierarchy else None
    unmatched = matching.unmatched
    sides = unmatched["side"].to_numpy(dtype=object)           # numpy's compare: a quarter of pandas' time
    counts = {side: int(np.count_nonzero(sides == side)) for side in ("A", "B")}
    summary = [f"matched pairs: {found.pairs}; rows unmatched: A {counts['A']} of {total_a}, "
               f"B {counts['B']} of {total_b} (reasons in the unmatched table)",
               _first_line(first)]
    summary += [f"suspect {i + 1}: {_call_text(row)} (amplification {row['amplification']:.3g})"
                for i, row in enumerate(suspect_table.head(3).to_dict("records"))]
    differing = _differing_text(found.differing) if first is None else None
    if differing:
        summary.insert(1, differing)
    detail = in_report_order(evaluated)                     # units order theirs
    unmatched_view = unmatched.copy(deep=False)            # the same columns, status added: no copy of the rows
    unmatched_view["status"] = "unmatched"
    verdict = "DIVERGED" if first else "INPUTS DIFFER" if differing and not differing.startswith("note") else "PASS"
    result = Result(kind="compare", title="Dump comparison", verdict=verdict,
                    exit_code=0 if verdict == "PASS" else 1, summary=summary,
                    tables={"pairs": detail, "unmatched": unmatched_view, "suspects": suspect_table,
                            **({"hierarchy": flat(tree)} if hierarchy else {})},
                    sources=sources, facts={"first_divergence": first, "matched": found.pairs,
                                            "unmatched": counts, "rows": {"A": total_a, "B": total_b}},
                    terminal_columns={"pairs": ("status", "worst_rel", "tolerance", "logical_module", "a_name", "b_name"),
                                      "unmatched": ("side", "name", "reason"),
                                      "suspects": ("call_a", "call_b", "amplification"), "hierarchy": ()})
    if hierarchy:
        result.renderers["html"] = lambda r: _html(r, tree)
    return result


def _differing_text(found: Differing | None) -> str | None:
    """Pairs that differ although no call turns agreeing inputs into differing outputs. When nothing agrees
    before the earliest difference, the runs were fed different data or weights: never a "pass". When
    outputs agree before and after it, the difference did not propagate (e.g. masked scores -inf against
    -10000): said, not a verdict."""
    if found is None:
        return None
    if found.agreed_before:
        return (f"note: {found.errors} pair(s) differ without any call turning agreeing inputs into differing "
                f"outputs, the earliest {found.where}: differences that do not propagate (e.g. masked scores -inf "
                "against -10000)")
    return (f"no call turns agreeing inputs into differing outputs, yet {found.errors} pair(s) differ, the earliest "
            f"{found.where}: the runs' inputs already differ there — check the data and the weights first "
            "(workbench data diff, workbench weights diff)")


def _first_line(first: dict | None) -> str:
    if first is None:
        return "first divergence: none (every matched call whose inputs agree has agreeing outputs)"
    return f"first divergence: {_call_text(first)}, step {first['step']} rank {first['rank']}"


def _call_text(row: dict) -> str:
    layer = row.get("layer")
    where = f"layer {int(layer)} " if layer is not None and layer == layer else ""
    module = row.get("logical_module") or row.get("module_a") or ""
    note = f"; {row['note']}" if row.get("note") else ""
    return (f"{row['call_a']} ↔ {row['call_b']} ({where}{module}; output {row['output_worst']:.3g} vs inputs "
            f"{row['input_worst']:.3g}, tolerance {row['tolerance']:.3g}{note})")


def _html(result: Result, tree) -> str:
    from ..report.html import figure_views, render_page, table_view

    return render_page("compare.html.j2", result=result, figures=figure_views(result), hierarchy=tree,
                       tables=[table_view(name, frame) for name, frame in result.tables.items()])
