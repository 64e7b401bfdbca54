"""``workbench compare A B``: two dumps read into the one table, matched per (step, rank) unit, judged, reported.

Units are independent: ``workers`` fans them out over processes, ``part`` keeps one share of them for a
cluster launcher, and :func:`merge_reports` joins the parts' JSON reports into the whole comparison.
Module paths resolve through the spec (each side's format detected from its paths, or ``--arch``);
without a spec that fits, only identical module paths pair, and the report says so.
"""
from __future__ import annotations

from dataclasses import dataclass
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


def compare_dumps(path_a: Path | str, path_b: Path | str, options: CompareOptions | None = None):
    """The comparison of dump A (the reference) with dump B as a Result (kind ``compare``).

    msprobe dumps are read per (step, rank) folder inside each unit's job, so ``--workers`` parallelises the
    reading too; other layouts are read whole first and split by unit.
    """

    from .compare_result import compare_result
    from .match import Matching

    options = options or CompareOptions()
    part = parse_part(options.part)
    sources = [_unit_sources(path, side, options) for path, side in ((path_a, "A"), (path_b, "B"))]
    noise = _unit_sources(options.noise, "A", options) if options.noise else {}
    units = select_part(sorted(set(sources[0]) | set(sources[1])), part)
    jobs = [(sources[0].get(unit), sources[1].get(unit), noise.get(unit), options.arch, options.mapping)
            for unit in units]
    results = run_units(compare_unit, jobs, options.workers)
    if not results:
        raise InputError(f"{path_a}, {path_b}", "no (step, rank) to compare" + (f" in part {options.part}" if part else ""),
                         "check --rank/--step, or give fewer parts than units")
    unmatched, evaluated = (_joined([r[k] for r in results]) for k in (1, 2))
    pairs = evaluated                         # the pairs with their verdicts (compare_result reads those)
    totals = [sum(r[3][side] for r in results) for side in (0, 1)]          # rows of the units compared
    result = compare_result(Matching(pairs, unmatched), evaluated, {"A": str(path_a), "B": str(path_b)}, *totals)
    formats = {side: next((r[4][side] for r in results if r[4][side]), None) for side in ("A", "B")}
    notes = list(dict.fromkeys(note for r in results for note in r[5]))
    result.notes += notes + ([f"part {part[0]} of {part[1]}: units {units}; join the parts with "
                               "`workbench compare merge`"] if part else [])
    result.facts.update({"units": [list(u) for u in units], "part": options.part, "module_formats": formats})
    return result


def _joined(frames: list):
    """The units' tables as one (a single unit's table as it is: no copy of hundreds of MB)."""
    import pandas as pd

    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _unit_sources(path: Path | str, side: str, options: CompareOptions) -> dict:
    """(step, rank) -> what a job reads: the rank folder of an msprobe dump, else that unit's rows."""
    from .formats import load_dump_formats
    from .open_dump import is_msprobe_folder, open_dump
    from .readers_msprobe import msprobe_units

    path, fmt = Path(path), load_dump_formats()
    if is_msprobe_folder(path, fmt):
        found = {(step, rank): folder for step, rank, folder in msprobe_units(path, fmt)}
    else:
        table = open_dump(path, side)
        found = {unit: unit_rows(table, unit) for unit in units_of(table)}
    return {unit: value for unit, value in found.items()
            if (options.step is None or unit[0] == options.step) and (options.rank is None or unit[1] == options.rank)}


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


def _table(source, side: str):
    """A unit's rows: read from its msprobe folder, as given, or none."""
    from .schema import empty_table

    if source is None:
        return empty_table()
    if isinstance(source, Path):
        from .readers_msprobe import read_msprobe

        return read_msprobe(source, side)
    return source.assign(side=side)


def compare_unit(a_source, b_source, noise_source, arch: str | None, mapping_path: Path | None):
    """One (step, rank) unit: (pairs, unmatched, evaluated, rows per side, module formats, notes); the pairs are
    evaluated in place, so the first and third are one table. Top-level so a process pool can run it; it reads
    its own folders when given paths. The cyclic collector is paused throughout (:func:`.rows.gc_paused`): matching
    makes a Python object per call and per row position that lives to the end, which it would walk again and
    again (a third of the matching time on 200k rows)."""
    from .rows import gc_paused

    with gc_paused():
        return _compare_unit(a_source, b_source, noise_source, arch, mapping_path)


def _compare_unit(a_source, b_source, noise_source, arch: str | None, mapping_path: Path | None):
    from .match import match_dumps, spec_resolver
    from .match_mapping import Mapping, load_mapping
    from .rows import release_free_memory
    from .verdict import evaluate, noise_spread

    a, b = _table(a_source, "A"), _table(b_source, "B")
    noise = _table(noise_source, "A") if noise_source is not None else None
    formats, notes = module_formats(a, b, arch)
    resolvers = {side: spec_resolver(*formats[side]) if formats.get(side) else None for side in ("A", "B")}
    mapping = load_mapping(mapping_path) if mapping_path else Mapping()
    matching = match_dumps(a, b, resolve_a=resolvers["A"], resolve_b=resolvers["B"], mapping=mapping)
    spread = noise_spread(a, noise) if noise is not None and len(noise) else None
    sizes = (len(a), len(b))
    del a, b, noise                           # the dump tables: memory for the verdicts and the report
    release_free_memory()
    evaluated = evaluate(matching.pairs, spread, in_place=True)
    return (evaluated, matching.unmatched, evaluated, sizes, formats, notes)
