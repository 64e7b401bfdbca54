"""``workbench align prepare`` (and, beside it, ``align report``): the staged alignment method."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

PREPARE_EXAMPLES = """examples:
  workbench align prepare --megatron pretrain_llama2_7b_ptd.sh --mindformers pretrain_llama2_7b.yaml --out align/
  workbench align prepare --megatron train.sh --mindformers run.yaml --out align/ --layers 2 --long-steps 500
  workbench align prepare --megatron train.sh --mindformers run.yaml --out align/ --keep-parallel --force
"""
PREPARE_DETAILS = """Writes under DIR, for both sides, the runs the method needs: step 1/2 (constant lr, no warmup,
dropout 0, adam eps 1e-8, parallel features off, deterministic, same seed, local norms, the replay
dataset, the converted checkpoint, gradient capture), the lr = 0 and lr > 0 long runs, a second
reference run with determinism off; env/*.sh snippets the launch scripts source; plan.yaml naming
every artifact. Each written pair passes `workbench checklist` except the plan's differences.
Exit codes: 0 written, 1 written but some CheckList items could not be aligned, 2 bad input."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("align", help="the staged alignment method: prepare the runs, report every stage",
                                   description="The staged alignment method (docs/align.md).",
                                   epilog="examples:\n  workbench align prepare --megatron train.sh "
                                          "--mindformers run.yaml --out align/\n",
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="align_command", metavar="COMMAND", required=True)
    prepare = commands.add_parser("prepare", help="write the step-1/2, long and rerun configs of both sides",
                                  description="Write the alignment runs of both sides.\n\n" + PREPARE_DETAILS,
                                  epilog=PREPARE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    prepare.add_argument("--megatron", type=Path, required=True, help="the Megatron / MindSpeed-LLM launch script")
    prepare.add_argument("--mindformers", type=Path, required=True, help="the MindFormers training yaml")
    prepare.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write (must not exist)")
    prepare.add_argument("--force", action="store_true", help="replace DIR when it exists")
    prepare.add_argument("--layers", type=int, metavar="N", help="num_layers on both sides (a smaller model)")
    prepare.add_argument("--long-steps", type=int, default=1000, metavar="N",
                         help="steps of the long runs (default 1000)")
    prepare.add_argument("--keep-parallel", action="store_true",
                         help="keep TP/PP/CP/SP/EP as in the inputs (the plan lists them as differences)")
    prepare.set_defaults(run=run_prepare)
    from .align_report import register_report

    register_report(commands)


def run_prepare(args: argparse.Namespace) -> int:
    from ..align.prepare import prepare

    result = prepare(args.megatron, args.mindformers, args.out, layers=args.layers, long_steps=args.long_steps,
                     keep_parallel=args.keep_parallel, force=args.force)
    print(f"wrote {len(result.files)} files under {result.out} (plan: {result.out / 'plan.yaml'})")
    for name, count in result.changes.items():
        print(f"  {name}: {count} settings changed")
    for difference in result.differences:
        print(f"  left different on purpose: {difference['item']} ({difference['why']})")
    for item in result.unresolved:
        print(f"workbench: warning: not aligned: {item}", file=sys.stderr)
    return 1 if result.unresolved else 0
