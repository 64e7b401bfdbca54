"""``python -m workbench.demo.dump_worker SPEC.json``: one msprobe dump of step 1 in a process of its own.

SPEC (written by :func:`dump_spec`): the side, the model and precision configs, the checkpoint the run
started from (Megatron legacy folder or MindSpore .ckpt), the batches file and the fault planted on the
MindSpore side. The torch side dumps ``loss_fn(model(tokens), labels)``; the MindSpore side is called with
MindFormers' ``input_ids`` = tokens followed by the last label (the legacy replay contract).
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np


def dump_spec(path: Path, side: str, model, train, weights: Path, batches: Path, out: Path,
              fault: str | None = None) -> Path:
    spec = {"side": side, "model": asdict(model), "precision": asdict(train.precision), "seed": train.seed,
            "weights": str(weights), "batches": str(batches), "out": str(out), "fault": fault}
    path.write_text(json.dumps(spec))
    return path


def _configs(spec: dict):
    from ..reference.config import ModelConfig, PrecisionConfig, TrainConfig

    model = ModelConfig(**spec["model"])
    return model, TrainConfig(precision=PrecisionConfig(**spec["precision"]), seed=spec["seed"])


def _first_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    with np.load(path) as data:
        return np.asarray(data["tokens"][0]), np.asarray(data["labels"][0])


def dump_torch_side(spec: dict) -> None:
    from ..reference import torch_model, torch_train
    from ..reference.runner import megatron_checkpoint_weights
    from .msprobe_dump import dump_torch

    model, train = _configs(spec)
    net = torch_model.build_model(model, train.precision, seed=train.seed)
    torch_train.load_numpy_weights(net, megatron_checkpoint_weights(Path(spec["weights"])))
    tokens, labels = _first_batch(spec["batches"])
    dump_torch(net, tokens, labels, Path(spec["out"]))


def dump_mindspore_side(spec: dict) -> None:
    import mindspore as ms

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    from ..reference import ms_model
    from ..reference.runner import mindspore_checkpoint_weights
    from .msprobe_dump import dump_mindspore

    from .faults import plant_in_code
    from .run import mindspore_side

    model, train = _configs(spec)
    model, code_fault = mindspore_side(spec["fault"], model)
    faults = ms_model.NO_FAULTS
    if code_fault is not None:
        model, train, faults, _ = plant_in_code(code_fault, model, train)
    net = ms_model.build_model(model, train.precision, seed=train.seed, faults=faults)
    ms_model.set_weights(net, mindspore_checkpoint_weights(Path(spec["weights"])))
    tokens, labels = _first_batch(spec["batches"])
    dump_mindspore(net, np.concatenate([tokens, labels[:, -1:]], axis=1), Path(spec["out"]))


if __name__ == "__main__":
    loaded = json.loads(Path(sys.argv[1]).read_text())
    (dump_torch_side if loaded["side"] == "megatron" else dump_mindspore_side)(loaded)
