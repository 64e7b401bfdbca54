"""``verify_store``: is a capture complete, intact and sane enough to replay?

Checks, each a :class:`Problem` with the file it concerns (``workbench data verify`` lists them):

- ``missing``: a step number inside the captured range, an expected rank folder, a micro-batch or
  a required field file is absent;
- ``incomplete``: a step-and-rank folder without its manifest (the capture was killed there), or
  ranks of one step holding different micro-batch counts;
- ``manifest`` / ``corrupt``: a file not matching ``manifest.json`` (listing, shape, dtype,
  sha256), a truncated or unreadable ``.npy``;
- ``dtype`` / ``shape``: a dtype outside ``datasets/`` (non-integer tokens), fields of a
  micro-batch that disagree, a dtype or shape that changes between steps;
- ``token_range``: token or label ids outside [0, V) (they read dirty or out-of-range embedding
  rows), with the first offending position;
- ``label_shift``: labels that are not the tokens shifted by one (``labels[:, i] == tokens[:, i+1]``);
- ``loss_mask``: a step and rank with every position masked (warning).

Loss-mask statistics (fraction of positions with ``loss_mask == 0`` per step and rank) come back as
a DataFrame. Errors make ``ok`` False; warnings do not.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .store import CaptureError, CaptureStore, describe_numbers

PROBLEM_COLUMNS = ["severity", "check", "step", "rank", "micro_batch", "field", "position", "where", "message"]
LOSS_MASK_COLUMNS = ["step", "rank", "micro_batches", "positions", "masked", "fraction_masked"]


@dataclass
class Problem:
    severity: str  # error | warning
    check: str
    where: str
    message: str
    step: int | None = None
    rank: int | None = None
    micro_batch: int | None = None
    field: str | None = None
    position: tuple[int, ...] | None = None


@dataclass
class VerifyReport:
    path: Path
    layout: str
    has_manifest: bool
    steps: list[int]
    ranks: list[int]
    dp_world: int
    vocab_size: int | None
    micro_batches_read: int = 0
    dtypes: dict[str, str] = field(default_factory=dict)
    shapes: dict[str, list[int]] = field(default_factory=dict)
    id_range: tuple[int, int] | None = None
    problems: list[Problem] = field(default_factory=list)
    loss_mask_rows: list[tuple] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def problems_frame(self):
        import pandas as pd

        rows = [[p.severity, p.check, p.step, p.rank, p.micro_batch, p.field,
                 None if p.position is None else ",".join(map(str, p.position)), p.where, p.message]
                for p in self.problems]
        return pd.DataFrame(rows, columns=PROBLEM_COLUMNS, dtype=object)  # object: None renders empty

    def loss_mask_frame(self):
        import pandas as pd

        return pd.DataFrame(self.loss_mask_rows, columns=LOSS_MASK_COLUMNS)

    def summary(self) -> dict:
        fractions = [row[-1] for row in self.loss_mask_rows]
        return {
            "path": str(self.path), "layout": self.layout, "manifest": self.has_manifest,
            "steps": len(self.steps), "step_range": describe_numbers(self.steps), "dp_world": self.dp_world,
            "micro_batches_read": self.micro_batches_read, "dtypes": self.dtypes, "shapes": self.shapes,
            "id_range": list(self.id_range) if self.id_range else None, "vocab_size": self.vocab_size,
            "fraction_masked": {"min": min(fractions), "mean": float(np.mean(fractions)), "max": max(fractions)}
            if fractions else None,
            "errors": len(self.errors), "warnings": len(self.problems) - len(self.errors), "ok": self.ok,
        }


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def check_ids(name: str, ids: np.ndarray, vocab_size: int | None) -> tuple[str, tuple[int, ...]] | None:
    """Ids outside [0, V) (only negatives without V): message and first position, or None."""
    bad = ids < 0 if vocab_size is None else (ids < 0) | (ids >= vocab_size)
    if not bad.any():
        return None
    position = _first(bad)
    bound = "[0, ∞)" if vocab_size is None else f"[0, {vocab_size})"
    return (f"{int(bad.sum())} {name} id(s) outside {bound}; first {name}[{', '.join(map(str, position))}] = "
            f"{int(ids[position])}", position)


def check_shift(tokens: np.ndarray, labels: np.ndarray, loss_mask: np.ndarray | None):
    """Where ``labels[:, i] != tokens[:, i+1]``: message and first position, or None."""
    if tokens.shape != labels.shape or tokens.ndim != 2 or tokens.shape[1] < 2:
        return None
    bad = labels[:, :-1] != tokens[:, 1:]
    if not bad.any():
        return None
    row, col = _first(bad)
    masked = ""
    if loss_mask is not None and loss_mask.shape == tokens.shape:
        masked = f" ({int((bad & (loss_mask[:, :-1] == 0)).sum())} of them masked)"
    return (f"{int(bad.sum())} position(s) where labels are not tokens shifted by one{masked}; first "
            f"labels[{row}, {col}] = {int(labels[row, col])} but tokens[{row}, {col + 1}] = {int(tokens[row, col + 1])}",
            (row, col))


def verify_store(path: Path | str, vocab_size: int | None = None, sha256: bool = True, progress=None) -> VerifyReport:
    """Check every step, rank and micro-batch of a capture (see the module doc).

    ``progress(done, total)`` is called before each step (the CLI draws a bar on a terminal).
    """
    store = CaptureStore(path, fixed_shapes=False)
    report = VerifyReport(store.root, store.layout, store.has_manifest, store.steps, store.ranks, store.dp_world,
                          vocab_size)
    root = str(store.root)

    def add(problem: Problem) -> None:  # paths relative to the capture folder (named in the report)
        if problem.where.startswith(root + "/"):
            problem.where = problem.where[len(root) + 1:]
        report.problems.append(problem)

    missing = [s for s in range(store.steps[0], store.steps[-1] + 1) if s not in set(store.steps)]
    if missing:
        add(Problem("error", "missing", str(store.root / store._layout.step_name(missing[0])),
                    f"step folder(s) missing: {describe_numbers(missing)}", step=missing[0]))
    seen: dict[str, tuple] = {}
    low, high = None, None
    for done, step in enumerate(store.steps):
        if progress is not None:
            progress(done, len(store.steps))
        present = store.rank_numbers(step)
        for rank in sorted(set(present) - set(store.ranks)):
            add(Problem("warning", "missing", str(store.step_path(step) / store._layout.rank_name(rank)),
                        f"rank {rank} is outside the capture's ranks {describe_numbers(store.ranks)}", step, rank))
        counts = {}
        for rank in store.ranks:
            try:
                counts[rank] = store.micro_batches(step, rank)
            except CaptureError as error:
                add(Problem("error", error.check, error.where, error.problem, step, rank))
                continue
            positions = masked = 0
            for micro_batch in range(counts[rank]):
                try:
                    arrays = store.read(step, rank, micro_batch, verify=sha256)
                except CaptureError as error:
                    add(Problem("error", error.check, error.where, error.problem, step, rank, micro_batch))
                    continue
                report.micro_batches_read += 1
                for name, array in arrays.items():
                    where = str(store.path_of(step, rank, micro_batch, name))
                    first = seen.setdefault(name, (str(array.dtype), array.shape, step))
                    if str(array.dtype) != first[0]:
                        add(Problem("error", "dtype", where, f"dtype {array.dtype} differs from step {first[2]}'s "
                                    f"{first[0]}", step, rank, micro_batch, name))
                    elif array.shape != first[1]:
                        add(Problem("error", "shape", where, f"shape {list(array.shape)} differs from step {first[2]}'s "
                                    f"{list(first[1])} (shapes must not change between steps)", step, rank, micro_batch, name))
                for name in ("tokens", "labels"):
                    if name in arrays and arrays[name].size:
                        low = min(int(arrays[name].min()), low) if low is not None else int(arrays[name].min())
                        high = max(int(arrays[name].max()), high) if high is not None else int(arrays[name].max())
                        found = check_ids(name, arrays[name], vocab_size)
                        if found:
                            add(Problem("error", "token_range", str(store.path_of(step, rank, micro_batch, name)),
                                        found[0], step, rank, micro_batch, name, found[1]))
                if "tokens" in arrays and "labels" in arrays:
                    found = check_shift(arrays["tokens"], arrays["labels"], arrays.get("loss_mask"))
                    if found:
                        add(Problem("error", "label_shift", str(store.path_of(step, rank, micro_batch, "labels")),
                                    found[0], step, rank, micro_batch, "labels", found[1]))
                if "loss_mask" in arrays:
                    positions += arrays["loss_mask"].size
                    masked += int((arrays["loss_mask"] == 0).sum())
            if positions:
                report.loss_mask_rows.append((step, rank, counts[rank], positions, masked, masked / positions))
                if masked == positions:
                    add(Problem("warning", "loss_mask", str(store.rank_path(step, rank)),
                                "every position is masked: this step trains nothing on this rank", step, rank))
        if len(set(counts.values())) > 1:
            add(Problem("error", "incomplete", str(store.step_path(step)), "ranks hold different micro-batch counts ("
                        + ", ".join(f"rank {r}: {n}" for r, n in counts.items()) + ")", step))
    report.dtypes = {name: value[0] for name, value in seen.items()}
    report.shapes = {name: list(value[1]) for name, value in seen.items()}
    report.id_range = (low, high) if low is not None else None
    return report
