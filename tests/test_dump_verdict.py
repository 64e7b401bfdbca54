"""Verdicts, noise, first divergence and the compare result (workbench/dumps/verdict*.py, compare_result.py)."""
from __future__ import annotations

import json

import numpy as np
from dump_tables import msprobe_table
from workbench_testing import fixtures_dir

from workbench.dumps.compare_result import compare_result
from workbench.dumps.match import match_dumps
from workbench.dumps.verdict import evaluate, noise_spread, normalise_dtype, tensor_metrics
from workbench.dumps.verdict_first import first_divergence
from workbench.report.emit import render

PLANTED = "Functional.linear.1.forward.output.0"


def _torch():
    return msprobe_table(fixtures_dir("dumps") / "msprobe_pytorch" / "out_statistics_mix", "A")


def test_planted_output_change_after_matching_inputs_is_the_first_divergence():
    a = _torch()
    b = a.assign(side="B")
    b.loc[b["name"] == PLANTED, "max"] *= 1.1
    evaluated = evaluate(match_dumps(a, b).pairs)
    first = first_divergence(evaluated)
    assert first is not None and first["call_a"] == "Functional.linear.1.forward"
    assert first["input_worst"] == 0.0 and first["output_worst"] > first["tolerance"]
    assert first_divergence(evaluate(match_dumps(a, a.assign(side="B")).pairs)) is None


def test_bf16_against_fp32_is_not_an_error_by_itself_and_dtype_names_normalise():
    a = _torch()
    b = a.assign(side="B", dtype="bfloat16")
    b["mean"] = b["mean"] * (1 + 2e-3)                       # bf16 rounding-sized difference
    evaluated = evaluate(match_dumps(a, b).pairs)
    assert (evaluated["status"] == "pass").all()
    assert evaluated["note"].str.contains("bfloat16's tolerance").all()
    assert normalise_dtype("Float32") == normalise_dtype("torch.float32") == "float32"


def test_tolerances_and_dtype_notes_are_each_rows_own():
    """Found once per distinct (A dtype, B dtype) pair, they are what each row's pair gives: spellings, one side
    missing as None or as nan (which pandas counts as one value but which print differently), all-missing
    nan/inf counts."""
    import math

    from workbench.dumps.verdict import _dtype_note_of, tolerance

    pairs = match_dumps(_torch(), _torch().assign(side="B")).pairs
    spellings = ["float32", "torch.bfloat16", "Float16", "fp32", None, math.nan, "int64"]
    rng = np.random.default_rng(3)
    for missing in (False, True):
        table = pairs.copy()
        choices = spellings if missing else spellings[:4] + spellings[6:]
        table["a_dtype"] = [choices[i] for i in rng.integers(0, len(choices), len(table))]
        table["b_dtype"] = [choices[i] for i in rng.integers(0, len(choices), len(table))]
        table["a_nan_count"] = None
        evaluated = evaluate(table.copy())
        rows = list(zip(table["a_dtype"], table["b_dtype"], strict=True))
        assert evaluated["tolerance"].tolist() == [tolerance(*pair) for pair in rows]
        assert evaluated["note"].tolist() == [_dtype_note_of(*pair) for pair in rows]     # no nan/inf: A is B


def test_noise_widens_tolerances():
    a = _torch()
    b = a.assign(side="B")
    b.loc[b["name"] == PLANTED, "max"] *= 1.01
    rerun = a.copy()
    rerun.loc[rerun["name"] == PLANTED, "max"] *= 1.008                 # the reference itself moves this much
    assert first_divergence(evaluate(match_dumps(a, b).pairs)) is not None
    evaluated = evaluate(match_dumps(a, b).pairs, noise=noise_spread(a, rerun))
    assert first_divergence(evaluated) is None
    row = evaluated[evaluated["a_name"] == PLANTED].iloc[0]
    assert row["status"] == "pass" and row["tolerance"] > 1e-3


