"""``workbench weights diff A B``: compare two checkpoints tensor by tensor through the spec."""
from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = """examples:
  workbench weights diff megatron_ckpt/ converted.ckpt
  workbench weights diff step0.ckpt step100.ckpt --format csv --out weights.csv
  workbench weights diff hf_llama/ mf.ckpt --atol 1e-3 --format md
"""
DETAILS = """Columns: name, status (match / mismatch / shape mismatch / only in A / only in B), shapes,
dtypes, numel, cosine, l2_diff, max_abs_diff, rel_diff (= l2_diff / l2(A)).
Exit 0 when every tensor matches (exactly, or within --atol/--rtol), 1 otherwise, 2 bad input."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from .outputs import add_output_arguments

    parser = subparsers.add_parser("weights", help="checkpoint tools: diff", epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="weights_command", metavar="COMMAND", required=True)
    diff = commands.add_parser("diff", help="compare two checkpoints of any supported formats",
                               description=__doc__.replace("``", "") + "\n\n" + DETAILS, epilog=EXAMPLES,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    diff.add_argument("a", type=Path)
    diff.add_argument("b", type=Path)
    diff.add_argument("--arch")
    diff.add_argument("--config", type=Path, help="model config for shape parameters")
    diff.add_argument("--atol", type=float, default=0.0)
    diff.add_argument("--rtol", type=float, default=0.0)
    add_output_arguments(diff)
    diff.set_defaults(run=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    from ..convert.diff import Tolerance, diff_checkpoints
    from ..convert.diff_result import weights_diff_result
    from ..report.emit import emit
    from .outputs import check_outputs

    check_outputs(args)
    tolerance = Tolerance(args.atol, args.rtol)
    frame = diff_checkpoints(args.a, args.b, args.arch, args.config, tolerance)
    return emit(weights_diff_result(frame, args.a, args.b, tolerance), args.format, args.out, args.force)
