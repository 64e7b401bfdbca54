"""``workbench data verify|show|diff``: check, look at and compare per-step batch captures."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .outputs import add_output_arguments, check_outputs

COMMON = """
A capture folder holds step_{N}/rank_{R}/{tokens,labels,loss_mask,attention_mask}.npy (the field's
layout) or what workbench.replay.capture writes (the same, plus mb_{M}/ folders for micro-batches
1.., manifest.json per step and rank); layouts are declared in datasets/megatron_capture.yaml.
Exit codes: 0 ok, 1 problems or differences, 2 bad input.
"""
VERIFY_EXAMPLES = """examples:
  workbench data verify capture/
  workbench data verify capture/ --vocab-size 32000
  workbench data verify capture/ --vocab-size 151936 --loss-mask --format md
"""
SHOW_EXAMPLES = """examples:
  workbench data show capture/ --step 0 --rank 0
  workbench data show capture/ --step 3 --rank 1 --micro-batch 2 --tokenizer llama_tokenizer/
  workbench data show capture/ --step 0 --rank 0 --format csv > step0_rank0.csv
"""
DIFF_EXAMPLES = """examples:
  workbench data diff megatron_capture/ mindspore_capture/
  workbench data diff dp2_capture/ single_card_capture/ --by global
  workbench data diff a/ b/ --fields tokens,labels,loss_mask --format md
"""


def _parser(commands, name: str, help_text: str, examples: str) -> argparse.ArgumentParser:
    return commands.add_parser(name, help=help_text, description=help_text + "\n" + COMMON, epilog=examples,
                               formatter_class=argparse.RawDescriptionHelpFormatter)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("data", help="per-step batch captures: verify, show, diff",
                                   description="Per-step batch captures (Megatron's exact data): verify, show, diff.",
                                   epilog="examples:\n  workbench data verify capture/ --vocab-size 32000\n"
                                          "  workbench data show capture/ --step 0 --rank 0 --tokenizer tok/\n"
                                          "  workbench data diff megatron_capture/ mindspore_capture/\n",
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="data_command", metavar="COMMAND", required=True)

    verify = _parser(commands, "verify", "check that a capture is complete, intact and sane", VERIFY_EXAMPLES)
    verify.add_argument("dir", type=Path, help="capture folder")
    verify.add_argument("--vocab-size", type=int, metavar="V", help="token and label ids must lie in [0, V)")
    verify.add_argument("--no-sha256", action="store_true", help="skip the sha256 check of every file")
    verify.add_argument("--loss-mask", action="store_true", help="also print the fraction masked per step and rank")
    add_output_arguments(verify)
    verify.set_defaults(run=run_verify)

    show = _parser(commands, "show", "one captured micro-batch as a table", SHOW_EXAMPLES)
    show.add_argument("dir", type=Path, help="capture folder")
    show.add_argument("--step", type=int, required=True)
    show.add_argument("--rank", type=int, required=True)
    show.add_argument("--micro-batch", type=int, default=0)
    show.add_argument("--tokenizer", type=Path, metavar="DIR", help="Hugging Face tokenizer folder: decode ids to text")
    add_output_arguments(show)
    show.set_defaults(run=run_show)

    diff = _parser(commands, "diff", "first differing step / rank / micro-batch / field / position", DIFF_EXAMPLES)
    diff.add_argument("a", type=Path)
    diff.add_argument("b", type=Path)
    diff.add_argument("--by", choices=("auto", "rank", "global"), default="auto",
                      help="line up by rank and micro-batch, or by each step's global batch (default: auto)")
    diff.add_argument("--fields", help="comma-separated fields to compare (default: all)")
    diff.add_argument("--limit", type=int, default=50, help="rows shown on the terminal or in md (default 50; 0 = all)")
    add_output_arguments(diff)
    diff.set_defaults(run=run_diff)


def run_verify(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..replay.data_results import verify_result
    from ..replay.verify import verify_store
    from ..report.emit import emit

    if args.vocab_size is not None and args.vocab_size <= 0:
        raise InputError("--vocab-size", f"expected a positive integer, found {args.vocab_size}", "pass the vocab size")
    check_outputs(args)
    if sys.stderr.isatty():  # a progress bar on a terminal, quiet when piped
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("verifying steps", total=None)
            report = verify_store(args.dir, args.vocab_size, sha256=not args.no_sha256,
                                  progress=lambda done, total: bar.update(task, completed=done, total=total))
    else:
        report = verify_store(args.dir, args.vocab_size, sha256=not args.no_sha256)
    return emit(verify_result(report, args.loss_mask), args.format, args.out, args.force)


def run_show(args: argparse.Namespace) -> int:
    from ..replay.data_results import show_result
    from ..replay.show import show_batch
    from ..report.emit import emit

    check_outputs(args)
    frame = show_batch(args.dir, args.step, args.rank, args.micro_batch, tokenizer=args.tokenizer)
    return emit(show_result(frame, args.dir, args.step, args.rank, args.micro_batch), args.format, args.out, args.force)


def run_diff(args: argparse.Namespace) -> int:
    from ..replay.data_results import diff_result
    from ..replay.diff_data import diff_stores
    from ..report.emit import emit

    chosen = check_outputs(args)
    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields is not None else None
    diff = diff_stores(args.a, args.b, fields=fields, by=args.by)
    limit = args.limit if chosen in ("table", "md") else 0       # csv, json, html, xlsx hold every row
    return emit(diff_result(diff, args.a, args.b, limit), args.format, args.out, args.force)
