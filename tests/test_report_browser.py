"""The shared HTML report renders in real headless Chromium: figures decode, no console errors."""
import numpy as np
import pandas as pd

from browser import render
from workbench.report import figures
from workbench.report.emit import emit
from workbench.report.result import Figure, Result


def test_result_page_renders_with_its_figures(tmp_path):
    x = np.arange(1, 21)
    result = Result(kind="loss", title="loss: b.log vs a.log", verdict="PASS",
                    summary=["step 1 relative difference 1e-6"],
                    tables={"steps": pd.DataFrame({"step": x, "reference": 3 + 1 / x})},
                    figures=[Figure("loss", "loss", lambda: figures.series_with_difference(
                        x, {"a.log": 3 + 1 / x, "b.log": 3 + 1.01 / x}, title="loss: b.log vs a.log", ylabel="loss"))],
                    sources={"reference": "a.log", "candidate": "b.log"})
    page = tmp_path / "report.html"
    emit(result, out=page)
    shown = render(page, tmp_path / "browser")
    assert shown.images == ["ok"]
    assert 'id="verdict"' in shown.dom and "step 1 relative difference" in shown.dom
    assert shown.console == []
    assert shown.screenshot.stat().st_size > 10_000
