"""Names for nameless per-parameter norms.

MindFormers' ``local_norm`` block and the Megatron local-norm patch print one value per
parameter in OPTIMIZER order, without names. Names come, best first, from

1. the ``Param groups = {json}`` block MindFormers logs at start-up (the log reader fills them);
2. a checkpoint of the same model (its tensors in network order) put in the optimizer's order.

The optimizer order is the same rule on both sides: the parameters that take weight decay
first, then ``*.bias`` and every 1-D parameter (no weight decay), each group in network order.
Megatron: ``_get_param_groups`` (NVIDIA/Megatron-LM:megatron/core/optimizer/__init__.py) keys
groups by their overrides, sorted with the no-override (decayed) group first; the wd_mult=0 key
matches ``*.bias`` and ``len(param.shape) == 1``. MindFormers: the ``weight_decay`` group before
``no_weight_decay`` (``.bias`` and 1-D), first-seen order over the trainable parameters (the
``Param groups`` block it logs shows it). MoE expert-parallel parameters form further groups in
Megatron (noted, not modelled).

Every attachment is validated: the count, and each position's element count where the log
printed sizes (``norm_size``). A disagreement names the first position that disagrees; names
are never guessed.
"""
from __future__ import annotations

from math import prod
from pathlib import Path

import numpy as np

from ..errors import InputError
from .schema import LogSeries
from .tables import set_texts


def takes_weight_decay(name: str, shape: tuple[int, ...]) -> bool:
    return not (name.endswith(".bias") or len(shape) == 1)


def optimizer_order(named_shapes: list[tuple[str, tuple[int, ...]]]) -> list[tuple[str, int]]:
    """(name, element count) in the optimizer's order, from (name, shape) in network order."""
    decayed = [(n, prod(s)) for n, s in named_shapes if takes_weight_decay(n, s)]
    rest = [(n, prod(s)) for n, s in named_shapes if not takes_weight_decay(n, s)]
    return decayed + rest


def names_from_checkpoint(path: Path | str) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every tensor of a checkpoint, in the order the file holds them."""
    from ..tensors.open import open_source

    with open_source(path) as source:
        return [(meta.name, tuple(meta.shape)) for meta in source.metas().values()]


def attach_names(series: LogSeries, order: list[tuple[str, int]], origin: str) -> LogSeries:
    """``series`` with ``param`` filled from ``order`` (optimizer order), validated per step."""
    table = series.local_norms.copy()
    at, names = [], []                      # row positions and the names they get
    for (_rank, step), rows in table.groupby(["rank", "step"], sort=False):
        positions = rows["position"].tolist()
        if len(positions) != len(order):
            raise InputError(series.source, f"step {step} has {len(positions)} local norms but {origin} lists "
                             f"{len(order)} trainable parameters", "pass the checkpoint of the same model and parallel layout")
        for position, numel in zip(positions, rows["numel"].tolist(), strict=True):
            name, expected = order[position]
            if numel >= 0 and numel != expected:
                raise InputError(series.source, f"step {step} position {position}: the log says {numel} elements, "
                                 f"{origin} puts {name} ({expected} elements) there",
                                 "the order differs: pass the checkpoint of this run, or the Param groups block")
        at.append(table.index.get_indexer(rows.index))
        names += [order[p][0] for p in positions]
    if names:
        table["param"] = set_texts(table["param"], np.concatenate(at), names)
    named = LogSeries(series.source, series.format, series.series, table, dict(series.facts),
                      series.notes + [f"parameter names from {origin} (optimizer order: decayed first)"],
                      [name for name, _ in order])
    return named
