"""The fused-tensor layouts of the reference models: one named transform (and its inverse) each.

=====================  ==========================================  ===================================
layout                 used by                                      transforms
=====================  ==========================================  ===================================
grouped q/k/v          Megatron ``linear_qkv``, MindFormers         :func:`split_grouped_qkv`,
                       ``w_qkv`` (weights and biases)               :func:`fuse_grouped_qkv`
gate/up blocks         Megatron ``linear_fc1`` = ``[gate; up]``     :func:`split_gate_up`,
                                                                    :func:`fuse_gate_up`
gate/up row-           MindFormers ``w_gate_hidden``                :func:`deinterleave_rows`,
interleaved            ``[g0, u0, g1, u1, ...]``                    :func:`interleave_rows`
=====================  ==========================================  ===================================

Every transform takes numpy arrays and torch tensors alike (reshape, slicing, concatenation) and
returns the same kind; torch is imported only when a torch tensor is concatenated.

Each transform that concatenates or interleaves takes ``axis``: the axis the parts are fused on.
Weights are fused on their rows (axis 0; ``interleave_rows`` on axis -2, so stacked experts too);
activations (a dumped ``linear_qkv`` output ``[s, b, rows]``) on the last axis (``axis=-1``).
The sketches below draw the fused axis as "rows".
"""
from __future__ import annotations

from typing import Any


def _concat(parts: list, axis: int) -> Any:
    """``np.concatenate`` for numpy arrays, ``torch.cat`` for torch tensors."""
    import numpy as np

    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=axis)
    import torch

    return torch.cat(parts, dim=axis)


def _to_front(array: Any, axis: int) -> Any:
    """``array`` with ``axis`` moved to position 0 (a view; numpy and torch alike)."""
    import numpy as np

    if axis in (0, -array.ndim):
        return array
    return np.moveaxis(array, axis, 0) if isinstance(array, np.ndarray) else array.movedim(axis, 0)


def _from_front(array: Any, axis: int) -> Any:
    """Inverse of :func:`_to_front`: axis 0 moved back to ``axis``."""
    import numpy as np

    if axis in (0, -array.ndim):
        return array
    return np.moveaxis(array, 0, axis) if isinstance(array, np.ndarray) else array.movedim(0, axis)


def _copy(array: Any) -> Any:
    """A copy with its own (contiguous) storage: ``.copy()`` in numpy, ``.clone()`` in torch."""
    import numpy as np

    return array.copy() if isinstance(array, np.ndarray) else array.clone()


# ----------------------------------------------------------------------------- grouped q/k/v

def _group_sizes(rows: int, num_heads: int, num_groups: int, head_dim: int | None) -> tuple[int, int]:
    """(query heads per group, head dim); head_dim defaults to what ``rows`` implies."""
    per_group = num_heads // num_groups
    return per_group, head_dim if head_dim is not None else rows // num_groups // (per_group + 2)


def split_grouped_qkv(fused: Any, num_heads: int, num_groups: int, head_dim: int | None = None, axis: int = 0):
    """Grouped q/k/v (weight [rows, h] or bias [rows]) -> ``(q [nh·d, ...], k [ng·d, ...], v [ng·d, ...])``.

    Megatron ``linear_qkv`` and MindFormers ``w_qkv`` share this layout: rows grouped per query
    (= kv) group g, ng groups of nh/ng query heads each, head dim d (inferred when omitted)::

        row block  |<-- (nh/ng)·d rows -->|<- d ->|<- d ->|
        group 0    | q_0 q_1 .. q_(nh/ng-1) |  k_0  |  v_0  |
        group 1    | q_(nh/ng) ..           |  k_1  |  v_1  |
        ...        |                        |       |       |
        group ng-1 | .. q_(nh-1)            | k_ng-1| v_ng-1|

        e.g. nh=4, ng=2:  rows [ q0 q1 k0 v0 | q2 q3 k1 v1 ]   (each entry d rows)

    q keeps the heads in order, k and v the groups in order. ``axis=-1`` splits an activation
    ``[s, b, rows]`` the same way along its last axis.
    """
    fused = _to_front(fused, axis)
    per_group, d = _group_sizes(fused.shape[0], num_heads, num_groups, head_dim)
    rest = tuple(fused.shape[1:])
    grouped = fused.reshape(num_groups, (per_group + 2) * d, *rest)
    q_end, k_end = per_group * d, (per_group + 1) * d
    q = grouped[:, :q_end].reshape(num_heads * d, *rest)
    k = grouped[:, q_end:k_end].reshape(num_groups * d, *rest)
    v = grouped[:, k_end:].reshape(num_groups * d, *rest)
    return _from_front(q, axis), _from_front(k, axis), _from_front(v, axis)


