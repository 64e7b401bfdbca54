"""The demo's data path, as on a cluster: the reference captures its batches (Megatron's capture hook), the
MindSpore side replays that capture and records what it trained on.

    reference = capture_reference(batches, plan_path("megatron_batches"))       # BatchCapture, like Megatron
    replayed = replay_for_mindspore(reference, plan_path("mindformers_batches"), fault)

``replay_for_mindspore`` reads the capture back through the replay reader (``regrouped_batches``: Megatron's
order, one data-parallel rank), plants a replay fault when given, and records the batches the MindSpore side
will train on with the same capture writer, so ``workbench data diff`` compares what each side really saw.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..replay.capture import BatchCapture

FIELDS = ("tokens", "labels", "loss_mask")


def record(batches: list[dict[str, np.ndarray]], folder: Path) -> Path:
    """Write ``batches`` (one micro-batch per step) as a capture folder; step k is Megatron's iteration k+1."""
    capture = BatchCapture(folder, dp_rank=0, dp_world=1, micro_batches=1)
    for step, batch in enumerate(batches):
        capture.record(step, *(batch[name] for name in FIELDS))
    capture.finalize()
    return Path(folder)


def replayed(folder: Path) -> list[dict[str, np.ndarray]]:
    """The batches of a capture in Megatron's order, through the replay reader (one rank, every step)."""
    from ..replay.regroup import regrouped_batches

    steps: dict[int, dict[str, np.ndarray]] = {}
    for step, _micro_batch, batch in regrouped_batches(Path(folder)):
        steps.setdefault(step, {name: np.asarray(batch[name]) for name in FIELDS})
    return [steps[step] for step in sorted(steps)]


def replay_for_mindspore(reference: Path, folder: Path, fault=None) -> list[dict[str, np.ndarray]]:
    """What the MindSpore side trains on: the replayed capture (``fault`` planted), recorded into ``folder``."""
    batches = replayed(reference)
    if fault is not None and fault.plant.kind == "replay":
        from .faults import plant_replay_fault

        batches = plant_replay_fault(batches, fault)
    record(batches, folder)
    return batches


def save_npz(batches: list[dict[str, np.ndarray]], path: Path) -> Path:
    """The batches as the reference runner's ``--batches`` file ([steps, b, s] per field)."""
    from ..reference.runner import save_batches

    save_batches(path, batches)
    return path
