"""Whether an optional framework is installed here (without importing it)."""
from __future__ import annotations

import importlib.util


def mindformers_installed() -> bool:
    """MindFormers is importable as a package: its spec has an origin (its ``__init__.py``). A folder named
    ``mindformers`` in the working directory (``align prepare`` writes one) is only a namespace package to
    Python's import system, and is not MindFormers."""
    spec = importlib.util.find_spec("mindformers")
    return spec is not None and spec.origin is not None
