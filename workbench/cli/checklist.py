"""``workbench checklist MEGATRON MINDFORMERS``: audit both configs against the CheckList."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLES = """examples:
  workbench checklist checklists/examples/llama_tiny_megatron.sh checklists/examples/llama_tiny_mindformers.yaml
  workbench checklist pretrain_llama2_7b_ptd.sh pretrain_llama2_7b.yaml --only MISMATCH,RISK
  workbench checklist train_rank0.log run_llama.yaml --format json --out checklist.json
  workbench checklist iter_0001000/ run_llama.yaml --format html --out checklist.html --plot-lr lr.png
  workbench checklist gpt_config.yaml run_qwen3.yaml --hardware cross --strict
"""
DETAILS = """MEGATRON is auto-detected: a launch script (MindSpeed multi-line variables or bash arrays),
a training log with the 'arguments' block, a --yaml-cfg YAML, a flat YAML/JSON of arguments,
or a checkpoint (model_optim_rng.pt, an iter_* folder, or a checkpoint root).
Exit codes: 0 no mismatch, 1 mismatches (or risks with --strict; INFO never fails), 2 bad input."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "checklist", help="audit a Megatron config and a MindFormers config against the accuracy CheckList",
        description="Audit a Megatron-LM / MindSpeed-LLM config and a MindFormers yaml against the accuracy "
                    "CheckList: every value with where it came from, and a verdict per item.\n\n" + DETAILS,
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("megatron", type=Path, help="Megatron config: launch script, log, yaml, json or checkpoint")
    parser.add_argument("mindformers", type=Path, help="MindFormers training yaml")
    from .outputs import add_output_arguments

    add_output_arguments(parser)
    parser.add_argument("--only", help="comma-separated verdicts to show (e.g. MISMATCH,RISK); JSON is always complete")
    parser.add_argument("--all", action="store_true", dest="show_all",
                        help="on the terminal, list the PASS items too (folded into a count line by default)")
    parser.add_argument("--strict", action="store_true", help="count RISK as failure (exit 1); INFO never fails")
    parser.add_argument("--hardware", choices=("auto", "same", "cross"), default="auto",
                        help="same or different hardware on the two sides (default: detected)")
    parser.add_argument("--plot-lr", type=Path, metavar="FILE.png", help="draw both LR schedules and their difference")
    parser.set_defaults(run=run)


def _only(text: str | None) -> set[str] | None:
    from ..audit.rules import VERDICTS
    from ..errors import InputError

    if not text:
        return None
    chosen = {part.strip().upper() for part in text.split(",") if part.strip()}
    if chosen - set(VERDICTS):
        raise InputError("--only", f"unknown verdict(s) {sorted(chosen - set(VERDICTS))}", f"use {', '.join(VERDICTS)}")
    return chosen


def run(args: argparse.Namespace) -> int:
    from ..audit.engine import run_checklist
    from ..report.checklist_result import checklist_result
    from ..report.emit import emit, write_figure
    from .outputs import check_outputs

    output_format = check_outputs(args, args.plot_lr)
    only = _only(args.only)
    report = run_checklist(args.megatron, args.mindformers, hardware=args.hardware)
    result = checklist_result(report, only, args.strict, with_table=output_format in ("csv", "xlsx"),
                              show_all=args.show_all)
    if args.plot_lr is not None:
        if not any(figure.name == "lr_schedule" for figure in result.figures):
            raise_unplotted(report)
        write_figure(result, "lr_schedule", args.plot_lr, force=True)
        print(f"wrote {args.plot_lr}", file=sys.stderr)
    emit(result, output_format, args.out, force=True)
    return result.exit_code


def raise_unplotted(report) -> None:
    from ..errors import InputError

    raise InputError("--plot-lr", "the LR schedules could not be simulated: " + report.item("lr_schedule").message,
                     "settle the UNKNOWN values first")
