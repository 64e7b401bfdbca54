"""Build the tidy tables from rows collected in lists (one DataFrame per file, never per row)."""
from __future__ import annotations

import pandas as pd

COLUMN_TYPES = {"run": "object", "rank": "int64", "step": "int64", "metric": "object", "value": "float64",
                "line": "int64", "micro_step": "int64", "position": "int64", "param": "object", "numel": "int64",
                "definition": "object"}


def frame(rows: list[tuple], columns: tuple[str, ...]) -> pd.DataFrame:
    """``rows`` as a DataFrame with the schema's columns and dtypes (empty frames keep them too)."""
    table = pd.DataFrame(rows, columns=list(columns))
    return table.astype({column: COLUMN_TYPES[column] for column in columns})