def test_nan_on_one_side_is_an_error():
    a = _torch()
    b = a.assign(side="B")
    b.loc[b["name"] == PLANTED, "max"] = float("inf")
    evaluated = evaluate(match_dumps(a, b).pairs)
    row = evaluated[evaluated["a_name"] == PLANTED].iloc[0]
    assert row["status"] == "error" and row["note"] == "nan/inf only in B"


def test_tensor_metrics():
    x = np.linspace(1, 2, 1000)
    y = x.copy()
    y[:3] *= 1.004
    got = tensor_metrics(x, y)
    assert got["cosine"] > 0.9999 and np.isclose(got["max_rel_err"], 0.004)
    assert got["one_thousandth_ratio"] == 0.997 and got["five_thousandths_ratio"] == 1.0


def test_compare_result_summary_tables_html_tree_and_xlsx_colours():
    a = _torch()
    b = msprobe_table(fixtures_dir("dumps") / "msprobe_mindspore" / "out_statistics_mix", "B")
    matching = match_dumps(a, b)
    result = compare_result(matching, evaluate(matching.pairs), {"A": "torch", "B": "mindspore"}, len(a), len(b))
    assert result.summary[0].startswith("matched pairs:") and "first divergence" in result.summary[1]
    assert list(result.tables) == ["pairs", "unmatched", "suspects", "hierarchy"]
    assert (result.tables["unmatched"]["reason"].str.len() > 0).all()
    page = render(result, "html")
    assert 'id="hierarchy"' in page and "<details class=\"node\"" in page and "http" not in page.split("<body>")[1]
    document = json.loads(render(result, "json"))
    assert document["schema"] == "workbench.compare/1"
    import io

    from openpyxl import load_workbook
    book = load_workbook(io.BytesIO(render(result, "xlsx")))
    sheet = book["unmatched"]
    status = [c.value for c in sheet[1]].index("status")
    assert sheet.cell(row=2, column=status + 1).fill.start_color.rgb.endswith("D9D9D9")


def test_statuses_and_notes_are_each_rows_own():
    """Every status (pass, warning, error) and note (nan/inf on one side, on both, a dtype note) is what the row's own
    relative differences, tolerance and nan/inf test give."""
    import math

    from workbench.dumps.verdict import WARNING_FACTOR, _dtype_note_of, nan_inf_note, relative_differences, tolerance

    table = match_dumps(_torch(), _torch().assign(side="B")).pairs.copy()
    rng = np.random.default_rng(11)
    size = len(table)
    table["b_mean"] = table["a_mean"] * (1 + rng.choice([0.0, 1e-6, 1e-3, 0.05, 2.0], size))
    table["b_dtype"] = rng.choice(["float32", "bfloat16", "float16"], size)
    for side in ("a", "b"):
        table[f"{side}_nan_count"] = rng.choice([0, 0, 0, 2], size)
        table[f"{side}_max"] = np.where(rng.random(size) < 0.1, math.inf, table[f"{side}_max"])
    evaluated = evaluate(table.copy())
    statuses, notes = [], []
    for row in table.to_dict("records"):
        note = nan_inf_note(row)
        finite = [v for v in relative_differences(row).values() if math.isfinite(v)]
        worst, tol = max(finite, default=math.nan), tolerance(row["a_dtype"], row["b_dtype"])
        status = ("error" if note else "pass" if not math.isfinite(worst) or worst <= tol else
                  "warning" if worst <= WARNING_FACTOR * tol else "error")
        statuses.append(status)
        notes.append(note or _dtype_note_of(row["a_dtype"], row["b_dtype"]))
    assert evaluated["status"].tolist() == statuses and evaluated["note"].tolist() == notes
    assert {"pass", "warning", "error"} <= set(statuses) and len({n for n in notes if "nan/inf" in n}) == 2
    assert evaluated["status"].dtype == object and evaluated["note"].dtype == object
