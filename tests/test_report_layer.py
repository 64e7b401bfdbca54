"""The shared output layer: one Result, one emit(), the same formats for every command."""
import base64
import json
import re

import numpy as np
import pandas as pd
import pytest

from workbench.errors import InputError
from workbench.report import emit as emit_module
from workbench.report import figures
from workbench.report.emit import choose_format, emit, render, write_figure
from workbench.report.result import Figure, Result


def _result(rows: int = 5) -> Result:
    x = np.arange(1, rows + 1)
    a, b = 3.0 + 1.0 / x, 3.0 + 1.0 / x + 1e-3
    table = pd.DataFrame({"step": x, "a": a, "b": b, "status": ["pass"] * (rows - 1) + ["fail"]})
    return Result(
        kind="loss", title="loss: a.log vs b.log", verdict="FAIL", exit_code=1, summary=["step 1 differs <by> 1e-3"],
        tables={"steps": table, "extra": pd.DataFrame({"x": [float("nan")]})},
        figures=[Figure("loss", "loss curves", lambda: figures.series_with_difference(
            x, {"a.log": a, "b.log": b}, title="loss: a.log vs b.log", ylabel="loss"))],
        sources={"reference": "a.log", "candidate": "<b>.log"}, facts={"threshold": np.float32(0.01)},
        notes=["interval means"])


def test_format_comes_from_the_flag_then_the_suffix_then_the_terminal(tmp_path):
    assert choose_format(None, None) == "table"
    assert choose_format(None, tmp_path / "r.HTML") == "html"
    assert choose_format("csv", tmp_path / "r.html") == "csv"
    with pytest.raises(InputError, match="cannot tell the format"):
        choose_format(None, tmp_path / "r.docx")
    with pytest.raises(InputError, match="not offered"):
        choose_format("xlsx", None, allowed=("table", "json"))


def test_json_carries_the_schema_and_no_nan():
    document = json.loads(render(_result(), "json"))
    assert document["schema"] == "workbench.loss/1" and document["verdict"] == "FAIL"
    assert document["tables"]["extra"] == [{"x": None}]
    assert document["facts"]["threshold"] == pytest.approx(0.01)


def test_html_is_escaped_self_contained_and_embeds_the_figures():
    page = render(_result(), "html")
    assert "<b>.log" not in page and "&lt;b&gt;.log" in page and "&lt;by&gt;" in page
    assert not re.search(r"(src|href)=\"https?:", page)
    uri = re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(uri)[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'id="verdict">FAIL' in page


def test_markdown_and_csv_hold_every_row():
    result = _result(rows=100)
    assert render(result, "csv").count("\n") == 101
    markdown = render(result, "md")
    assert "## steps" in markdown and "| 100 |" in markdown and "**Verdict: FAIL**" in markdown


def test_xlsx_sheets_status_colours_and_the_row_limit(tmp_path, monkeypatch):
    openpyxl = pytest.importorskip("openpyxl")
    # a tiny row limit stands in for Excel's 1,048,575 so the split is tested without a million rows
    monkeypatch.setattr(emit_module, "EXCEL_MAX_ROWS", 3)
    out = tmp_path / "r.xlsx"
    assert emit(_result(rows=7), out=out) == 1
    book = openpyxl.load_workbook(out)
    assert book.sheetnames == ["summary", "steps", "steps (2)", "steps (3)", "extra"]
    last = book["steps (3)"]
    assert [c.value for c in last[1]] == ["step", "a", "b", "status"]
    assert last["D2"].value == "fail" and last["D2"].fill.start_color.rgb.endswith("FFC7CE")
    assert book["steps"]["D2"].fill.start_color.rgb.endswith("C6EFCE")


def test_emit_refuses_to_overwrite_without_force_and_writes_atomically(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(InputError, match="already exists"):
        emit(_result(), out=out)
    emit(_result(), out=out, force=True)
    assert json.loads(out.read_text())["schema"] == "workbench.loss/1"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_renderer_that_gives_pieces_is_written_as_their_text(tmp_path, capsys, monkeypatch):
    """A renderer may give its text as pieces (a comparison's CSV: a header and each unit's rows, as str or as
    the UTF-8 bytes of the compiled row writer); render joins them, emit writes them one after the other to a
    file or stdout: the same text, pieces of any size and kind."""
    import numpy as np

    monkeypatch.setattr("workbench.fileio._TEXT_PIECE", 3)                  # pieces cut across the write size
    pieces = ["a,b\n", "1,é\n2,x\n", np.frombuffer("4,ä\n5,\n".encode(), dtype=np.uint8), "",
              "3,\u00fc" * 4 + "\n", b"6,\xc3\xb6\n"]
    text = "a,b\n1,é\n2,x\n4,ä\n5,\n" + "3,\u00fc" * 4 + "\n6,ö\n"
    result = _result()
    result.renderers["csv"] = lambda _result: pieces
    assert render(result, "csv") == text
    emit(result, "csv", tmp_path / "out.csv")
    assert (tmp_path / "out.csv").read_bytes() == text.encode()
    capsys.readouterr()
    emit(result, "csv")
    assert capsys.readouterr().out == text


def test_terminal_table_shows_summary_and_truncates_long_tables(capsys):
    from rich.console import Console

    emit(_result(rows=60), console=Console(width=100, color_system=None))
    text = capsys.readouterr().out
    assert "loss: a.log vs b.log: FAIL" in text and "step 1 differs" in text and "20 more rows" in text


def test_figures_have_titles_labels_and_write_by_suffix(tmp_path):
    fig = figures.bar_relative_differences(["embed", "layers.0.q", "final_norm"], [1e-1, 1e-6, 2e-6],
                                           title="relative difference per parameter", outliers={"embed"},
                                           threshold=1e-3)
    axis = fig.axes[0]
    assert axis.get_xscale() == "log" and axis.get_title().startswith("relative difference")
    assert [t.get_text() for t in axis.get_yticklabels()][-1] == "embed"
    grid = figures.heatmap(np.array([[1e-6, 1e-2], [np.nan, 1e-5]]), ["layer 0", "layer 1"], ["attn", "mlp"],
                           title="relative difference", colorbar_label="relative difference")
    assert grid.axes[0].get_ylabel() == "layer"
    svg = write_figure(_result(), "loss", tmp_path / "loss.svg")
    assert svg.read_text().lstrip().startswith("<?xml")
    with pytest.raises(InputError, match="no figure"):
        write_figure(_result(), "nope", tmp_path / "x.png")
