"""``workbench reference train|batches``: the CPU reference models (torch "Megatron", MindSpore "MindFormers")."""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

EXAMPLES = """examples:
  workbench reference batches --steps 4 --out batches.npz
  workbench reference train --side megatron --steps 0 --save megatron,hf --out runs/init
  workbench reference train --side megatron --steps 4 --batches batches.npz --out runs/torch --save megatron,hf
  workbench reference train --side mindformers --steps 4 --batches batches.npz --out runs/ms --local-norms --grads
  workbench reference train --side mindformers --init llama.ckpt --fault norm_epsilon --steps 2 --out runs/ms_fault
  workbench reference train --side megatron --config tiny.yaml --save megatron --tp 2 --pp 2 --out runs/tp2pp2
  workbench reference train --side mindformers --init llama.ckpt --inject-grads grads/ --inject-config mf.yaml --steps 1 --save mindspore --out runs/injected
  workbench reference --list-faults
"""
DETAILS = """Trains one of the two tiny reference models on CPU and writes what the real framework would: its
training log (Megatron iteration lines or MindFormers MFLossMonitor lines, local norms), checkpoints in its
own formats, per-step gradients; or writes Megatron-shaped synthetic batches both sides can read.
--steps 0 with --save writes the seed-determined (or --init) weights without training: the checkpoint
both sides of an alignment start from. --fault NAME plants a known migration bug of datasets/demo_faults.yaml
on the MindSpore side. --inject-grads DIR replaces the MindSpore side's update-1 gradients by a capture's
(the method's step-2 check: workbench optim-check --observed explains the saved update). Exit codes: 0 done,
2 bad input."""

