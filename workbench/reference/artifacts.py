"""Per-step artifacts both reference trainers write (numpy only), in the step store
(``datasets/step_store.yaml``): ``grads_dir/step_{N}/grads/<parameter name>.npy`` + ``manifest.json``."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def save_grads(grads_dir: Path | str, step: int, grads: dict[str, np.ndarray], meta: dict | None = None) -> Path:
    """Gradients of update ``step`` in fp32 (raw, before clipping), through the one step-store writer."""
    from ..replay.step_store import save_step_tensors

    arrays = {name: np.asarray(grad, dtype=np.float32) for name, grad in grads.items()}
    return save_step_tensors(grads_dir, step, "grads", arrays, {"iteration": int(step), **(meta or {})})


def load_grads(grads_dir: Path | str, step: int) -> dict[str, np.ndarray]:
    """The arrays :func:`save_grads` wrote for ``step``, by parameter name (checked against the manifest)."""
    from ..replay.step_kinds import load_step_layout
    from ..tensors.step_store import StepStoreSource

    with StepStoreSource(load_step_layout().folder(Path(grads_dir), step, "grads")) as source:
        return {name: np.array(source.read(name)) for name in source.metas()}
