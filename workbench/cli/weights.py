"""``workbench weights diff A B``: compare two checkpoints tensor by tensor through the spec."""
from __future__ import annotations

import argparse
import sys
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
    diff.add_argument("--format", choices=("table", "csv", "json", "md"), default=None)
    diff.add_argument("--out", type=Path)
    diff.add_argument("--force", action="store_true")
    diff.set_defaults(run=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    from ..convert.diff import Tolerance, diff_checkpoints, summary
    from ..fileio import check_output, write_text
    from ..report.tables import frame_to_text, print_frame

    if args.out is not None:
        check_output(args.out, args.force)
    frame = diff_checkpoints(args.a, args.b, args.arch, args.config, Tolerance(args.atol, args.rtol))
    result = summary(frame)
    output_format = args.format or ({".csv": "csv", ".json": "json", ".md": "md"}.get(args.out.suffix, "md")
                                    if args.out else "table")
    if output_format == "table" and args.out is None:
        print_frame(frame, title=f"{args.a} vs {args.b}")
    else:
        text = frame_to_text(frame, output_format, result)
        if args.out is None:
            sys.stdout.write(text)
        else:
            write_text(args.out, text)
    print(", ".join(f"{count} {status}" for status, count in result.items() if status not in ("tensors", "all_match")),
          file=sys.stderr)
    return 0 if result["all_match"] else 1
