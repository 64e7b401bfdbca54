"""The output formats every report-writing command offers, and the suffixes that choose them (a light module:
the CLI's parser is built from it at every start-up, before anything is rendered)."""
from __future__ import annotations

FORMATS = ("table", "md", "csv", "json", "html", "xlsx")
SUFFIX_FORMATS = {".md": "md", ".markdown": "md", ".csv": "csv", ".json": "json", ".html": "html",
                  ".htm": "html", ".xlsx": "xlsx", ".txt": "table"}
FIGURE_SUFFIXES = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
