"""``workbench localnorm REFERENCE CANDIDATE``: per-parameter local norms of two runs, matched through the specs."""
from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = """examples:
  workbench localnorm megatron_train.log mindformers/output/log/rank_0/info.log
  workbench localnorm megatron.log mf.log --names-reference megatron_ckpt/ --step 1 --format html --out norms.html
  workbench localnorm megatron.log mf.log --arch qwen3 --plot norms.png --floor 1e-3
"""
DETAILS = """Both logs' per-parameter local norms (MindFormers runner_wrapper.local_norm blocks or monitor lines,
the Megatron local-norm patch, ...) become step sums of squares; parameters are matched through
converters/ (Megatron linear_qkv against MindFormers wq+wk+wv, linear_fc1 against w1+w3, stacked
experts), tensor-parallel ranks merged. Nameless lists get their names from MindFormers' 'Param groups'
block or from a checkpoint (--names-reference / --names-candidate) put in optimizer order, validated.
Exit codes: 0 no outlier, 1 outliers or unmatched parameters, 2 bad input."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from .outputs import add_output_arguments

    parser = subparsers.add_parser("localnorm", help="compare per-parameter local norms of two runs",
                                   description=DETAILS, epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference", type=Path, help="the reference run's log (e.g. Megatron)")
    parser.add_argument("candidate", type=Path, help="the migrated run's log (e.g. MindFormers)")
    parser.add_argument("--arch", help="architecture in converters/ (default: detected from the names)")
    parser.add_argument("--step", type=int, action="append", help="compare this step (repeatable; default: every common step)")
    parser.add_argument("--names-reference", type=Path, metavar="CHECKPOINT", help="names for a nameless reference list")
    parser.add_argument("--names-candidate", type=Path, metavar="CHECKPOINT", help="names for a nameless candidate list")
    parser.add_argument("--floor", type=float, default=None, help="no outlier below this relative difference (default 1e-4)")
    parser.add_argument("--factor", type=float, default=None, help="outlier: above factor x the median (default 10)")
    add_output_arguments(parser, plot="write the bar chart (png, svg, pdf)")
    parser.set_defaults(run=run)


def _named(path: Path, checkpoint: Path | None):
    from ..logs import read_log
    from ..logs.param_names import attach_names, names_from_checkpoint, optimizer_order

    series = read_log(path)
    if checkpoint is not None:
        series = attach_names(series, optimizer_order(names_from_checkpoint(checkpoint)), str(checkpoint))
    return series


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..errors import InputError
    from ..logs.localnorm_compare import NormThresholds, compare_local_norms
    from ..report.emit import emit, write_figure
    from .outputs import check_outputs

    check_outputs(args)
    thresholds = NormThresholds()
    for flag in ("floor", "factor"):
        value = getattr(args, flag)
        if value is not None:
            if not value > 0:
                raise InputError(f"--{flag}", f"expected a positive number, found {value}", "e.g. --floor 1e-3")
            thresholds = replace(thresholds, **{flag: value})
    reference, candidate = _named(args.reference, args.names_reference), _named(args.candidate, args.names_candidate)
    result = compare_local_norms(reference, candidate, args.arch, args.step, thresholds)
    if args.plot is not None:
        write_figure(result, "bars", args.plot, args.force)
    return emit(result, args.format, args.out, args.force)
