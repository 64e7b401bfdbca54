"""Index variables and layer sets, as ``converters/_hub.yaml`` declares them (``indices:``, ``layer_sets:``).

A layer set says which layers hold a hub tensor (its ``layers:``)::

    moe:   {if: num_experts, from: first_dense_layers, every: moe_layer_freq}
           -> layers i with num_experts > 0, i >= first_dense_layers and i % moe_layer_freq == 0
    dense: {not: moe}             -> the other layers
    mtp:   {beyond: mtp_layers}   -> num_layers .. num_layers + mtp_layers - 1

A parameter that is 0 is neutral (``from`` 0, ``every`` 0 or 1) except in ``if``, where 0 empties the set.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location
from ..yamlio import YamlDoc, load_yaml
from .model_params import PARAM_NAMES, ModelParams
from .templates import VARIABLES

_FIELDS = ("if", "from", "every", "not", "beyond")


@dataclass(frozen=True)
class LayerSet:
    """A named set of layer indices (dense, MoE, MTP...) declared in ``converters/_hub.yaml``."""

    name: str
    when: str | None = None            # ``if:``
    start: str | None = None           # ``from:``
    every: str | None = None
    outside: str | None = None         # ``not:``
    beyond: str | None = None

    def members(self, params: ModelParams, sets: dict[str, "LayerSet"]) -> tuple[int, ...] | range:
        """The layer indices of this set for these sizes."""
        env = params.env()
        if self.beyond:
            return range(params.num_layers, params.num_layers + env[self.beyond])
        if self.outside:
            excluded = set(sets[self.outside].members(params, sets))
            return tuple(i for i in range(params.num_layers) if i not in excluded)
        if self.when and not env[self.when]:
            return range(0)
        step = max(env[self.every], 1) if self.every else 1
        first = env[self.start] if self.start else 0
        return range(-(-first // step) * step, params.num_layers, step)


@dataclass(frozen=True)
class Indices:
    """The hub's index variables (what sizes each) and its layer sets."""

    sizes: dict          # variable -> the parameter that sizes it ("i" -> num_layers)
    layer_sets: dict     # name -> LayerSet


@lru_cache(maxsize=8)
def hub_doc(path: Path) -> YamlDoc:
    """The hub file parsed once for :func:`load_indices` and ``hub.load_hub`` (both only read it)."""
    return load_yaml(path)


@lru_cache(maxsize=8)
def load_indices(path: Path) -> Indices:
    """``indices:`` and ``layer_sets:`` of the hub file; every mistake is a one-line InputError at file:line."""
    doc = hub_doc(path)
    sizes = _indices(doc)
    sets = doc.get("layer_sets", None)
    if not isinstance(sets, dict) or "all" not in sets:
        raise InputError(_where(doc, "layer_sets"), "expected a mapping 'layer_sets:' that has 'all'",
                         "write layer_sets: {all: {}, moe: {if: num_experts}, dense: {not: moe}}")
    layer_sets = {name: _layer_set(doc, name, value, set(sets)) for name, value in sets.items()}
    for name in layer_sets:
        _check_acyclic(doc, name, layer_sets)
    return Indices(sizes, layer_sets)


def _where(doc: YamlDoc, key: str) -> str:
    return location(doc.path, doc.lines.get(key), key)


def _indices(doc: YamlDoc) -> dict[str, str]:
    node = doc.get("indices", None)
    if not isinstance(node, dict) or set(node) != set(VARIABLES):
        raise InputError(_where(doc, "indices"), f"expected 'indices:' with exactly {', '.join(VARIABLES)} "
                         "(the placeholders name templates use)", "write indices: {i: {size: num_layers}, ...}")
    sizes = {}
    for name, value in node.items():
        size = value.get("size") if isinstance(value, dict) else None
        if size not in PARAM_NAMES:
            raise InputError(_where(doc, f"indices.{name}"), f"size: {size!r} is not a size parameter",
                             f"use one of {', '.join(sorted(PARAM_NAMES))}")
        sizes[name] = size
    return sizes


def _layer_set(doc: YamlDoc, name: str, value: object, names: set) -> LayerSet:
    where = _where(doc, f"layer_sets.{name}")
    if not isinstance(value, dict):
        raise InputError(where, f"expected a mapping of {', '.join(_FIELDS)}, found {value!r}", "write e.g. {not: moe}")
    unknown = sorted(map(str, set(value) - set(_FIELDS)))
    if unknown:
        raise InputError(where, f"unknown field(s) {', '.join(unknown)}", f"use {', '.join(_FIELDS)}")
    for key, item in value.items():
        allowed = names - {name} if key == "not" else PARAM_NAMES
        if item not in allowed:
            what = "another layer set" if key == "not" else "a size parameter"
            raise InputError(_where(doc, f"layer_sets.{name}.{key}"), f"{key}: {item!r} is not {what}",
                             f"use one of {', '.join(sorted(allowed))}")
    return LayerSet(name, value.get("if"), value.get("from"), value.get("every"), value.get("not"), value.get("beyond"))


def _check_acyclic(doc: YamlDoc, name: str, sets: dict[str, LayerSet]) -> None:
    seen = [name]
    while sets[seen[-1]].outside:
        seen.append(sets[seen[-1]].outside)
        if seen[-1] in seen[:-1]:
            raise InputError(_where(doc, f"layer_sets.{name}.not"), f"'not:' loops: {' -> '.join(seen)}",
                             "define the set directly")
