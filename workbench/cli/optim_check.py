"""``workbench optim-check --capture DIR --mindformers Y.yaml``: the configured optimizer on the reference's gradients."""
from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = """examples:
  workbench optim-check --capture grads/ --mindformers finetune_llama.yaml
  workbench optim-check --capture grads/ --mindformers mf.yaml --megatron pretrain_llama.sh --step 1
  workbench optim-check --capture grads/ --mindformers mf.yaml --format html --out optim.html --plot optim.png
  workbench optim-check --capture grads/ --mindformers mf.yaml --observed injected_step1.ckpt
"""
DETAILS = """Starts from the reference's weights before update N (the capture's params_before, and its Adam state
after update N-1 when N > 1), applies the optimizer exactly as the MindFormers yaml configures it
(type, betas, eps, weight decay and its grouping, the lr its schedule gives at that update, clipping
from runner_wrapper) to the captured gradients, and compares the result with the reference's weights
and Adam moments after the update, parameter by parameter. Names are mapped through converters/
(Megatron linear_qkv -> MindFormers wq/wk/wv, ...). When they differ, single-cause hypotheses (weight
decay grouping or value, lr, bias correction, betas, eps, clipping, loss scale) are fitted to the
reference's update and the one that reproduces it is named, with its evidence.
--observed: the method's step-2 check. The MindSpore run's weights after update N with these gradients
injected into its optimizer (MFTrainOneStepInjectCell) take the reference's place: the configuration
must reproduce them, and when it does not the hypotheses name what the MindSpore code does instead.
Capture: workbench.replay.grad_capture (docs/step-store.md). Exit codes: 0 same update, 1 differences,
2 bad input."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from .outputs import add_output_arguments

    parser = subparsers.add_parser("optim-check", help="apply the MindFormers optimizer to the reference's gradients",
                                   description=DETAILS, epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capture", type=Path, required=True, metavar="DIR",
                        help="the capture root (holding step_N/grads, params_before, params_after, exp_avg, ...)")
    parser.add_argument("--mindformers", type=Path, required=True, metavar="YAML", help="the MindFormers yaml")
    parser.add_argument("--megatron", type=Path, metavar="CONFIG",
                        help="the reference's Megatron script/args: its optimizer settings are shown as evidence")
    parser.add_argument("--observed", type=Path, metavar="CKPT",
                        help="the MindSpore run's weights after the update, computed from these gradients injected "
                             "into its optimizer (MFTrainOneStepInjectCell): explain that update instead of the reference's")
    parser.add_argument("--step", type=int, help="the update to check (default: the first fully captured one)")
    parser.add_argument("--arch", help="architecture in converters/ (default: detected from the names)")
    parser.add_argument("--rtol", type=float, default=1e-6, help="PASS threshold per parameter (default 1e-6)")
    add_output_arguments(parser, plot="write the per-parameter bar chart (png, svg, pdf)")
    parser.add_argument("--progress", action="store_true", help="show progress on stderr")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..grads.optim_check import CheckOptions
    from ..grads.optim_result import optim_check
    from ..report.emit import emit, write_figure
    from .outputs import check_outputs

    check_outputs(args)
    if not args.rtol > 0:
        raise InputError("--rtol", f"expected a positive number, found {args.rtol}", "e.g. --rtol 1e-6")
    if args.step is not None and args.step < 1:
        raise InputError("--step", f"expected an update number from 1, found {args.step}", "e.g. --step 1")
    options = CheckOptions(step=args.step, arch=args.arch, megatron=args.megatron, rtol=args.rtol, progress=args.progress,
                           observed=args.observed)
    result = optim_check(args.capture, args.mindformers, options)
    if args.plot is not None:
        write_figure(result, "parameters", args.plot, args.force)
    return emit(result, args.format, args.out, args.force)
