"""``workbench align report DIR``: the parser and runner of the align group's ``report`` command
(registered by ``workbench/cli/align.py``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLES = """examples:
  workbench align report align/                       # the folder `align prepare` wrote
  workbench align report align/plan.yaml --out report.html
  workbench align report align/ --format json --out report.json
"""
DETAILS = """Runs every stage of the method whose artifacts (named in plan.yaml) exist, in order: checklist;
weights; data; step-1 loss; step-1 local norms; step-2 loss and the optimizer; lr = 0 long run; the
reference's noise; long run; first diverging operator. Each stage is PASS, FAIL, ERROR (an artifact it
cannot read) or NOT RUN (artifacts missing, or the chain stopped before it). The chain stops at the first
failure, as the method does; the stages that localize that failure still run as evidence when their
artifacts exist, and the report names the component. Exit codes: 0 every stage passed, 1 a stage failed or
did not run, 2 bad input."""


def register_report(commands: argparse._SubParsersAction) -> None:
    from .outputs import add_output_arguments

    parser = commands.add_parser("report", help="run every stage whose artifacts exist; one report names the culprit",
                                 description=DETAILS, epilog=EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plan", type=Path, metavar="DIR|PLAN.yaml", help="the folder align prepare wrote, or its plan.yaml")
    add_output_arguments(parser)
    parser.set_defaults(run=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..align.plan import read_plan
    from ..align.report import run_stages
    from ..align.result import align_result
    from ..report.emit import emit
    from .outputs import check_outputs

    check_outputs(args)
    plan = read_plan(args.plan)
    quiet = not sys.stderr.isatty()
    outcomes = run_stages(plan, progress=None if quiet else lambda stage: print(f"stage {stage} ...", file=sys.stderr))
    return emit(align_result(plan, outcomes), args.format, args.out, args.force)
