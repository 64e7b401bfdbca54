"""The output arguments every report-writing subcommand takes, and their checks before any work starts."""
from __future__ import annotations

import argparse
from pathlib import Path


def add_output_arguments(parser: argparse.ArgumentParser, plot: str | None = None) -> None:
    """``--format``, ``--out``, ``--force`` (and ``--plot FILE.png`` described by ``plot``)."""
    from ..report.formats import FORMATS

    parser.add_argument("--format", choices=FORMATS, help="output format (default: table, or from --out's suffix)")
    parser.add_argument("--out", type=Path, help="write the report to FILE instead of the terminal")
    if plot:
        parser.add_argument("--plot", type=Path, metavar="FILE.png", help=plot)
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")


def check_outputs(args: argparse.Namespace, *extra: Path | None) -> str:
    """The chosen format; ``--out``, ``--plot`` and ``extra`` outputs checked (writable, not overwritten
    without ``--force``) before any work, so a long run never fails at its last step."""
    from ..output_checks import check_output
    from ..report.emit import choose_format

    chosen = choose_format(args.format, args.out)
    for target in (args.out, getattr(args, "plot", None), *extra):
        if target is not None:
            check_output(target, args.force)
    return chosen