def fuse_grouped_qkv(q: Any, k: Any, v: Any, num_heads: int, num_groups: int, head_dim: int | None = None,
                     axis: int = 0) -> Any:
    """Inverse of :func:`split_grouped_qkv` (layout sketch there)::

        q: [q0 q1 | q2 q3]   k: [k0 | k1]   v: [v0 | v1]      (nh=4, ng=2)
        ->  rows [ q0 q1 k0 v0 | q2 q3 k1 v1 ]                 group g = [q(nh/ng·d); k_g(d); v_g(d)]
    """
    q, k, v = _to_front(q, axis), _to_front(k, axis), _to_front(v, axis)
    per_group = num_heads // num_groups
    d = head_dim if head_dim is not None else k.shape[0] // num_groups
    rest = tuple(q.shape[1:])
    parts = [q.reshape(num_groups, per_group * d, *rest), k.reshape(num_groups, d, *rest),
             v.reshape(num_groups, d, *rest)]
    return _from_front(_concat(parts, 1).reshape(num_groups * (per_group + 2) * d, *rest), axis)


# ----------------------------------------------------------------------------- gate/up blocks

def split_gate_up(fused: Any, axis: int = 0) -> tuple[Any, Any]:
    """Megatron ``linear_fc1`` [2F, h] -> ``(gate [F, h], up [F, h])``: two plain row blocks::

        rows 0 .. F-1   | gate (w1 / gate_proj) |
        rows F .. 2F-1  | up   (w3 / up_proj)   |
    """
    gate, up = split_row_blocks(fused, [fused.shape[axis] // 2] * 2, axis)
    return gate, up


def fuse_gate_up(gate: Any, up: Any, axis: int = 0) -> Any:
    """Inverse of :func:`split_gate_up`: ``cat([gate; up], axis)``."""
    return _concat([gate, up], axis)


# ----------------------------------------------------------------------------- row interleave

def interleave_rows(gate: Any, up: Any, axis: int = -2) -> Any:
    """MindFormers ``w_gate_hidden``: rows alternate gate/up (axis -2, so stacked experts too;
    ``axis=-1`` for an activation ``[s, b, 2F]``)::

        gate: [g0 g1 g2]   up: [u0 u1 u2]   ->   w_gate_hidden rows: [g0 u0 g1 u1 g2 u2]
    """
    gate, up = _to_front(gate, axis), _to_front(up, axis)
    pairs = _concat([gate[:, None], up[:, None]], 1)                   # [F, 2, ...]
    return _from_front(pairs.reshape(2 * gate.shape[0], *gate.shape[1:]), axis)


def deinterleave_rows(fused: Any, axis: int = -2) -> tuple[Any, Any]:
    """Inverse of :func:`interleave_rows`: ``[g0 u0 g1 u1 ...]`` -> (gate, up), each a fresh copy."""
    front = _to_front(fused, axis)
    return _copy(_from_front(front[0::2], axis)), _copy(_from_front(front[1::2], axis))


# ----------------------------------------------------------------------------- plain row blocks

def fuse_row_blocks(parts: list, axis: int = 0) -> Any:
    """Plain row blocks ``cat(parts, 0)``: older MindFormers ``w_qkv`` = ``[Q; K; V]``, Megatron ``linear_fc1``::

        parts: Q [nh·d, h], K [ng·d, h], V [ng·d, h]
        ->  rows [ Q (nh·d rows) | K (ng·d rows) | V (ng·d rows) ]       (no per-group interleave)
    """
    return _concat(list(parts), axis)


def split_row_blocks(fused: Any, rows: list[int], axis: int = 0) -> list:
    """Inverse of :func:`fuse_row_blocks`: consecutive blocks of ``rows[k]`` rows (along ``axis``) each."""
    front = _to_front(fused, axis)
    if sum(rows) != front.shape[0]:
        raise ValueError(f"row blocks {rows} do not add up to {front.shape[0]} rows")
    out, start = [], 0
    for count in rows:
        out.append(_from_front(front[start:start + count], axis))
        start += count
    return out


# ----------------------------------------------------------------------------- RoPE q/k permute

def rope_halves_to_pairs(weight: Any, num_heads: int) -> Any:
    """HF / Megatron (rotate-half) q or k rows -> Meta (interleaved pairs) rows, per head::

        head rows, HF:    [ x0 x1 x2 x3 | y0 y1 y2 y3 ]      first half x, second half y (d = 8)
        head rows, Meta:  [ x0 y0 x1 y1 x2 y2 x3 y3 ]        rotation pairs adjacent

    The inverse of ``permute`` in HF ``convert_llama_weights_to_hf.py``; ``num_heads`` is the
    query heads for q and the kv heads for k. Weights [n·d, h] and biases [n·d] alike.
    """
    rest = tuple(weight.shape[1:])
    half = weight.shape[0] // num_heads // 2
    return _copy(weight.reshape(num_heads, 2, half, *rest).swapaxes(1, 2)).reshape(weight.shape)


def rope_pairs_to_halves(weight: Any, num_heads: int) -> Any:
    """Inverse of :func:`rope_halves_to_pairs` (Meta -> HF, HF's ``permute``)::

        [ x0 y0 x1 y1 x2 y2 x3 y3 ]  ->  [ x0 x1 x2 x3 | y0 y1 y2 y3 ]
    """
    rest = tuple(weight.shape[1:])
    half = weight.shape[0] // num_heads // 2
    return _copy(weight.reshape(num_heads, half, 2, *rest).swapaxes(1, 2)).reshape(weight.shape)
