"""``workbench compare A B``: per-operator dumps of two runs, matched across frameworks, first divergence."""
from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = """examples:
  workbench compare torch_dump/step0/rank0/dump.json ms_dump/step0/rank0/dump.json
  workbench compare torch_dump/ ms_dump/ --noise torch_rerun/ --out compare.html
  workbench compare megatron_dump/ mf_dump/ --arch llama --mapping pairs.yaml --format xlsx --out compare.xlsx
  workbench compare a/ b/ --workers 4                        # ranks and steps in 4 processes
  workbench compare a/ b/ --part 2/8 --format json --out part2.json     # one share, for a cluster array
  workbench compare merge part*.json --out compare.html
  workbench compare ref_logits.npy ms_logits.npy --logits     # per-token KL, cosine, top-k, first bad token
"""
DETAILS = """A is the reference (e.g. the PyTorch run), B the migrated run. Both are read into one table whatever
their format (msprobe dump.json of PyTorch or MindSpore, MindSpore Dump statistic.csv or .npy trees, the
legacy api_stack_dump.pkl; docs/dumps.md). Rows pair up automatically: modules whose paths resolve through
converters/ to the same logical module (a fused Megatron linear_qkv against MindFormers wq, wk, wv on combined
statistics), operators inside them aligned in order through converters/operators.yaml; --mapping adds pairs
(docs/compare.md). Every row that finds no counterpart is listed with the reason. --noise (a second dump of the
reference) widens each row's tolerance to the run-to-run spread. The first divergence is the first matched
call whose inputs agree and whose outputs do not. Exit codes: 0 no divergence, 1 a divergence, 2 bad input."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from .outputs import add_output_arguments

    parser = subparsers.add_parser("compare", help="compare per-operator dumps; name the first diverging operator",
                                   description=DETAILS, epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", type=Path, metavar="A B | merge PART...",
                        help="the reference dump and the other dump; or `merge` and the parts' JSON reports")
    parser.add_argument("--arch", help="architecture in converters/ (default: detected from the module paths)")
    parser.add_argument("--mapping", type=Path, metavar="FILE.yaml", help="extra or overriding pairs (docs/compare.md)")
    parser.add_argument("--noise", type=Path, metavar="A2", help="a second dump of the reference: tolerances from its spread")
    parser.add_argument("--rank", type=int, help="compare this rank only")
    parser.add_argument("--step", type=int, help="compare this step only")
    parser.add_argument("--workers", type=int, default=1, help="processes for the (step, rank) units (default 1)")
    parser.add_argument("--part", metavar="i/n", help="compare only the i-th of n shares of the units")
    parser.add_argument("--logits", action="store_true", help="A and B are logits [tokens, vocab] (or folders of per-token .npy)")
    add_output_arguments(parser, plot="with --logits: write the per-token KL figure (png, svg, pdf)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _one_blas_thread()
    from ..errors import InputError
    from ..report.emit import emit
    from .outputs import check_outputs

    if args.plot is not None and not args.logits:
        raise InputError("--plot", "only the logits comparison draws a figure", "add --logits, or leave --plot out")
    check_outputs(args)
    inputs = list(args.inputs)
    if str(inputs[0]) == "merge":
        from ..dumps.compare_merge import merge_reports

        if len(inputs) < 2:
            raise InputError("compare merge", "no part reports given", "e.g. workbench compare merge part*.json")
        return emit(merge_reports(inputs[1:]), args.format, args.out, args.force)
    if len(inputs) != 2:
        raise InputError("compare", f"expected two dumps A B, found {len(inputs)} paths", "e.g. workbench compare a/ b/")
    if args.logits:
        from ..dumps.logits import compare_logits
        from ..report.emit import write_figure

        result = compare_logits(*inputs)
        if args.plot is not None:
            write_figure(result, result.figures[0].name, args.plot, args.force)
        return emit(result, args.format, args.out, args.force)

    from ..dumps.compare_run import CompareOptions, compare_dumps
    from ..report.emit import choose_format

    options = CompareOptions(arch=args.arch, mapping=args.mapping, noise=args.noise, rank=args.rank, step=args.step,
                             workers=args.workers, part=args.part, output_format=choose_format(args.format, args.out))
    return emit(compare_dumps(*inputs, options), args.format, args.out, args.force)


def _one_blas_thread() -> None:
    """OpenBLAS, when numpy is first imported, starts a thread per core that spins waiting for work (~0.1 s of
    CPU in the parent's serial start, on the core that a ``--workers`` process needs, and again in the parent of
    every run). A comparison does no matrix algebra (elementwise numpy, a few vector dot products), so one
    thread, unless the user chose otherwise. Only in a process that has not imported numpy yet (the command line):
    later it would change nothing here and only leak into the caller's child processes."""
    import os
    import sys

    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
