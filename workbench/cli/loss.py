"""``workbench loss REFERENCE CANDIDATE``: curves, the reference's noise band, verdicts."""
from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = """examples:
  workbench loss megatron_train.log mindformers/output/log/rank_0/info.log
  workbench loss megatron.log mf.log --baseline megatron_rerun.log --format html --out loss.html
  workbench loss megatron.log mf.log --metric grad_norm --smoothing 0.6 --plot grad_norm.png
  workbench loss megatron.log mf.log --step1-rtol 1e-5 --only-steps 1   # step 1 of an fp32 pair
"""
DETAILS = """Reads Megatron / MindSpeed-LLM and MindFormers training logs (format detected from the content),
puts both on the same optimizer steps (Megatron prints the next update's lr; interval means; lm_loss
vs the mcore total) and says how, then checks: step-1 relative difference, mean relative difference,
bias (sign test), where the difference leaves the reference's noise band for good (--baseline: reruns
of the reference), spikes and nan steps, the late-stage gap.
Exit codes: 0 aligned, 1 not aligned, 2 bad input."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from .outputs import add_output_arguments

    parser = subparsers.add_parser("loss", help="compare two runs' loss (or grad norm, lr) against the reference's noise",
                                   description=DETAILS, epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference", type=Path, help="the reference run's log (e.g. Megatron)")
    parser.add_argument("candidate", type=Path, help="the migrated run's log (e.g. MindFormers)")
    parser.add_argument("--baseline", type=Path, action="append", default=[], metavar="LOG",
                        help="a rerun of the reference (repeatable): its spread is the noise band")
    parser.add_argument("--metric", default="loss", help="loss (default), grad_norm, lr, or any metric the logs print")
    parser.add_argument("--smoothing", type=float, default=0.0, help="EMA weight in [0, 1) like TensorBoard's slider")
    parser.add_argument("--step1-rtol", type=float, default=None, help="step-1 relative bar (default 0.01)")
    parser.add_argument("--mean-rtol", type=float, default=None, help="mean relative bar (default 0.01)")
    parser.add_argument("--shift", type=int, default=0, help="add N to the candidate's step numbers")
    parser.add_argument("--only-steps", type=int, default=None, metavar="N", help="compare the first N common steps")
    add_output_arguments(parser, plot="write the loss figure (png, svg, pdf)")
    parser.set_defaults(run=run)


def thresholds_from(args) -> "object":
    from dataclasses import replace

    from ..errors import InputError
    from ..logs.loss_compare import LossThresholds

    chosen = {}
    for flag, key in (("step1_rtol", "step1_rtol"), ("mean_rtol", "mean_rtol")):
        value = getattr(args, flag)
        if value is not None:
            if not value > 0:
                raise InputError(f"--{flag.replace('_', '-')}", f"expected a positive number, found {value}",
                                 "e.g. 0.01 for 1 %")
            chosen[key] = value
    if not 0 <= args.smoothing < 1:
        raise InputError("--smoothing", f"expected a weight in [0, 1), found {args.smoothing}", "e.g. 0.6")
    return replace(LossThresholds(smoothing=args.smoothing), **chosen)


def run(args: argparse.Namespace) -> int:
    from ..logs import read_log
    from ..logs.loss_compare import compare_loss, keep_first_steps
    from ..report.emit import emit, write_figure
    from .outputs import check_outputs

    check_outputs(args)
    thresholds = thresholds_from(args)
    reference, candidate = read_log(args.reference), read_log(args.candidate)
    baselines = [read_log(path) for path in args.baseline]
    if args.only_steps is not None:
        reference, candidate, *baselines = (keep_first_steps(series, args.only_steps)
                                            for series in (reference, candidate, *baselines))
    result = compare_loss(reference, candidate, baselines, args.metric, thresholds, args.shift)
    if args.plot is not None:
        write_figure(result, "loss", args.plot, args.force)
    return emit(result, args.format, args.out, args.force)
