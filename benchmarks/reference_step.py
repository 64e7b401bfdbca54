"""Time one training step of the default tiny reference model on each side (target < 0.5 s).

Prints the median step time after compilation/warm-up for the torch (Megatron-style) and the
MindSpore (MindFormers-style, graph mode and PyNative) trainers, the MindSpore compile time, and
each against a plain numpy forward pass of the same model measured in the same run.

    .venv/bin/python benchmarks/reference_step.py [--steps 8]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from workbench.reference.config import ModelConfig, PrecisionConfig, TrainConfig, synthetic_batches

TARGET_SECONDS = 0.5


def numpy_forward_seconds(model: ModelConfig, tokens: np.ndarray, repeats: int) -> float:
    """A bare numpy forward (embedding, matmuls of every layer, logits): the floor to compare against."""
    rng = np.random.default_rng(0)
    h, f, v = model.hidden_size, model.ffn_hidden_size, model.vocab_size
    weights = [rng.standard_normal(shape).astype(np.float32) for shape in
               [(v, h)] + [(h, 3 * h), (h, h), (h, 2 * f), (f, h)] * model.num_layers + [(h, v)]]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        x = weights[0][tokens]
        for layer in range(model.num_layers):
            qkv, proj, fc1, fc2 = weights[1 + 4 * layer: 5 + 4 * layer]
            x = x + (x @ qkv)[..., :h] @ proj
            x = x + np.maximum(x @ fc1, 0)[..., :f] @ fc2
        _ = x @ weights[-1]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def torch_step_seconds(model: ModelConfig, batches: list) -> float:
    from workbench.reference import torch_model, torch_train

    trainer = torch_train.MegatronStyleTrainer(torch_model.build_model(model, PrecisionConfig(), seed=0), TrainConfig(steps=len(batches)))
    trainer.step(batches[0])
    return statistics.median(trainer.step(batch).elapsed_s for batch in batches[1:])


def mindspore_step_seconds(model: ModelConfig, batches: list, jit: bool) -> tuple[float, float]:
    from workbench.reference import ms_model, ms_train

    trainer = ms_train.MindFormersStyleTrainer(ms_model.build_model(model, seed=0), TrainConfig(steps=len(batches)),
                                               jit=jit)
    inputs = [ms_train.as_model_inputs(batch) for batch in batches]
    first = trainer.step(*inputs[0]).elapsed_s
    return first, statistics.median(trainer.step(*batch).elapsed_s for batch in inputs[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    model = ModelConfig()
    batches = synthetic_batches(model, args.steps)
    floor = numpy_forward_seconds(model, batches[0]["tokens"], args.steps)
    rows = {"torch (Megatron-style)": torch_step_seconds(model, batches)}
    compile_seconds, rows["MindSpore graph mode"] = mindspore_step_seconds(model, batches, jit=True)
    _, rows["MindSpore PyNative"] = mindspore_step_seconds(model, batches, jit=False)
    print(f"default tiny model ({model.num_layers} layers, hidden {model.hidden_size}), median of {args.steps - 1} steps")
    print(f"  numpy forward only (floor)          {floor * 1e3:8.2f} ms")
    for name, seconds in rows.items():
        verdict = "meets" if seconds < TARGET_SECONDS else "MISSES"
        print(f"  {name:36s}{seconds * 1e3:8.2f} ms  {seconds / floor:7.1f}x the floor  {verdict} < {TARGET_SECONDS} s")
    print(f"  MindSpore first step (graph compile) {compile_seconds:7.2f} s")


if __name__ == "__main__":
    main()
