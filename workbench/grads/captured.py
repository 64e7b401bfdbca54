"""One captured training step, read under another framework's parameter names, one tensor at a time.

::

    ROOT/step_{N}/grads/           required: the update's gradients (torch / Megatron names)
    ROOT/step_{N}/params_before/   the weights the optimizer starts from
    ROOT/step_{N}/params_after/    the weights after the step
    ROOT/step_{N}/exp_avg/ exp_avg_sq/          Adam's moments after the step
    ROOT/step_{N-1}/exp_avg/ exp_avg_sq/        Adam's moments before it (absent: a fresh optimizer)

The grads folder settles the architecture, the source format and the shape parameters
(:func:`workbench.convert.run.describe_source`), and ONE spec plan maps it to ``target`` (``mindformers``
by default): every other kind holds the same names and shapes (checked when opened, each mismatch named
with its folder and parameter), so the same plan serves them all. Fused tensors (Megatron
``linear_qkv``, ``linear_fc1``) are split exactly as weights are: the transforms are linear in the values.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..tensors.base import SourceBase

GRADS = "grads"
BEFORE = "params_before"
AFTER = "params_after"
STATE_KINDS = ("exp_avg", "exp_avg_sq")
OPTIONAL_KINDS = (BEFORE, AFTER, *STATE_KINDS)
PREVIOUS = "previous_"          # key prefix of the step N-1 state kinds: previous_exp_avg, previous_exp_avg_sq


@dataclass
class CapturedStep(SourceBase):
    """Step ``step`` of a capture under ``target_format`` names (open with :func:`open_captured_step`)."""

    root: Path
    step: int
    arch: str
    source_format: str
    target_format: str
    meta: dict
    folders: dict[str, Path]
    _sources: dict = field(repr=False)
    _steps: dict = field(repr=False)                  # target name -> plan step
    _stack: ExitStack = field(repr=False)

    @property
    def names(self) -> list[str]:
        """Target names in plan order (the target format's order)."""
        return list(self._steps)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._steps[name].target.shape)

    def has(self, kind: str) -> bool:
        return kind in self._sources

    @property
    def loss_scale(self) -> float:
        """The loss scale the captured gradients carry (divide by it), 1.0 when the capture records none."""
        scale = self.meta.get("loss_scale")
        if scale is None:
            return 1.0
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not np.isfinite(scale) or scale <= 0:
            raise InputError(f"{self.folders[GRADS] / 'manifest.json'}: loss_scale", f"expected a positive number, "
                             f"found {scale!r}", "capture again with loss_scale=optimizer.get_loss_scale().item() "
                             "(1.0 without scaling)")
        return float(scale)

    def source_names(self, name: str) -> tuple[str, ...]:
        """The captured (source-format) tensors a target tensor is built from."""
        return tuple(self._steps[name].sources)

    def read(self, kind: str, name: str) -> np.ndarray:
        """Tensor ``name`` (target names) of ``kind`` (or ``previous_exp_avg`` ...) as fp32, materialised alone."""
        from .. import spec

        if kind not in self._sources:
            raise KeyError(f"capture {self.root}: step {self.step} has no {kind!r}")
        array = spec.materialize(self._steps[name], self._sources[kind].read)
        return np.ascontiguousarray(array, dtype=np.float32)

    def logical(self, name: str) -> str:
        """The spec's logical name of a target tensor (``embed``, ``layers.0.attn.q``, ``lm_head``)."""
        parts = self._steps[name].parts
        return parts[0].logical if parts else name

    def where(self, kind: str, name: str) -> str:
        """The capture file(s) behind ``name`` of ``kind``, for messages."""
        folder = self.folders.get(kind, self.root)
        return ", ".join(str(folder / f"{source}.npy") for source in self.source_names(name))

    def close(self) -> None:
        self._stack.close()



def open_captured_step(root: Path | str, step: int, *, arch: str | None = None, config: Path | None = None,
                       target: str = "mindformers", kinds: tuple[str, ...] = OPTIONAL_KINDS) -> CapturedStep:
    """Open step ``step`` of the capture at ``root``: its grads (required) and whichever ``kinds`` exist."""
    from ..replay.step_kinds import load_step_layout

    root, layout = Path(root), load_step_layout()
    grads_folder = layout.folder(root, step, GRADS)
    if not grads_folder.is_dir():
        raise InputError(str(grads_folder), f"no gradients for update {step} in this capture",
                         "capture them with workbench.replay.grad_capture (docs/step-store.md), or pick the "
                         "update with --step")
    stack = ExitStack()
    try:
        folders = {kind: layout.folder(root, step, kind) for kind in kinds}
        if step > 1:
            folders.update({PREVIOUS + kind: layout.folder(root, step - 1, kind) for kind in STATE_KINDS})
        folders = {GRADS: grads_folder, **{kind: path for kind, path in folders.items() if path.is_dir()}}
        return _open(root, step, folders, arch, config, target, stack)
    except BaseException:
        stack.close()
        raise


def _open(root: Path, step: int, folders: dict[str, Path], arch, config, target: str, stack: ExitStack) -> CapturedStep:
    from .. import spec
    from ..convert.run import describe_source
    from ..tensors.open import open_source

    described = describe_source(folders[GRADS], arch, config=config)
    grads = stack.enter_context(described.source)
    try:
        plan = spec.build_plan(grads.metas(), described.format, target, described.arch, described.params)
    except InputError as error:      # the plan names the tensor; say which capture folder it is missing from
        raise InputError(f"{folders[GRADS]}: {error.where}", error.problem, error.fix) from None
    sources = {GRADS: grads}
    for kind, folder in folders.items():
        if kind != GRADS:
            sources[kind] = stack.enter_context(open_source(folder))
            _check_same_tensors(folder, sources[kind].metas(), grads.metas(), folders[GRADS])
    return CapturedStep(root, step, described.arch.name, described.format, target, dict(grads.meta), folders,
                        sources, {s.target.name: s for s in plan.steps}, stack)


def _check_same_tensors(folder: Path, metas: dict, grads_metas: dict, grads_folder: Path) -> None:
    """Every kind holds the gradients' names and shapes: a missing or reshaped tensor is named."""
    for name, meta in grads_metas.items():
        if name not in metas:
            raise InputError(str(folder / f"{name}.npy"), f"parameter {name!r} is in {grads_folder} but not here",
                             "capture this step again with every kind written for the same parameters")
        if tuple(metas[name].shape) != tuple(meta.shape):
            raise InputError(str(folder / f"{name}.npy"), f"parameter {name!r} has shape {tuple(metas[name].shape)}, "
                             f"its gradient {tuple(meta.shape)}", "capture this step again from one run")
    extra = [name for name in metas if name not in grads_metas]
    if extra:
        raise InputError(str(folder / f"{extra[0]}.npy"), f"parameter {extra[0]!r} has no gradient in {grads_folder} "
                         f"({len(extra)} such)", "capture this step again with every kind written for the same parameters")
