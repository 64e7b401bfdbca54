"""Per-step artifacts both reference trainers write (numpy only)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..fileio import atomic_file


def save_grads(grads_dir: Path | str, step: int, grads: dict[str, np.ndarray]) -> Path:
    """``grads_dir/step_{step}/<parameter name>.npy`` in fp32 (raw, before clipping); atomic per file."""
    folder = Path(grads_dir) / f"step_{step}"
    folder.mkdir(parents=True, exist_ok=True)
    for name, grad in grads.items():
        with atomic_file(folder / f"{name}.npy") as handle:
            np.save(handle, np.asarray(grad, dtype=np.float32))
    return folder


def load_grads(grads_dir: Path | str, step: int) -> dict[str, np.ndarray]:
    """The arrays :func:`save_grads` wrote for ``step``, by parameter name."""
    folder = Path(grads_dir) / f"step_{step}"
    return {path.name[:-len(".npy")]: np.load(path) for path in sorted(folder.glob("*.npy"))}
