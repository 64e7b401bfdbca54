"""Measure each fault of datasets/demo_faults.yaml against the clean torch-vs-MindSpore pair, as the demo does.

The reference (torch) writes its initial weights (--steps 0), `workbench convert` turns them into a
MindFormers .ckpt, both sides train from them on the same batches with local norms logged, the MindSpore
side with one fault planted; then the workbench's own comparisons read the two logs: the step-1 (and
step-2) loss relative difference, and the local norms' relative differences (top outlier, median,
the localnorm verdict with its default thresholds). Code faults only (model, precision, optimizer,
schedule kinds); weights and replay faults are found by the weights and data checks, not by these numbers.

    .venv/bin/python benchmarks/demo_faults.py [--config datasets/demo_model.yaml] [--faults a,b] [--jit]
"""
from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from workbench.demo.catalog import CODE_KINDS, load_faults
from workbench.knowledge import knowledge_dir
from workbench.reference.run_config import load_run_config
from workbench.reference.runner import RunSpec, run, save_batches


def reference_checkpoint(model, train, work: Path) -> Path:
    """The torch side's initial weights, converted to a MindFormers .ckpt by `workbench convert`."""
    from workbench.convert.run import ConvertOptions, convert

    run(RunSpec("megatron", model, replace(train, steps=0), work / "init", save=("megatron",)))
    target = work / "converted.ckpt"
    convert(work / "init" / "megatron_checkpoint", target, ConvertOptions(to="mindformers"))
    return target


def compare(reference, candidate, step: int) -> dict:
    """Loss (the runs' own floats) and the local norms of the two logs, step ``step``."""
    from workbench.logs import read_log
    from workbench.logs.localnorm_compare import compare_local_norms

    result = compare_local_norms(read_log(reference.log), read_log(candidate.log), steps=[step])
    table = result.tables["parameters"]
    top = table.sort_values("relative_difference", ascending=False).iloc[0]
    loss_a, loss_b = reference.losses[step - 1], candidate.losses[step - 1]
    return {"loss": abs(loss_b - loss_a) / abs(loss_a), "top": top["label"],
            "top_rel": float(top["relative_difference"]), "median": float(np.nanmedian(table["relative_difference"])),
            "verdict": result.verdict}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=knowledge_dir("datasets") / "demo_model.yaml")
    parser.add_argument("--faults", help="comma list (default: every code fault)")
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--jit", action="store_true", help="MindSpore graph mode (default PyNative)")
    args = parser.parse_args()
    model, train = load_run_config(args.config)
    train = replace(train, steps=2, decay_style="constant", log_local_norms=True)   # the step-1/2 variant
    faults = load_faults()
    names = args.faults.split(",") if args.faults else [n for n, f in faults.items() if f.plant.kind in CODE_KINDS]
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        from workbench.reference.config import synthetic_batches

        batches = work / "batches.npz"
        save_batches(batches, synthetic_batches(model, 2, args.micro_batch_size, 0))
        ckpt = reference_checkpoint(model, train, work)
        common = dict(model=model, train=train, batches=batches, micro_batch_size=args.micro_batch_size)
        torch_run = run(RunSpec("megatron", out=work / "torch", init=work / "init" / "megatron_checkpoint", **common))
        print(f"{'fault':20s} {'step':>4s} {'loss rel':>9s} {'top local-norm outlier':>44s} {'rel':>9s} "
              f"{'median':>9s} localnorm")
        for name in [None, *names]:
            ms_run = run(RunSpec("mindformers", out=work / (name or "clean"), init=ckpt, fault=name, jit=args.jit,
                                 **common))
            for step in (1, 2):
                found = compare(torch_run, ms_run, step)
                print(f"{name or 'clean':20s} {step:4d} {found['loss']:9.2e} {found['top']:>44s} "
                      f"{found['top_rel']:9.2e} {found['median']:9.2e} {found['verdict']}", flush=True)


if __name__ == "__main__":
    main()
