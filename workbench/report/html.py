"""A result as one self-contained HTML page (Jinja2 with autoescape; figures embedded as PNG
data URIs; no script, font or style is fetched from the network)."""
from __future__ import annotations

from functools import lru_cache

from .result import Result
from .tables import cell_text

HTML_ROWS = 2000                     # rows per table in the page; the csv/xlsx/json hold them all
VERDICT_CLASS = {"PASS": "pass", "OK": "pass", "ALIGNED": "pass", "MATCH": "pass", "IDENTICAL": "pass", "FAIL": "fail", "MISMATCH": "fail",
                 "DIVERGED": "fail", "RISK": "warn", "WARNING": "warn", "UNKNOWN": "warn", "NOT RUN": "skip",
                 "ERROR": "fail", "INCOMPLETE": "warn"}


@lru_cache(maxsize=1)
def environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("workbench.report", "templates"),
                      autoescape=select_autoescape(("html", "j2")), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["cell"] = cell_text
    env.globals["verdict_class"] = lambda verdict: VERDICT_CLASS.get(str(verdict).upper(), "info")
    return env


def table_view(name: str, frame, limit: int = HTML_ROWS) -> dict:
    return {"name": name, "columns": [str(c) for c in frame.columns],
            "rows": list(frame.head(limit).itertuples(index=False)), "total": len(frame),
            "shown": min(len(frame), limit)}


def figure_views(result: Result) -> list[dict]:
    from .figures import figure_data_uri

    return [{"name": f.name, "title": f.title, "uri": figure_data_uri(f.draw())} for f in result.figures]


def to_html(result: Result) -> str:
    return render_page("result.html.j2", result=result, figures=figure_views(result),
                       tables=[table_view(name, frame) for name, frame in result.tables.items()])


def render_page(template: str, **context) -> str:
    """Render one of the package's templates (other reports extend ``base.html.j2``)."""
    return environment().get_template(template).render(**context)
