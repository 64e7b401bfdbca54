"""``workbench compare merge PART.json ...``: the parts of a split comparison (``--part i/n``) joined.

Each part is a ``workbench.compare/1`` JSON report over its share of the (step, rank) units; the merged
report is the comparison over all of them: pairs and unmatched rows concatenated (a unit in two parts is
refused), rows per side summed, the first divergence and the suspects recomputed over everything.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..input_files import expect, read_json

SCHEMA = "workbench.compare/1"


def _part(path: Path) -> dict:
    document = read_json(path)
    expect(document, dict, str(path), "report", "pass the JSON reports of `workbench compare --part i/n --format json`")
    if document.get("schema") != SCHEMA:
        raise InputError(f"{path}: schema", f"expected {SCHEMA!r}, found {str(document.get('schema'))[:60]!r}",
                         "pass the JSON reports of `workbench compare --part i/n --format json`")
    for key in ("tables", "facts", "sources"):
        expect(document.get(key), dict, str(path), key, "write the part again")
    for table in ("pairs", "unmatched"):
        expect(document["tables"].get(table), list, str(path), f"tables.{table}", "write the part again")
    return document


def _frame(records: list, path: Path, table: str):
    import pandas as pd

    if not all(isinstance(row, dict) for row in records):
        raise InputError(f"{path}: tables.{table}", "rows that are not objects", "write the part again")
    frame = pd.DataFrame(records)
    for column in frame.columns:                       # JSON null -> NaN where the column is numeric
        converted = pd.to_numeric(frame[column], errors="coerce")
        if converted.notna().sum() == frame[column].notna().sum():
            frame[column] = converted
    return frame


def merge_reports(paths: list[Path]):
    """The merged comparison (a Result, kind ``compare``)."""
    import pandas as pd

    from .compare_result import compare_result
    from .match import Matching

    documents = [(Path(path), _part(Path(path))) for path in paths]      # a list: the same file twice is refused
    seen: dict[tuple, Path] = {}
    for path, document in documents:
        for unit in document["facts"].get("units") or []:
            if tuple(unit) in seen:
                raise InputError(str(path), f"unit (step, rank) {tuple(unit)} is also in {seen[tuple(unit)]}",
                                 "merge each part once, all from one split")
            seen[tuple(unit)] = path
    pairs = pd.concat([_frame(d["tables"]["pairs"], p, "pairs") for p, d in documents], ignore_index=True)
    unmatched = pd.concat([_frame(d["tables"]["unmatched"], p, "unmatched") for p, d in documents], ignore_index=True)
    if "status" in unmatched.columns:
        unmatched = unmatched.drop(columns="status")
    first = documents[0][1]
    rows = {side: sum(int(d["facts"].get("rows", {}).get(side, 0)) for _, d in documents) for side in ("A", "B")}
    result = compare_result(Matching(pairs, unmatched), pairs, dict(first["sources"]), rows["A"], rows["B"])
    result.notes.append(f"merged from {len(documents)} part(s): {', '.join(str(p) for p, _ in documents)}")
    result.facts.update({"units": sorted(list(u) for u in seen), "parts": [str(p) for p, _ in documents]})
    return result
