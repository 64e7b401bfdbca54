"""Compare two checkpoints of any supported formats, tensor by tensor, matched through the spec.

``diff_checkpoints(a, b)`` returns a tidy DataFrame (one row per tensor, A's names) with explicit
``only in A`` / ``only in B`` rows; nothing unmatched is ever called a match.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

COLUMNS = ["name", "status", "shape_a", "shape_b", "dtype_a", "dtype_b", "numel", "cosine", "l2_diff",
           "max_abs_diff", "rel_diff"]


CHUNK = 1 << 20          # elements compared at a time: a few 8 MiB float64 buffers, whatever the tensor size


@dataclass(frozen=True)
class Tolerance:
    atol: float = 0.0
    rtol: float = 0.0

    def __post_init__(self) -> None:
        for option, value in (("--atol", self.atol), ("--rtol", self.rtol)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InputError(option, f"{value!r} is not a finite number >= 0",
                                 f"pass a tolerance such as {option} 1e-6 (0, the default, means bit-exact)")

    @property
    def exact(self) -> bool:
        return self.atol == 0.0 and self.rtol == 0.0


def _as_float64(array: np.ndarray, dtype: str) -> np.ndarray:
    from ..tensors.base import bf16_bits_to_fp32

    return (bf16_bits_to_fp32(array) if dtype == "bf16" else np.asarray(array)).astype(np.float64, copy=False)


@dataclass
class _Sums:
    """Running reductions over chunks: dot products, the largest |a - b|, and the two equality verdicts."""

    xy: float = 0.0
    xx: float = 0.0
    yy: float = 0.0
    dd: float = 0.0
    max_abs: float = 0.0
    same_bits: bool = True
    within: bool = True

    def add(self, a: np.ndarray, dtype_a: str, b: np.ndarray, dtype_b: str, tolerance: Tolerance) -> None:
        if tolerance.exact and self.same_bits:
            self.same_bits = np.array_equal(a.view(np.uint8), b.view(np.uint8))
        x, y = _as_float64(a, dtype_a), _as_float64(b, dtype_b)
        difference = x - y
        self.xy, self.xx, self.yy = self.xy + float(x @ y), self.xx + float(x @ x), self.yy + float(y @ y)
        self.dd += float(difference @ difference)
        magnitude = np.abs(difference)
        if magnitude.size:
            self.max_abs = float(np.maximum(self.max_abs, magnitude.max()))      # NaN propagates, as before
        if not tolerance.exact and self.within:
            self.within = bool(np.all(magnitude <= tolerance.atol + tolerance.rtol * np.abs(y)))


def _flat_bytes_view(array: np.ndarray) -> np.ndarray:
    """C-order flat view (a copy only when ``array`` is not contiguous), so chunks have plain byte views."""
    return np.ascontiguousarray(array).reshape(-1)


def compare_tensors(name: str, a: np.ndarray, dtype_a: str, b: np.ndarray, dtype_b: str, tolerance: Tolerance) -> dict:
    """One row of the diff, computed in chunks of ``CHUNK`` elements: memory stays near the tensors themselves."""
    row = {"name": name, "shape_a": tuple(a.shape), "shape_b": tuple(b.shape), "dtype_a": dtype_a, "dtype_b": dtype_b,
           "numel": int(a.size)}
    if a.shape != b.shape:
        return {**row, "status": "shape mismatch"}
    flat_a, flat_b = _flat_bytes_view(a), _flat_bytes_view(b)
    sums = _Sums(same_bits=dtype_a == dtype_b)
    for start in range(0, max(flat_a.size, 1), CHUNK):
        sums.add(flat_a[start:start + CHUNK], dtype_a, flat_b[start:start + CHUNK], dtype_b, tolerance)
    norm_x, norm_y, l2 = np.sqrt(np.float64(sums.xx)), np.sqrt(np.float64(sums.yy)), float(np.sqrt(sums.dd))
    cosine = float(sums.xy / (norm_x * norm_y)) if norm_x and norm_y else (1.0 if norm_x == norm_y else 0.0)
    equal = sums.same_bits if tolerance.exact else sums.within
    return {**row, "status": "match" if equal else "mismatch", "cosine": cosine, "l2_diff": l2,
            "max_abs_diff": sums.max_abs,
            "rel_diff": l2 / norm_x if norm_x else (0.0 if l2 == 0 else float("inf"))}


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