COUNTS = {"steps": 0, "micro_batch_size": 1, "data_seed": 0, "tp": 1, "pp": 1}
"""Command-line counts and their least value (--steps 0 is allowed where it writes something: train --save)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("reference", help="train the CPU reference models, write batches",
                                   description=DETAILS, epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list-faults", action="store_true", help="print the fault catalog (datasets/demo_faults.yaml)")
    commands = parser.add_subparsers(dest="reference_command", metavar="{train,batches}")
    for name, text in (("train", "train one side for --steps updates (0: save the initial weights)"),
                       ("batches", "write synthetic Megatron batches (.npz of tokens, labels, loss_mask)")):
        sub = commands.add_parser(name, help=text, description=text, epilog=EXAMPLES,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("--config", type=Path, help="YAML with model:, train:, precision: sections (default: tiny)")
        sub.add_argument("--from", dest="from_config", type=Path, metavar="CONFIG",
                         help="take model and training settings from a real Megatron (--side megatron) or "
                              "MindFormers config, as `workbench checklist` reads it")
        sub.add_argument("--steps", type=int, help="overrides train.steps")
        sub.add_argument("--micro-batch-size", type=int, default=2)
        sub.add_argument("--data-seed", type=int, default=0)
        sub.add_argument("--out", type=Path, required=True)
        sub.add_argument("--force", action="store_true",
                         help="replace an existing output (the new one is renamed in when complete)")
        sub.set_defaults(run=run)
    _train_arguments(commands.choices["train"])
    parser.set_defaults(run=run)


def _train_arguments(train: argparse.ArgumentParser) -> None:
    train.add_argument("--side", choices=("megatron", "mindformers"), required=True)
    train.add_argument("--batches", type=Path, help=".npz of tokens/labels/loss_mask [steps, b, s]")
    train.add_argument("--init", type=Path, help="start from a checkpoint (Megatron legacy, or MindSpore .ckpt)")
    train.add_argument("--save", default="", help="comma list: megatron, hf (torch side); mindspore")
    train.add_argument("--tp", type=int, default=1, help="tensor-parallel shards of the saved Megatron checkpoint")
    train.add_argument("--pp", type=int, default=1, help="pipeline stages of the saved Megatron checkpoint")
    train.add_argument("--grads", action="store_true",
                       help="write out/grads/step_N/grads/<param>.npy + manifest.json (the step store)")
    train.add_argument("--local-norms", action="store_true", help="log per-parameter local norms")
    train.add_argument("--qkv-concat", action="store_true", help="MindSpore side: fused w_qkv / w_gate_hidden")
    train.add_argument("--no-jit", action="store_true", help="MindSpore side: PyNative instead of graph mode")
    train.add_argument("--fault", metavar="NAME", help="MindSpore side: plant this fault of the catalog "
                                                       "(model, precision, optimizer or schedule kind; --list-faults)")
    train.add_argument("--inject-grads", type=Path, metavar="DIR",
                       help="MindSpore side: update 1 uses this capture's step-1 gradients instead of its own "
                            "(no forward pass for it)")
    train.add_argument("--inject-config", type=Path, metavar="CONFIG",
                       help="the yaml or script giving the model sizes the capture's names need (with --inject-grads)")


def _check_counts(args: argparse.Namespace) -> None:
    from ..errors import InputError
    from ..input_files import expect_count
    from ..reference.config import MAX_STEPS

    for name, least in COUNTS.items():
        value = getattr(args, name, None)
        if value is not None:
            option = "--" + name.replace("_", "-")
            if name == "steps":
                least = 0 if args.reference_command == "train" else 1
                fix = f"pass --steps between {least} and {MAX_STEPS}"
            else:
                fix = f"pass {option} {max(least, 1)} or more"
            expect_count(value, option, option, minimum=least, maximum=MAX_STEPS if name == "steps" else None, fix=fix)
    if args.reference_command == "train" and args.steps == 0 and not args.save:
        raise InputError("--steps", "--steps 0 trains nothing and, without --save, writes nothing",
                         "add --save megatron,hf (torch side) or --save mindspore to write the initial weights")


def _train_config(args: argparse.Namespace):
    from ..reference.run_config import load_run_config

    _check_counts(args)
    if args.from_config is not None:
        from ..reference.from_canonical import configs_from_file

        model, train = configs_from_file(args.from_config, getattr(args, "side", None) or "megatron", args.steps)
    else:
        model, train = load_run_config(args.config)
    if args.steps is not None:
        train = replace(train, steps=args.steps)
    if getattr(args, "local_norms", False):
        train = replace(train, log_local_norms=True)
    return model, train


def _check_out(out: Path, force: bool) -> None:
    from ..errors import InputError

    if out.exists() and any(out.iterdir() if out.is_dir() else [out]) and not force:
        raise InputError(str(out), "output already exists", "pass --force or choose another path")


def run(args: argparse.Namespace) -> int:
    if args.list_faults:
        from ..demo.catalog import format_catalog, load_faults

        print(format_catalog(load_faults()))
        return 0
    if args.reference_command is None:
        from ..errors import InputError

        raise InputError("workbench reference", "expected a command: train or batches (or --list-faults)",
                         "see workbench reference --help")
    model, train = _train_config(args)
    _check_out(args.out, args.force)
    if args.reference_command == "batches":
        from ..reference.config import synthetic_batches
        from ..reference.runner import save_batches

        save_batches(args.out, synthetic_batches(model, train.steps, args.micro_batch_size, args.data_seed))
        print(f"wrote {train.steps} batches to {args.out}")
        return 0
    return _train(args, model, train)


def _train(args: argparse.Namespace, model, train) -> int:
    from ..reference.runner import RunSpec, run as run_reference

    spec = RunSpec(side=args.side, model=model, train=train, out=args.out, batches=args.batches,
                   micro_batch_size=args.micro_batch_size, data_seed=args.data_seed, init=args.init,
                   save=tuple(part for part in args.save.split(",") if part), tensor_parallel=args.tp,
                   pipeline_parallel=args.pp, grads=args.grads, qkv_concat=args.qkv_concat, jit=not args.no_jit,
                   fault=args.fault, inject=args.inject_grads, inject_config=args.inject_config)
    result = run_reference(spec)
    for step, (loss, lr) in enumerate(zip(result.losses, result.lrs, strict=True), 1):
        print(f"step {step}: loss {loss:.6f} lr {lr:.3e}")
    if result.log is not None:
        print(f"log: {result.log}")
    elif not result.losses:
        print("no training (--steps 0): wrote the initial weights")
    for path in result.checkpoints:
        print(f"wrote {path}")
    return 0
