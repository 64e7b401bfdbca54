"""Named, invertible tensor transforms: how one physical tensor holds one or several logical ones.

Every transform has ``fuse(parts, args) -> array`` and ``split(array, part_shapes, args) -> parts``
(exact inverses, bit for bit, bf16 raw bits included: they only reshape, slice, concatenate,
transpose) and ``shape(part_shapes, args)``, which works on ints and on symbolic
:class:`~workbench.spec.expr.Expr` sizes alike. The layouts themselves (with their ASCII
sketches) live in :mod:`workbench.spec.layouts`.

=========================  =====  ==============================================================
name (YAML)                parts  layout
=========================  =====  ==============================================================
rename                     1      the tensor as it is (the default)
transpose                  1      ``x.T`` (last two axes)
concat0                    n      plain row blocks ``[a; b; ...]`` (Megatron ``linear_fc1`` = [gate; up])
plain_qkv_blocks           3      ``[Q; K; V]`` row blocks (MindFormers before 2.1 ``w_qkv``)
grouped_qkv                3      q/k/v grouped per kv group (Megatron ``linear_qkv``, MF ``w_qkv``)
row_interleave             2      rows ``[g0 u0 g1 u1 ...]`` (MF ``w_gate_hidden``, mcore ``linear_fc1``)
rope_permute               1      Meta interleaved-pair RoPE rows <-> rotate-half rows (arg ``heads``)
stack                      E      ``np.stack`` over the index missing from the physical name (experts)
vocab_pad                  1      rows padded with zeros to ``rows`` (or cut back to the part's rows)
stack_experts              E      alias of ``stack``: ``[E, out, in]`` (MF legacy ``ffn.w1``)
stack_experts_transposed   E      ``[transpose, stack]``: ``[E, in, out]`` (MF gmm, Megatron GroupedMLP)
=========================  =====  ==============================================================

A rule may chain transforms (``transform: [concat0, transpose, stack]``): steps before ``stack``
run once per expert, ``stack`` joins the experts, steps after it see the stacked tensor; the
rule's ``reshape`` is applied last (Megatron GroupedMLP ``weight1`` [E, h, 2F] viewed as [h, E·2F]).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from . import layouts
from ..tensors.base import cast
from .expr import Dim

Shape = tuple  # tuple[Dim, ...]


class Transform:
    """Base: 1 part in, 1 array out, unchanged."""

    name = "rename"
    arity: int | None = 1          # parts per group; None: any number >= 1
    collapses = False              # True only for ``stack``
    arg_names: tuple[str, ...] = ()
    arg_defaults: Mapping[str, str] = {}

    def shape(self, shapes: Sequence[Shape], args: Mapping[str, Any]) -> Shape:
        return tuple(shapes[0])

    def fuse(self, parts: Sequence[np.ndarray], args: Mapping[str, Any]) -> np.ndarray:
        return parts[0]

    def split(self, array: np.ndarray, shapes: Sequence[Shape], args: Mapping[str, Any]) -> list[np.ndarray]:
        return [array]


class Transpose(Transform):
    """``[out, in]`` <-> ``[in, out]`` (the last two axes)::

        part [a, b]   ->   physical [b, a]
    """

    name = "transpose"

    def shape(self, shapes, args):
        *lead, rows, cols = shapes[0]
        return (*lead, cols, rows)

    def fuse(self, parts, args):
        import numpy as np

        return np.swapaxes(parts[0], -1, -2)

    def split(self, array, shapes, args):
        import numpy as np

        return [np.swapaxes(array, -1, -2)]


class Concat0(Transform):
    """Plain row blocks, any number of parts (sketch: :func:`layouts.fuse_row_blocks`)::

        gate [F, h], up [F, h]   ->   [gate; up]  [2F, h]
    """

    name = "concat0"
    arity = None

    def shape(self, shapes, args):
        return (sum(s[0] for s in shapes), *shapes[0][1:])

    def fuse(self, parts, args):
        return layouts.fuse_row_blocks(list(parts))

    def split(self, array, shapes, args):
        return layouts.split_row_blocks(array, [int(s[0]) for s in shapes])


class PlainQkvBlocks(Concat0):
    """``[Q; K; V]`` as three plain row blocks (MindFormers before 2.1 ``w_qkv``)::

        rows [ q0 q1 q2 q3 | k0 k1 | v0 v1 ]        (nh=4, ng=2; each entry d rows)
    """

    name = "plain_qkv_blocks"
    arity = 3


class GroupedQkv(Transform):
    """q/k/v grouped per kv (query) group (sketch: :func:`layouts.split_grouped_qkv`)::

        rows [ q0 q1 k0 v0 | q2 q3 k1 v1 ]          (nh=4, ng=2; each entry d rows)
    """

    name = "grouped_qkv"
    arity = 3
    arg_names = ("heads", "groups")
    arg_defaults = {"heads": "num_heads", "groups": "num_kv_heads"}

    def shape(self, shapes, args):
        return (shapes[0][0] + shapes[1][0] + shapes[2][0], *shapes[0][1:])

    def fuse(self, parts, args):
        return layouts.fuse_grouped_qkv(*parts, int(args["heads"]), int(args["groups"]))

    def split(self, array, shapes, args):
        groups = int(args["groups"])
        return list(layouts.split_grouped_qkv(array, int(args["heads"]), groups, int(shapes[1][0]) // groups))


class RowInterleave(Transform):
    """Rows alternate between two parts (sketch: :func:`layouts.interleave_rows`)::

        gate [g0 g1 g2], up [u0 u1 u2]   ->   [g0 u0 g1 u1 g2 u2]
    """

    name = "row_interleave"
    arity = 2

    def shape(self, shapes, args):
        *lead, rows, cols = shapes[0]
        return (*lead, rows + shapes[1][-2], cols)

    def fuse(self, parts, args):
        return layouts.interleave_rows(parts[0], parts[1])

    def split(self, array, shapes, args):
        return list(layouts.deinterleave_rows(array))


class RopePermute(Transform):
    """Rotate-half rows (hub) <-> Meta interleaved-pair rows, per head (``args.heads``)::

        hub  [ x0 x1 x2 x3 | y0 y1 y2 y3 ]   <->   Meta [ x0 y0 x1 y1 x2 y2 x3 y3 ]
    """

    name = "rope_permute"
    arg_names = ("heads",)

    def fuse(self, parts, args):
        return layouts.rope_halves_to_pairs(parts[0], int(args["heads"]))

    def split(self, array, shapes, args):
        return [layouts.rope_pairs_to_halves(array, int(args["heads"]))]


class Stack(Transform):
    """One tensor per expert -> one stacked tensor (the only transform that joins groups)::

        expert 0 [a, b], expert 1 [a, b], ... expert E-1   ->   [E, a, b]
    """

    name = "stack"
    collapses = True

    def stacked_shape(self, shape: Shape, groups: Dim) -> Shape:
        return (groups, *shape)

    def fuse_groups(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        import numpy as np

        return np.stack(list(arrays))

    def split_groups(self, array: np.ndarray) -> list[np.ndarray]:
        return [array[index] for index in range(array.shape[0])]


class VocabPad(Transform):
    """Vocabulary rows padded with zero rows to ``args.rows`` (or cut back when smaller)::

        [V, h]  ->  [ rows 0..V-1 | zeros (rows-V) ]  [rows, h]

    ``split`` cuts (or pads) back to the part's row count, so pad-then-split is the identity;
    cutting drops rows, so split-then-pad only restores them when they were zero.
    """

    name = "vocab_pad"
    arg_names = ("rows",)

    def shape(self, shapes, args):
        return (args["rows"], *shapes[0][1:])

    def fuse(self, parts, args):
        return resize_rows(parts[0], int(args["rows"]))

    def split(self, array, shapes, args):
        return [resize_rows(array, int(shapes[0][0]))]


def resize_rows(array: np.ndarray, rows: int) -> np.ndarray:
    """``array`` with ``rows`` rows: extra rows are zeros (raw bits 0 = +0.0 in every dtype), or cut."""
    import numpy as np

    if rows <= array.shape[0]:
        return array[:rows]
    padding = np.zeros((rows - array.shape[0], *array.shape[1:]), dtype=array.dtype)
    return np.concatenate([array, padding], axis=0)


class DtypeCast:
    """A dtype cast as a transform (``workbench.tensors.base.cast``; bf16 as raw bits).

    ``split`` casts back: exact for widening casts (bf16/fp16 -> fp32), rounding otherwise.
    """

    name = "cast"

    def __init__(self, source: str, target: str):
        self.source, self.target = source, target

    def fuse(self, parts: Sequence[np.ndarray], args: Mapping[str, Any] | None = None) -> np.ndarray:
        return cast(parts[0], self.source, self.target)

    def split(self, array: np.ndarray, shapes: Sequence[Shape] = (), args: Mapping[str, Any] | None = None):
        return [cast(array, self.target, self.source)]


_PRIMITIVES = {t.name: t for t in (Transform(), Transpose(), Concat0(), PlainQkvBlocks(), GroupedQkv(),
                                   RowInterleave(), RopePermute(), Stack(), VocabPad())}
_ALIASES = {"stack_experts": ("stack",), "stack_experts_transposed": ("transpose", "stack")}
TRANSFORM_NAMES = tuple(sorted((*_PRIMITIVES, *_ALIASES)))


def expand(names: Sequence[str]) -> tuple[Transform, ...]:
    """Transform names (aliases expanded) -> transform objects; KeyError names an unknown one."""
    steps: list[Transform] = []
    for name in names:
        if name in _ALIASES:
            steps += [_PRIMITIVES[alias] for alias in _ALIASES[name]]
        elif name in _PRIMITIVES:
            steps.append(_PRIMITIVES[name])
        else:
            raise KeyError(name)
    return tuple(step for step in steps if step.name != "rename" or len(steps) == 1)
