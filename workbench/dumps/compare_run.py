"""``workbench compare A B``: two dumps read into the one table, matched per (step, rank) unit, judged, reported.

Units are independent: ``workers`` fans them out over processes, ``part`` keeps one share of them for a
cluster launcher, and :func:`merge_reports` joins the parts' JSON reports into the whole comparison.
Module paths resolve through the spec (each side's format detected from its paths, or ``--arch``);
without a spec that fits, only identical module paths pair, and the report says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .units import parse_part, run_units, select_part, unit_rows, units_of


@dataclass(frozen=True)
class CompareOptions:
    arch: str | None = None
    mapping: Path | None = None
    noise: Path | None = None
    rank: int | None = None
    step: int | None = None
    workers: int = 1
    part: str | None = None
    notes: list = field(default_factory=list, compare=False)


def compare_dumps(path_a: Path | str, path_b: Path | str, options: CompareOptions | None = None):
    """The comparison of dump A (the reference) with dump B as a Result (kind ``compare``)."""
    import pandas as pd

    from .compare_result import compare_result
    from .match import Matching
    from .open_dump import open_dump

    options = options or CompareOptions()
    part = parse_part(options.part)
    a, b = _only(open_dump(path_a, "A"), options), _only(open_dump(path_b, "B"), options)
    noise = _only(open_dump(options.noise, "A"), options) if options.noise else None
    formats, notes = module_formats(a, b, options.arch)
    units = select_part(units_of(a, b), part)
    jobs = [(unit_rows(a, unit), unit_rows(b, unit), unit_rows(noise, unit), formats, options.mapping)
            for unit in units]
    results = run_units(compare_unit, jobs, options.workers)
    pairs = pd.concat([r[0] for r in results], ignore_index=True) if results else None
    unmatched = pd.concat([r[1] for r in results], ignore_index=True) if results else None
    evaluated = pd.concat([r[2] for r in results], ignore_index=True) if results else None
    if pairs is None:
        raise InputError(f"{path_a}, {path_b}", "no (step, rank) to compare" + (f" in part {options.part}" if part else ""),
                         "check --rank/--step, or give fewer parts than units")
    totals = [sum(len(job[side]) for job in jobs) for side in (0, 1)]          # rows of the units compared
    result = compare_result(Matching(pairs, unmatched), evaluated, {"A": str(path_a), "B": str(path_b)}, *totals)
    result.notes += notes + ([f"part {part[0]} of {part[1]}: units {units}; join the parts with "
                               "`workbench compare merge`"] if part else [])
    result.facts.update({"units": [list(u) for u in units], "part": options.part, "module_formats": formats})
    return result


def _only(table, options: CompareOptions):
    if options.rank is not None:
        table = table[table["rank"] == options.rank]
    if options.step is not None:
        table = table[table["step"] == options.step]
    return table


def module_formats(a, b, arch: str | None) -> tuple[dict, list[str]]:
    """(side -> (arch, format) or None, notes): each side's module paths against the spec's module views."""
    from ..spec.modules import detect_module_format

    formats, notes = {}, []
    for side, table in (("A", a), ("B", b)):
        paths = sorted({p for p in table["module_path"].dropna().unique() if p})
        try:
            formats[side] = tuple(detect_module_format(paths, [arch] if arch else None)) if paths else None
        except InputError as error:
            formats[side] = None
            notes.append(f"side {side}: module paths fit no converters/ spec ({error.problem}); only identical "
                         "module paths pair")
    return formats, notes


def compare_unit(a, b, noise, formats: dict, mapping_path: Path | None):
    """One (step, rank) unit: (pairs, unmatched, evaluated). Top-level so a process pool can run it."""
    from .match import match_dumps, spec_resolver
    from .match_mapping import Mapping, load_mapping
    from .verdict import evaluate, noise_spread

    resolvers = {side: spec_resolver(*formats[side]) if formats.get(side) else None for side in ("A", "B")}
    mapping = load_mapping(mapping_path) if mapping_path else Mapping()
    matching = match_dumps(a, b, resolve_a=resolvers["A"], resolve_b=resolvers["B"], mapping=mapping)
    spread = noise_spread(a, noise) if noise is not None and len(noise) else None
    return matching.pairs, matching.unmatched, evaluate(matching.pairs, spread)
