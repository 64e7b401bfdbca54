"""How one table cell reads in every text rendering (terminal, markdown, HTML)."""
from __future__ import annotations

import math


def cell_text(value) -> str:
    """One table cell as text: empty for None/nan, 6 significant digits for floats."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
