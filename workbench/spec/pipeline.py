"""A rule's chain of transforms: parts -> one physical tensor (``fuse``) and back (``split``).

Parts come flat, grouped by the index the physical name lacks (experts ``e`` when one tensor
holds all experts): ``[g0.gate, g0.up, g1.gate, g1.up, ...]``. Steps before ``stack`` run per
group, ``stack`` joins the groups, later steps and the final ``reshape`` see one tensor::

    parts (E groups x k)  --per-group steps-->  E arrays  --stack-->  [E, ...]  --steps/reshape-->  physical
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any, Mapping, Sequence, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from .expr import Dim, Expr
from .transforms import Shape, Stack, Transform


@dataclass(frozen=True)
class Pipeline:
    """A rule's named layout transforms, in order, with the reshape and the arguments they take."""

    steps: tuple[Transform, ...] = ()
    reshape: tuple[Expr, ...] | None = None
    args: Mapping[str, Expr] = field(default_factory=dict)

    # ------------------------------------------------------------------ arguments
    def evaluate_args(self, env: Mapping[str, int]) -> dict[str, int]:
        return {name: value.evaluate(env) for name, value in self.args.items()}

    def reshape_to(self, env: Mapping[str, int]) -> tuple[int, ...] | None:
        return None if self.reshape is None else tuple(d.evaluate(env) for d in self.reshape)

    # ------------------------------------------------------------------ shapes
    def trace(self, part_shapes: Sequence[Shape], groups: Dim, args: Mapping[str, Any]) -> list[list[Shape]]:
        """Shapes (of one group) entering each step, then the shape after the last step."""
        shapes = [tuple(s) for s in part_shapes]
        trace = []
        for step in self.steps:
            trace.append(shapes)
            if step.collapses:
                shapes = [step.stacked_shape(shapes[0], groups)]
            else:
                shapes = [step.shape(shapes, args)]
        trace.append(shapes)
        return trace

    def shape(self, part_shapes: Sequence[Shape], groups: Dim, args: Mapping[str, Any]) -> Shape:
        """Shape after the last step, before ``reshape`` (ints or symbolic ``Expr``)."""
        return self.trace(part_shapes, groups, args)[-1][0]

    # ------------------------------------------------------------------ data
    def fuse(self, parts: Sequence[np.ndarray], groups: int, args: Mapping[str, int],
             reshape: tuple[int, ...] | None = None) -> np.ndarray:
        width = len(parts) // groups
        state = [list(parts[g * width:(g + 1) * width]) for g in range(groups)]
        for step in self.steps:
            if step.collapses:
                state = [[step.fuse_groups([group[0] for group in state])]]
            else:
                state = [[step.fuse(group, args)] for group in state]
        array = state[0][0]
        return array.reshape(reshape) if reshape is not None else array

    def split(self, array: np.ndarray, part_shapes: Sequence[Shape], groups: int,
              args: Mapping[str, int]) -> list[np.ndarray]:
        trace = self.trace(part_shapes, groups, args)
        if self.reshape is not None:
            unshaped = trace[-1][0]
            if prod(unshaped) != array.size:
                raise ValueError(f"cannot view {array.shape} as {unshaped}")
            array = array.reshape(unshaped)
        state = [[array]]
        for step, shapes_in in zip(reversed(self.steps), reversed(trace[:-1]), strict=True):
            if step.collapses:
                state = [[piece] for piece in step.split_groups(state[0][0])]
            else:
                state = [step.split(group[0], shapes_in, args) for group in state]
        return [piece for group in state for piece in group]

    # ------------------------------------------------------------------ description
    @property
    def collapses(self) -> bool:
        return any(isinstance(step, Stack) for step in self.steps)

    def describe(self) -> str:
        names = [step.name for step in self.steps] or ["rename"]
        text = " -> ".join(names)
        if self.reshape is not None:
            text += " -> reshape[" + ", ".join(str(d) for d in self.reshape) + "]"
        return text
