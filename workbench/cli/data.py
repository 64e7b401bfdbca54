"""``workbench data verify|show|diff``: check, look at and compare per-step batch captures."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
    verify.add_argument("--format", choices=("table", "md", "json"), default="table")
    verify.set_defaults(run=run_verify)

    show = _parser(commands, "show", "one captured micro-batch as a table", SHOW_EXAMPLES)
    show.add_argument("dir", type=Path, help="capture folder")
    show.add_argument("--step", type=int, required=True)
    show.add_argument("--rank", type=int, required=True)
    show.add_argument("--micro-batch", type=int, default=0)
    show.add_argument("--tokenizer", type=Path, metavar="DIR", help="Hugging Face tokenizer folder: decode ids to text")
    show.add_argument("--format", choices=("table", "csv", "md"), default="table")
    show.set_defaults(run=run_show)

    diff = _parser(commands, "diff", "first differing step / rank / micro-batch / field / position", DIFF_EXAMPLES)
    diff.add_argument("a", type=Path)
    diff.add_argument("b", type=Path)
    diff.add_argument("--by", choices=("auto", "rank", "global"), default="auto",
                      help="line up by rank and micro-batch, or by each step's global batch (default: auto)")
    diff.add_argument("--fields", help="comma-separated fields to compare (default: all)")
    diff.add_argument("--limit", type=int, default=50, help="rows to print (default 50; 0 = all)")
    diff.add_argument("--format", choices=("table", "csv", "md", "json"), default="table")
    diff.set_defaults(run=run_diff)


def _render(frame, output_format: str, title: str = "", summary: dict | None = None) -> None:
    from ..report.tables import frame_to_text, print_frame

    if output_format == "table":
        print_frame(frame, title=title)
    else:
        sys.stdout.write(frame_to_text(frame, output_format, summary))


def run_verify(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..replay.verify import verify_store

    if args.vocab_size is not None and args.vocab_size <= 0:
        raise InputError("--vocab-size", f"expected a positive integer, found {args.vocab_size}", "pass the vocab size")
    if sys.stderr.isatty():  # a progress bar on a terminal, quiet when piped
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("verifying steps", total=None)
            report = verify_store(args.dir, args.vocab_size, sha256=not args.no_sha256,
                                  progress=lambda done, total: bar.update(task, completed=done, total=total))
    else:
        report = verify_store(args.dir, args.vocab_size, sha256=not args.no_sha256)
    summary = report.summary()
    if args.format == "json":
        out = {"summary": summary, "problems": json.loads(report.problems_frame().to_json(orient="records")),
               "loss_mask": json.loads(report.loss_mask_frame().to_json(orient="records"))}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0 if report.ok else 1
    masked = summary["fraction_masked"]
    lines = [f"{report.path}: layout {report.layout}, {summary['steps']} step(s) ({summary['step_range']}), "
             f"dp_world {report.dp_world}, {report.micro_batches_read} micro-batch(es) read",
             "fields: " + ", ".join(f"{k} {report.dtypes[k]} {report.shapes[k]}" for k in report.dtypes),
             f"ids: {list(report.id_range) if report.id_range else '-'}"
             + (f" (vocab {report.vocab_size})" if report.vocab_size else " (no --vocab-size: only negatives checked)")]
    if masked:
        lines.append(f"loss mask: fraction masked min {masked['min']:.4g}, mean {masked['mean']:.4g}, "
                     f"max {masked['max']:.4g} per step and rank")
    print("\n".join(lines))
    if report.problems:
        frame = report.problems_frame()
        if args.format == "table":  # step, rank, micro-batch and field are in the path
            frame = frame[["severity", "check", "where", "position", "message"]]
        _render(frame, args.format, "problems (paths relative to the capture folder)")
    if args.loss_mask:
        _render(report.loss_mask_frame(), "md" if args.format == "md" else "table", "loss mask")
    print(f"{summary['errors']} error(s), {summary['warnings']} warning(s)", file=sys.stderr)
    return 0 if report.ok else 1


def run_show(args: argparse.Namespace) -> int:
    from ..replay.show import show_batch

    frame = show_batch(args.dir, args.step, args.rank, args.micro_batch, tokenizer=args.tokenizer)
    _render(frame, args.format, f"{args.dir} step {args.step} rank {args.rank} micro-batch {args.micro_batch}")
    return 0


def run_diff(args: argparse.Namespace) -> int:
    from ..replay.diff_data import diff_stores

    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields is not None else None
    diff = diff_stores(args.a, args.b, fields=fields, by=args.by)
    summary = diff.summary()
    frame = diff.frame()
    if args.format == "json":
        out = {"summary": summary, "rows": json.loads(frame.to_json(orient="records"))}
        sys.stdout.write(json.dumps(out, indent=2, default=str) + "\n")
        return 0 if diff.identical else 1
    first = diff.first
    if first is None:
        print(f"identical: {diff.steps_compared} step(s), {diff.comparisons} comparison(s) ({diff.mode})")
        return 0
    print(f"first difference: step {first.step}"
          + (f", rank {first.rank}" if first.rank is not None else "")
          + (f", micro-batch {first.micro_batch}" if first.micro_batch is not None else "")
          + (f", field {first.field}" if first.field else "")
          + (f", position {list(first.position)}: A {first.a} vs B {first.b}" if first.position else "")
          + f" ({first.status})")
    if args.limit and len(frame) > args.limit:
        print(f"(first {args.limit} of {len(frame)} rows; --limit 0 for all)")
        frame = frame.head(args.limit)
    _render(frame, args.format, f"{args.a} vs {args.b} ({diff.mode})", summary)
    print(f"{diff.steps_compared} step(s) compared, {diff.steps_identical} identical; only in A: "
          f"{summary['only_in_a'] or '-'}; only in B: {summary['only_in_b'] or '-'}", file=sys.stderr)
    return 1
