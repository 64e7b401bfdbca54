"""``workbench demo``: the whole alignment method on CPU with the reference models, in a few minutes."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLES = """examples:
  workbench demo                                   # clean: every stage passes; report in workbench-demo/
  workbench demo --fault norm_epsilon --out demo-eps    # one known migration bug; the report names it
  workbench demo --list-faults
  workbench demo --out demo --force                # replace an earlier demo folder
"""
DETAILS = """Writes a reference checkpoint and configs (align prepare on the shipped demo pair), captures the
reference's batches, converts the weights, replays the batches on MindSpore, runs steps 1-2 on both sides
with gradient capture and local norms, the lr = 0 and long runs with a second reference run for the noise
band, msprobe dumps of step 1, and the alignment report (report.html). --fault plants one known bug on the
MindSpore side; the report must name its stage and component. Exit codes: 0 the report's verdict is PASS,
1 a stage failed, 2 bad input."""
MARKER = ".workbench-demo"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run the whole method on CPU with the reference models",
                                   description=DETAILS, epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("workbench-demo"), help="folder for everything (default: %(default)s)")
    parser.add_argument("--fault", help="plant this fault of the catalog on the MindSpore side (--list-faults)")
    parser.add_argument("--list-faults", action="store_true", help="print the fault catalog and exit")
    parser.add_argument("--long-steps", type=int, default=None, help="steps of the long runs (default 40)")
    parser.add_argument("--no-dumps", action="store_true", help="skip the msprobe dumps (the dumps stage is NOT RUN)")
    parser.add_argument("--force", action="store_true", help="replace an earlier demo folder")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..demo.catalog import find_fault, format_catalog, load_faults

    if args.list_faults:
        print(format_catalog(load_faults()))       # the one catalog listing (workbench reference --list-faults too)
        return 0
    if args.fault:
        find_fault(args.fault)                               # an unknown name: one line, before any work
    return _run_demo(args)


def _run_demo(args: argparse.Namespace) -> int:
    import shutil

    from ..demo.run import LONG_STEPS, DemoOptions, run_demo
    from ..errors import InputError
    from ..input_files import expect_count

    steps = expect_count(args.long_steps if args.long_steps is not None else LONG_STEPS, "--long-steps",
                         "--long-steps", minimum=4, maximum=10_000, fix="pass --long-steps between 4 and 10000")
    out = _fresh_folder(args.out, args.force)
    try:
        demo = run_demo(DemoOptions(out=out, fault=args.fault, long_steps=steps, dumps=not args.no_dumps,
                                    progress=_progress))
    except InputError as error:                              # failed: the logs it names are kept, nothing else
        raise keep_named_logs(error, out) from None
    except BaseException:                                    # interrupted: nothing half-made stays
        shutil.rmtree(out, ignore_errors=True)
        raise
    (out / MARKER).write_text("")
    _print_summary(demo)
    return demo.result.exit_code


def keep_named_logs(error, out: Path):
    """``out`` removed (no half-made demo stays), but the worker logs ``error`` names are moved first into a
    new folder ``<out>.logs-XXXX`` beside it, and the error names them there: the message stays true."""
    import shutil
    import tempfile

    from ..errors import InputError
    from ..fileio import folder_mode

    work = str((out / "work").resolve())
    named = [log for log in sorted((out / "work").glob("*.log")) if str(log.resolve()) in f"{error.where} {error.problem}"]
    kept = None
    if named:
        kept = Path(tempfile.mkdtemp(prefix=f"{out.name}.logs-", dir=out.resolve().parent))
        kept.chmod(folder_mode())                            # mkdtemp makes 0700: outputs get normal modes
        for log in named:
            shutil.move(str(log), str(kept / log.name))
    shutil.rmtree(out, ignore_errors=True)
    if kept is None:
        return error
    return InputError(error.where.replace(work, str(kept)), error.problem.replace(work, str(kept)), error.fix)


def _fresh_folder(out: Path, force: bool) -> Path:
    import shutil

    from ..errors import InputError

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise InputError(str(out), "already exists", "pass --force to replace an earlier demo, or choose --out")
        if not (out / MARKER).exists():
            raise InputError(str(out), "is not a folder an earlier `workbench demo` wrote (no .workbench-demo in it)",
                             "choose another --out; the demo replaces only its own folders")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _progress(stage: str) -> None:
    print(f"demo: {stage} ...", file=sys.stderr, flush=True)


def _print_summary(demo) -> None:
    result = demo.result
    print(f"report: {demo.report}")
    print(f"verdict: {result.verdict}")
    for line in result.summary:
        print(f"  {line}")
    for note in demo.notes:
        print(f"note: {note}")
    total = sum(demo.timings.values())
    print(f"time: {total:.0f} s (" + ", ".join(f"{name} {seconds:.1f}" for name, seconds in demo.timings.items()) + ")")
