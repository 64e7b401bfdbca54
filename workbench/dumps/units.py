"""Ranks and steps are independent units of a dump comparison: split, fan out, select a part.

``--workers N`` runs the units in N processes, the parent and N - 1 forked workers (:mod:`workbench.process_pool`;
a unit's work is reading, matching and verdicts, CPU-bound); ``--part i/n`` keeps every n-th unit starting at the i-th (1-based),
so a cluster launcher (Slurm array, torchrun) can fan one comparison out and ``workbench compare merge``
joins the parts' JSON reports.
"""
from __future__ import annotations

from typing import Callable, Iterable

from ..errors import InputError

Unit = tuple[int, int]          # (step, rank)


def units_of(*tables) -> list[Unit]:
    """Every (step, rank) present in any of the tables, in order (step first: the earliest step wins)."""
    found: set[Unit] = set()
    for table in tables:
        if table is not None and len(table):
            found.update(zip(table["step"].astype(int), table["rank"].astype(int), strict=True))
    return sorted(found)


def parse_part(text: str | None) -> tuple[int, int] | None:
    """``"2/8"`` → (2, 8); None stays None; anything else is a one-line error."""
    if text is None:
        return None
    try:
        index, count = (int(piece) for piece in text.split("/"))
    except ValueError:
        index, count = 0, 0
    if not 1 <= index <= count:
        raise InputError("--part", f"expected i/n with 1 <= i <= n, found {text!r}", "e.g. --part 1/4")
    return index, count


def select_part(units: list[Unit], part: tuple[int, int] | None) -> list[Unit]:
    """The units of part i of n (round robin, so every part gets early and late steps)."""
    if part is None:
        return units
    index, count = part
    return units[index - 1::count]


def unit_rows(table, unit: Unit):
    """The rows of one (step, rank) unit (an empty table when the side has none)."""
    if table is None:
        return None
    step, rank = unit
    return table[(table["step"] == step) & (table["rank"] == rank)]


def run_units(function: Callable, jobs: Iterable[tuple], workers: int = 1) -> list:
    """``function(*job)`` for each job, in job order; in ``workers`` processes when more than one."""
    jobs = list(jobs)
    if workers < 1:
        raise InputError("--workers", f"expected a positive number, found {workers}", "e.g. --workers 4")
    if workers == 1 or len(jobs) <= 1:
        return [function(*job) for job in jobs]
    from ..process_pool import map_in_processes      # multiprocessing's modules: ~15 ms a comparison without a pool skips

    return map_in_processes(function, jobs, workers)
