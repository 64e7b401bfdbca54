"""``workbench compare A B``: two dumps read into the one table, matched per (step, rank) unit, judged, reported.

Units are independent: ``workers`` fans them out over processes, ``part`` keeps one share of them for a
cluster launcher, and :func:`merge_reports` joins the parts' JSON reports into the whole comparison.
Module paths resolve through the spec (each side's format detected from its paths, or ``--arch``);
without a spec that fits, only identical module paths pair, and the report says so.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

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
    output_format: str | None = None      # "csv": each unit writes its CSV rows where it is compared


class UnitOutcome(NamedTuple):
    """One unit compared: what a pool's worker hands back (pickled), in the form the parent joins as it is."""

    evaluated: object                     # the pairs with their verdicts; with ``csv``, their columns only
    unmatched: object                     # with ``csv``, only its ``side`` column (see compare_unit)
    sizes: tuple[int, int]                # rows per side
    formats: dict
    notes: list[str]
    digest: object                        # compare_result.Digest of the pairs
    csv: tuple | None                     # unit_join.unit_csv of the pairs' report view, when asked


def compare_dumps(path_a: Path | str, path_b: Path | str, options: CompareOptions | None = None):
    """The comparison of dump A (the reference) with dump B as a Result (kind ``compare``).

    msprobe dumps are read per (step, rank) folder inside each unit's job, so ``--workers`` parallelises the
    reading too; other layouts are read whole first and split by unit.

    The cyclic collector is paused throughout (:func:`workbench.gc_pause.gc_paused`): the parent imports what
    the units need, unpickles their results while the workers run and joins them, each step allocating
    containers that live on, and every collection walks all of them again (a fifth of the parent's CPU time on
    the benchmark's 8 ranks, taken from the two workers on two cores). A pool forked meanwhile inherits the
    pause, which costs nothing there: a unit runs paused anyway and leaves a few dozen objects in cycles.
    """
    from ..gc_pause import gc_paused

    with gc_paused():
        return _compare_dumps(path_a, path_b, options or CompareOptions())


def _compare_dumps(path_a: Path | str, path_b: Path | str, options: CompareOptions):
    from .formats import load_dump_formats
    from .msprobe_ahead import scans_ahead, settle

    part = parse_part(options.part)
    sources = [_unit_sources(path, side, options) for path, side in ((path_a, "A"), (path_b, "B"))]
    noise = _unit_sources(options.noise, "A", options) if options.noise else {}
    units = select_part(sorted(set(sources[0]) | set(sources[1])), part)
    csv = options.output_format == "csv"
    jobs = [(sources[0].get(unit), sources[1].get(unit), noise.get(unit), options.arch, options.mapping, csv)
            for unit in units]
    pool, fmt = options.workers > 1 and len(jobs) > 1, load_dump_formats()
    with scans_ahead(_dump_files(jobs[:1], fmt), fmt):                # they run while the unit's modules import
        _import_unit_modules()
        if pool:
            _load_unit_knowledge(options.arch)
            settle()                                                  # no thread across the fork
        results = run_units(compare_unit, jobs, options.workers)
    from .compare_result import compare_result, joined_digests
    from .match import Matching
    from .unit_join import joined, joined_csv

    if not results:
        raise InputError(f"{path_a}, {path_b}", "no (step, rank) to compare" + (f" in part {options.part}" if part else ""),
                         "check --rank/--step, or give fewer parts than units")
    unmatched, evaluated = joined([r.unmatched for r in results]), joined([r.evaluated for r in results])
    totals = [sum(r.sizes[side] for r in results) for side in (0, 1)]          # rows of the units compared
    result = compare_result(Matching(evaluated, unmatched), evaluated, {"A": str(path_a), "B": str(path_b)}, *totals,
                            found=joined_digests([r.digest for r in results]), hierarchy=not csv)
    pieces = joined_csv(result.main_table, [r.csv for r in results]) if csv else None
    if csv and pieces is None:            # units wrote their rows with different columns or types, and sent none
        return _compare_dumps(path_a, path_b, replace(options, output_format=None))        # rare: all again
    if pieces is not None:
        result.renderers["csv"] = lambda _result: pieces
    formats = {side: next((r.formats[side] for r in results if r.formats[side]), None) for side in ("A", "B")}
    notes = list(dict.fromkeys(note for r in results for note in r.notes))
    result.notes += notes + ([f"part {part[0]} of {part[1]}: units {units}; join the parts with "
                               "`workbench compare merge`"] if part else [])
    result.facts.update({"units": [list(u) for u in units], "part": options.part, "module_formats": formats})
    return result


def _dump_files(jobs: list[tuple], fmt) -> list[Path]:
    """The dump.json files that these jobs read: each source given as a folder is one that holds it
    (:func:`_unit_sources`)."""
    return [source / fmt.msprobe["dump_file"] for job in jobs for source in job[:3] if isinstance(source, Path)]


def _import_unit_modules() -> None:
    """What every unit imports, imported first: in the parent before a pool forks its workers, which inherit it
    (otherwise each worker imports pandas, the spec's module views, the verdicts and the knowledge registry again
    before its first unit, ~0.5 s each, on the critical path of ``--workers``), and while the first unit's files
    are scanned (:mod:`.msprobe_ahead`)."""
    import pandas  # noqa: F401

    from ..config import registry  # noqa: F401
    from ..report import csv_text  # noqa: F401
    from ..spec import module_keys, modules  # noqa: F401
    from . import readers_msprobe, verdict  # noqa: F401


