"""The candidate's own update: the MindSpore run's weights after the step, from the reference's gradients.

The method's step-2 check injects the reference's step-1 gradients into the MindSpore optimizer
(``MFTrainOneStepInjectCell``, :mod:`.mindformers_wrapper`) and saves the weights after that update.
``optim-check --observed FILE`` then explains THAT update instead of the reference's: the configured
optimizer applied to the same gradients must reproduce it; when it does not, the single-cause hypotheses
(:mod:`.hypotheses`) say what the MindSpore code does other than its configuration says (e.g. weight decay
on the norm weights). The file is read lazily (any checkpoint format :func:`~workbench.tensors.open.open_source`
reads), one tensor at a time, under the capture's target (MindFormers) names.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from ..tensors.base import SourceBase

SUBJECT = "the MindSpore run"
"""How the diagnosis names the observed update's owner (the hypotheses' ``subject``)."""


class ObservedUpdate(SourceBase):
    """Weights after the update, by name; every captured parameter must be there with its shape."""

    def __init__(self, path: Path | str, names: list[str], shapes: dict[str, tuple[int, ...]]):
        from ..tensors.open import open_source

        self.path = Path(path)
        self.source = open_source(self.path)
        try:
            self.metas = self.source.metas()
            self._check(names, shapes)
        except BaseException:
            self.close()
            raise

    def _check(self, names: list[str], shapes: dict[str, tuple[int, ...]]) -> None:
        missing = [name for name in names if name not in self.metas]
        if missing:
            raise InputError(str(self.path), f"no weights for {missing[0]!r} ({len(missing)} of {len(names)} captured "
                             f"parameters missing; this file holds e.g. {next(iter(self.metas), 'nothing')!r})",
                             "save the MindSpore network's weights after the injected update (MindFormers names)")
        for name in names:
            if tuple(self.metas[name].shape) != tuple(shapes[name]):
                raise InputError(f"{self.path} [{name}]", f"shape {list(self.metas[name].shape)}, the capture's "
                                 f"{list(shapes[name])}", "save the weights of the model the capture comes from")

    def read(self, name: str) -> np.ndarray:
        """Tensor ``name`` as fp32 (bf16/fp16 widened)."""
        from ..tensors.base import cast

        meta = self.metas[name]
        return np.ascontiguousarray(cast(np.asarray(self.source.read(name)), meta.dtype, "fp32"), dtype=np.float32)

    def close(self) -> None:
        self.source.close()

