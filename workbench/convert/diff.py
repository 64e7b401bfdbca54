"""Compare two checkpoints of any supported formats, tensor by tensor, matched through the spec.

``diff_checkpoints(a, b)`` returns a tidy DataFrame (one row per tensor, A's names) with explicit
``only in A`` / ``only in B`` rows; nothing unmatched is ever called a match.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

COLUMNS = ["name", "status", "shape_a", "shape_b", "dtype_a", "dtype_b", "numel", "cosine", "l2_diff",
           "max_abs_diff", "rel_diff"]


@dataclass(frozen=True)
class Tolerance:
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def exact(self) -> bool:
        return self.atol == 0.0 and self.rtol == 0.0


def _as_float64(array: np.ndarray, dtype: str) -> np.ndarray:
    from ..tensors.base import bf16_bits_to_fp32

    return (bf16_bits_to_fp32(array) if dtype == "bf16" else np.asarray(array)).astype(np.float64, copy=False)


def compare_tensors(name: str, a: np.ndarray, dtype_a: str, b: np.ndarray, dtype_b: str, tolerance: Tolerance) -> dict:
    row = {"name": name, "shape_a": tuple(a.shape), "shape_b": tuple(b.shape), "dtype_a": dtype_a, "dtype_b": dtype_b,
           "numel": int(a.size)}
    if a.shape != b.shape:
        return {**row, "status": "shape mismatch"}
    x, y = _as_float64(a, dtype_a).ravel(), _as_float64(b, dtype_b).ravel()
    difference = x - y
    norm_x, norm_y, l2 = np.linalg.norm(x), np.linalg.norm(y), float(np.linalg.norm(difference))
    cosine = float(x @ y / (norm_x * norm_y)) if norm_x and norm_y else (1.0 if norm_x == norm_y else 0.0)
    max_abs = float(np.abs(difference).max()) if difference.size else 0.0
    if tolerance.exact:
        equal = dtype_a == dtype_b and np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                                                      np.ascontiguousarray(b).view(np.uint8))
    else:
        equal = bool(np.all(np.abs(difference) <= tolerance.atol + tolerance.rtol * np.abs(y)))
    return {**row, "status": "match" if equal else "mismatch", "cosine": cosine, "l2_diff": l2,
            "max_abs_diff": max_abs, "rel_diff": l2 / norm_x if norm_x else (0.0 if l2 == 0 else float("inf"))}


def diff_checkpoints(a: Path | str, b: Path | str, arch: str | None = None, config: Path | None = None,
                     tolerance: Tolerance = Tolerance()):
    """Tensor-by-tensor comparison of checkpoints ``a`` and ``b`` (B is mapped into A's format)."""
    import pandas as pd

    from .run import describe_source

    described_a = describe_source(a, arch, config=config)
    try:
        described_b = describe_source(b, arch or described_a.arch.name, config=config)
    except BaseException:
        described_a.source.close()
        raise
    with described_a.source as source_a, described_b.source as source_b:
        metas_a, metas_b = source_a.metas(), source_b.metas()
        mapped, unmapped = _b_in_a_names(described_a, described_b)
        rows = []
        for name, meta in metas_a.items():
            if name not in mapped:
                rows.append({"name": name, "status": "only in A", "shape_a": meta.shape, "dtype_a": meta.dtype,
                             "numel": int(np.prod(meta.shape))})
                continue
            target_meta, materialize = mapped[name]
            rows.append(compare_tensors(name, source_a.read(name), meta.dtype, materialize(), target_meta.dtype,
                                        tolerance))
        rows += [{"name": name, "status": "only in B", "shape_b": target_meta.shape, "dtype_b": target_meta.dtype}
                 for name, (target_meta, _) in mapped.items() if name not in metas_a]
        rows += [{"name": name, "status": "only in B", "shape_b": metas_b[name].shape, "dtype_b": metas_b[name].dtype}
                 for name in unmapped]
    return pd.DataFrame(rows, columns=COLUMNS)


def _b_in_a_names(described_a, described_b) -> tuple[dict, list[str]]:
    """B's tensors under A's names: {A name: (meta, reader)}, plus B names with no A counterpart.

    Same format: by name, no shape parameters needed. Otherwise B is mapped through the spec.
    """
    from .. import spec

    source_b = described_b.source
    if described_a.format == described_b.format:
        return {name: (meta, lambda name=name: source_b.read(name)) for name, meta in source_b.metas().items()}, []
    plan = spec.build_plan(source_b.metas(), described_b.format, described_a.format, described_b.arch,
                           described_b.params, allow_unmapped=True)
    return ({step.target.name: (step.target, lambda step=step: spec.materialize(step, source_b.read))
             for step in plan.steps}, list(plan.unmapped))


def summary(frame) -> dict:
    counts = frame["status"].value_counts().to_dict()
    return {"tensors": int(len(frame)), **{status: int(count) for status, count in counts.items()},
            "all_match": bool(len(frame)) and set(counts) == {"match"}}
