"""``workbench`` entry point: builds the parser from the subcommand modules, handles errors.

Each subcommand module exposes ``register(subparsers)`` and ``run(args) -> int``; bad input
raises :class:`~workbench.errors.InputError`, printed as one line with exit code 2
(``--debug`` shows the traceback instead). Ctrl-C, SIGTERM and SIGHUP unwind (partial output
files are removed) and exit with ``128 + signal``: 130, 143, 129 (:mod:`workbench.interrupts`).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from .. import __version__
from ..errors import InputError
from ..temporaries import remove_leftovers
from ..interrupts import Terminated, exit_code, signals_unwind

SUBCOMMANDS = ("checklist", "convert", "weights", "data", "loss", "localnorm", "optim_check", "compare", "align",
               "reference", "demo")

EPILOG = """examples:
  workbench checklist megatron_pretrain.sh mindformers_pretrain.yaml
  workbench checklist train.log run.yaml --format md --out checklist.md
  workbench convert hf_llama/ llama.ckpt --to mindformers --verify
  workbench weights diff megatron_ckpt/ llama.ckpt
  workbench loss megatron_train.log mindformers_info.log --baseline megatron_rerun.log --out loss.html
  workbench localnorm megatron_train.log mindformers_info.log --step 1
  workbench optim-check --capture grads/ --mindformers mindformers_pretrain.yaml
  workbench compare torch_dump/ mindspore_dump/ --out compare.html
  workbench align prepare --megatron train.sh --mindformers run.yaml --out align/
  workbench align report align/ --out report.html
  workbench reference train --side megatron --steps 0 --save megatron --out runs/init
  workbench demo --fault norm_epsilon
"""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``command`` (a subcommand module's name) only that subcommand is registered:
    a run of one command imports and builds only its own parser (all of them cost a conversion ~20 ms)."""
    parser = argparse.ArgumentParser(
        prog="workbench", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Accuracy alignment of Megatron-LM / MindSpeed-LLM (PyTorch) and MindFormers (MindSpore) runs.")
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS if command is None else (command,):
        importlib.import_module(f"{__package__}.{name}").register(subparsers)
    return parser


def _named_command(argv: list[str]) -> str | None:
    """The subcommand module ``argv`` names first (after top-level options), or None (help, version, a typo)."""
    for token in argv:
        if token == "--debug":
            continue
        name = token.replace("-", "_")
        return name if name in SUBCOMMANDS and token == name.replace("_", "-") else None
    return None


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    if argv is None:               # the process's entry point (console script, python -m workbench): it exits next
        _skip_final_collection()
    return code


def _skip_final_collection() -> None:
    """The process exits next, and its last garbage collection would walk every object still alive (a
    conversion's parsed specs and keys.yaml: 30-100 ms on the benchmark machine) to free memory that the
    exit frees anyway: ``gc.freeze`` moves them out of its reach. Every writer has committed or discarded
    its files before ``main`` returns, and Python does not promise ``__del__`` at exit."""
    import gc

    gc.freeze()


def _main(argv: list[str] | None) -> int:
    parser = build_parser(_named_command(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        with signals_unwind():
            try:
                return args.run(args)
            finally:                     # a signal between a temporary's creation and its writer's clean-up
                remove_leftovers()
    except InputError as error:
        if args.debug:
            raise
        print(f"workbench: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:              # `workbench ... | head`: the reader left; stop quietly, like cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())      # Python's final flush of stdout must not fail again
        return 128 + 13                          # SIGPIPE's exit status
    except (KeyboardInterrupt, Terminated) as interruption:
        if args.debug:
            import traceback
            traceback.print_exc()
        reason = interruption if isinstance(interruption, Terminated) else "interrupted (SIGINT)"
        print(f"workbench: {reason}; partial output files were removed", file=sys.stderr)
        return exit_code(interruption)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
