"""``python -m workbench.reference``: train a reference model, or write synthetic batches.

examples:
  python -m workbench.reference batches --steps 4 --out batches.npz
  python -m workbench.reference train --side megatron --steps 4 --batches batches.npz --out runs/torch --save megatron,hf
  python -m workbench.reference train --side mindformers --steps 4 --batches batches.npz --out runs/ms --local-norms --grads
  python -m workbench.reference train --side megatron --config tiny.yaml --save megatron --tp 2 --pp 2 --out runs/tp2pp2
  python -m workbench.reference train --side mindformers --from checklists/examples/llama_tiny_mindformers.yaml --steps 4 --out runs/mf
"""
from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from ..errors import InputError
from ..interrupts import Terminated, exit_code, signals_unwind
from ..temporaries import remove_leftovers


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workbench.reference", description=__doc__.split("\n")[0],
                                     epilog="\n".join(__doc__.split("\n")[2:]),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("train", "batches"):
        sub = commands.add_parser(name)
        sub.add_argument("--config", type=Path, help="YAML with model:, train:, precision: sections (default: tiny)")
        sub.add_argument("--from", dest="from_config", type=Path, metavar="CONFIG",
                         help="take model and training settings from a real Megatron (--side megatron) or "
                              "MindFormers config, as `workbench checklist` reads it")
        sub.add_argument("--steps", type=int, help="overrides train.steps")
        sub.add_argument("--micro-batch-size", type=int, default=2)
        sub.add_argument("--data-seed", type=int, default=0)
        sub.add_argument("--out", type=Path, required=True)
        sub.add_argument("--force", action="store_true", help="replace an existing output (the new one is renamed in when complete)")
    train = commands.choices["train"]
    train.add_argument("--side", choices=("megatron", "mindformers"), required=True)
    train.add_argument("--batches", type=Path, help=".npz of tokens/labels/loss_mask [steps, b, s]")
    train.add_argument("--init", type=Path, help="start from a checkpoint (Megatron legacy, or MindSpore .ckpt)")
    train.add_argument("--save", default="", help="comma list: megatron, hf (torch side); mindspore")
    train.add_argument("--tp", type=int, default=1, help="tensor-parallel shards of the saved Megatron checkpoint")
    train.add_argument("--pp", type=int, default=1, help="pipeline stages of the saved Megatron checkpoint")
    train.add_argument("--grads", action="store_true", help="write out/grads/step_N/grads/<param>.npy + manifest.json (the step store)")
    train.add_argument("--local-norms", action="store_true", help="log per-parameter local norms")
    train.add_argument("--qkv-concat", action="store_true", help="MindSpore side: fused w_qkv / w_gate_hidden")
    train.add_argument("--no-jit", action="store_true", help="MindSpore side: PyNative instead of graph mode")
    return parser


_COUNTS = {"steps": 1, "micro_batch_size": 1, "data_seed": 0, "tp": 1, "pp": 1}
"""Command-line counts and their least value (--steps 0 would train nothing and say it did)."""


def _check_counts(args: argparse.Namespace) -> None:
    from ..input_files import expect_count

    from .config import MAX_STEPS

    for name, least in _COUNTS.items():
        value = getattr(args, name, None)
        if value is not None:
            option = "--" + name.replace("_", "-")
            expect_count(value, option, option, minimum=least, maximum=MAX_STEPS if name == "steps" else None,
                         fix=f"pass --steps between 1 and {MAX_STEPS}" if name == "steps" else
                         f"pass {option} {max(least, 1)} or more")


def _train_config(args):
    from .run_config import load_run_config

    _check_counts(args)
    if args.from_config is not None:
        from .from_canonical import configs_from_file

        model, train = configs_from_file(args.from_config, getattr(args, "side", None) or "megatron", args.steps)
    else:
        model, train = load_run_config(args.config)
    if args.steps is not None:
        train = replace(train, steps=args.steps)
    if getattr(args, "local_norms", False):
        train = replace(train, log_local_norms=True)
    return model, train


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and any(out.iterdir() if out.is_dir() else [out]) and not force:
        raise InputError(str(out), "output already exists", "pass --force or choose another path")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    restore = ExitStack()
    try:
        restore.enter_context(signals_unwind())          # SIGTERM unwinds: partial files are removed
        model, train = _train_config(args)
        _check_out(args.out, args.force)
        if args.command == "batches":
            from .config import synthetic_batches
            from .runner import save_batches

            save_batches(args.out, synthetic_batches(model, train.steps, args.micro_batch_size, args.data_seed))
            print(f"wrote {train.steps} batches to {args.out}")
            return 0
        from .runner import RunSpec, run

        spec = RunSpec(side=args.side, model=model, train=train, out=args.out, batches=args.batches,
                       micro_batch_size=args.micro_batch_size, data_seed=args.data_seed, init=args.init,
                       save=tuple(part for part in args.save.split(",") if part), tensor_parallel=args.tp,
                       pipeline_parallel=args.pp, grads=args.grads, qkv_concat=args.qkv_concat, jit=not args.no_jit)
        result = run(spec)
        for step, (loss, lr) in enumerate(zip(result.losses, result.lrs, strict=True), 1):
            print(f"step {step}: loss {loss:.6f} lr {lr:.3e}")
        print(f"log: {result.log}" + "".join(f"\nwrote {path}" for path in result.checkpoints))
        return 0
    except InputError as error:
        if args.debug:
            raise
        print(f"workbench.reference: error: {error}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated) as interruption:
        print(f"workbench.reference: {str(interruption) or 'interrupted (SIGINT)'}", file=sys.stderr)
        return exit_code(interruption)
    finally:
        remove_leftovers()                               # temporaries a signal caught mid-creation
        restore.close()


if __name__ == "__main__":
    sys.exit(main())