def _load_unit_knowledge(arch: str | None) -> None:
    """What every unit loads and keeps (the specs' module templates that format detection tries, the operator
    table, the compiled dump scanner and float formatter), loaded once in the parent before the pool forks:
    otherwise each worker loads it again before its first unit, CPU that only ``--workers`` pays, while the other
    workers need the cores. A bad ``--arch`` or knowledge file is left to the units, which report it as without the pool."""
    from ..native import library
    from ..report import float_repr
    from ..spec.modules import module_fits
    from .match_ops import load_operators

    library("dumpscan")
    float_repr.preload()
    for load in (lambda: module_fits([], [arch] if arch else None), load_operators):
        try:
            load()
        except InputError:
            pass


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
        paths = _module_paths(table)
        try:
            formats[side] = tuple(detect_module_format(paths, [arch] if arch else None)) if paths else None
        except InputError as error:
            formats[side] = None
            notes.append(f"side {side}: module paths fit no converters/ spec ({error.problem}); only identical "
                         "module paths pair")
    return formats, notes


def _module_paths(table) -> list[str]:
    """The distinct non-empty module paths of a table, sorted: one set of the column's values (iterating the
    string column's ``unique()`` made a pandas scalar per path: 25 → 8 ms for 19k paths of 200k rows)."""
    return sorted(p for p in set(table["module_path"].to_numpy(dtype=object).tolist()) if type(p) is str and p)


def _table(source, side: str):
    """A unit's rows: read from its msprobe folder, as given, or none."""
    from .schema import empty_table

    if source is None:
        return empty_table()
    if isinstance(source, Path):
        from .readers_msprobe import read_msprobe

        return read_msprobe(source, side)
    return source.assign(side=side)


def compare_unit(a_source, b_source, noise_source, arch: str | None, mapping_path: Path | None,
                 csv: bool = False) -> UnitOutcome:
    """One (step, rank) unit compared, with its digest and (``csv``) its report rows' CSV text, so the parent
    only joins (:mod:`.unit_join`). Top-level so a process pool can run it; it reads its own folders when given
    paths. The cyclic collector is paused throughout (:func:`workbench.gc_pause.gc_paused`): matching makes a Python object per
    call and per row position that lives to the end, which it would walk again and again (a third of the
    matching time on 200k rows).

    The pairs come back in the report's column order (:func:`.compare_result.in_report_order`, a table sharing
    the columns, not a copy), and the parent's report uses them as they are.

    With ``csv`` the report is the pairs' CSV, written here, and the parent needs no row: of the pairs only their
    columns travel back (the digest holds their count and what the summary reads), and of the unmatched rows only
    their ``side`` column, which the parent counts. A pool's worker then pickles a few kB besides the CSV, not
    its unit's tables (which the parent used to unpickle while the other workers ran), and the parent does not
    hold every unit's pairs joined (8 ranks of 200k rows, ``--workers 1``: peak 1.42 → 0.83 GB, most of what is
    left the units' CSV text, held until the report is written)."""
    from .compare_result import digest, in_report_order
    from ..gc_pause import gc_paused
    from .unit_join import unit_csv

    with gc_paused():
        evaluated, unmatched, sizes, formats, notes = _compare_unit(a_source, b_source, noise_source, arch,
                                                                    mapping_path, csv)
        evaluated = in_report_order(evaluated)                         # the report's order: none in the parent
        text = unit_csv(evaluated) if csv else None
        found = digest(evaluated, totals=not csv)
        sent = evaluated.iloc[:0].copy() if csv else evaluated          # a zero-row copy: a view keeps the rows
        return UnitOutcome(sent, unmatched, sizes, formats, notes, found, text)


def _compare_unit(a_source, b_source, noise_source, arch: str | None, mapping_path: Path | None,
                  sides_only: bool = False):
    """The unit's evaluated pairs, unmatched rows (``sides_only``: their ``side`` column only), dump sizes, module
    formats and notes."""
    from .match import match_dumps, spec_resolver
    from .match_mapping import Mapping, load_mapping
    from .verdict import evaluate, noise_spread

    a, b = _table(a_source, "A"), _table(b_source, "B")
    noise = _table(noise_source, "A") if noise_source is not None else None
    formats, notes = module_formats(a, b, arch)
    resolvers = {side: spec_resolver(*formats[side]) if formats.get(side) else None for side in ("A", "B")}
    mapping = load_mapping(mapping_path) if mapping_path else Mapping()
    matching = match_dumps(a, b, resolve_a=resolvers["A"], resolve_b=resolvers["B"], mapping=mapping,
                           unmatched_sides=sides_only)
    spread = noise_spread(a, noise) if noise is not None and len(noise) else None
    sizes = (len(a), len(b))
    del a, b, noise                           # the dump tables: memory for the verdicts and the report (freed memory
    # stays in the C heap, where they reuse it: handing it back first made it fault in again, no lower peak)
    evaluated = evaluate(matching.pairs, spread, in_place=True)
    return evaluated, matching.unmatched, sizes, formats, notes
