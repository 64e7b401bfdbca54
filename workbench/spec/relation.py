"""Name-level correspondence between two formats of one architecture (no shapes, no tensors).

Each physical name resolves (anchored templates, :func:`resolve_names`) to the logical tensors
it holds; names of both sides that share a logical tensor belong together. The groups are the
connected components of that sharing, so every relation falls out of the specs::

    same     megatron decoder.layers.0.self_attention.linear_proj.weight  <->  mindformers ...wo.weight
    fused    megatron ...linear_qkv.weight (q,k,v)   <->  mindformers wq, wk, wv   (A holds several)
    split    mindformers w_qkv                       <->  hf q_proj, k_proj, v_proj (B holds several)
    stacked  one side stacks experts in one tensor (a rule whose name lacks the expert index)

:func:`module_relation` does the same for module paths (``spec/modules.py``): leaf modules group
by the logical modules they hold, parents by their logical group::

    same     megatron decoder.layers.{i}.self_attention  <->  mindformers model.layers.{i}.attention
    fused    megatron ...linear_qkv                      <->  mindformers ...wq, ...wk, ...wv

Quantities that add over parts (squared norms, element counts) compare per group. Sizes that the
names carry (layers, experts) are counted from the names; a stacked side needs ``num_experts``
from the other side's names or from ``params``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from .arch import ArchSpec
from .model_params import ModelParams
from .resolve import Resolution, resolve_names

KINDS = ("same", "fused", "split", "regrouped", "stacked", "only_a", "only_b")


@dataclass(frozen=True)
class Correspondence:
    kind: str
    a: tuple[str, ...]                     # physical names of side A, in the order given
    b: tuple[str, ...]
    logical: tuple[str, ...]               # logical names the group holds (hub order within the group)

    @property
    def label(self) -> str:
        """A short logical label: ``embed``, ``layers.0.attn.[q,k,v]``, ``layers.0.moe.experts.[0,1].[gate,up]``."""
        return compact_label(self.logical)

    @property
    def layer(self) -> int | None:
        head = self.logical[0].split(".") if self.logical else []
        return int(head[1]) if len(head) > 1 and head[0] == "layers" and head[1].isdigit() else None


def compact_label(names: tuple[str, ...] | list[str]) -> str:
    """Dotted names joined position by position: differing segments become ``[a,b]``."""
    if len(names) == 1:
        return names[0]
    split = [name.split(".") for name in names]
    if len({len(parts) for parts in split}) != 1:
        return f"{names[0]} (+{len(names) - 1})"
    segments = []
    for values in zip(*split, strict=True):
        unique = list(dict.fromkeys(values))
        segments.append(unique[0] if len(unique) == 1 else f"[{','.join(unique)}]")
    return ".".join(segments)


def counted_params(*resolutions: Resolution, params: ModelParams | None = None) -> ModelParams:
    """Layers and experts counted from the names' indices, over ``params`` where given."""
    layers, experts = set(), set()
    for resolution in resolutions:
        for match in resolution.matches.values():
            env = match.indices
            layers.update([env["i"]] if "i" in env else [])
            experts.update([env["e"]] if "e" in env else [])
    base = params or ModelParams()
    return replace(base, num_layers=base.num_layers or (max(layers) + 1 if layers else 0),
                   num_experts=base.num_experts or (max(experts) + 1 if experts else 0))


def logical_names(resolution: Resolution, arch: ArchSpec, params: ModelParams) -> dict[str, list[str]]:
    """physical name -> the logical names it holds, for every matched name."""
    return {name: arch.part_names(match.rule, match.indices, params) for name, match in resolution.matches.items()}


def naming_format(names: list[str], arch: ArchSpec, allow_unmatched: bool = True) -> str:
    """The format these names are, for name-level work: formats that tie on names (Megatron and
    MindFormers mcore differ only in layouts) are one answer when every name holds the same
    logical tensors under each of them; otherwise the tie is an error, as in conversion."""
    from ..errors import InputError
    from .detect import best_fits, format_fits

    best = best_fits(format_fits(names, arch), allow_unmatched)
    if not best:
        from .detect import detect_format
        return detect_format(names, arch, allow_unmatched=allow_unmatched)     # raises with the closest fit
    sizes = counted_params(resolve_names(names, arch, best[0].format))
    views = {fit.format: logical_names(resolve_names(names, arch, fit.format), arch, sizes) for fit in best}
    if len({repr(sorted(view.items())) for view in views.values()}) > 1:
        raise InputError(f"{len(names)} parameter names", f"names fit {', '.join(views)} with different parts",
                         "pass the format explicitly")
    return best[0].format


def correspond(names_a: Iterable[str], format_a: str, names_b: Iterable[str], format_b: str, arch: ArchSpec,
               params: ModelParams | None = None) -> tuple[list[Correspondence], list[str], list[str]]:
    """Groups of corresponding names, then the names of A and of B that no rule matches."""
    names_a, names_b = list(names_a), list(names_b)
    resolution_a, resolution_b = resolve_names(names_a, arch, format_a), resolve_names(names_b, arch, format_b)
    sizes = counted_params(resolution_a, resolution_b, params=params)
    parts_a, parts_b = logical_names(resolution_a, arch, sizes), logical_names(resolution_b, arch, sizes)
    stacked = {name for resolution in (resolution_a, resolution_b)
               for name, match in resolution.matches.items() if match.rule.collapsed}
    groups = _components(parts_a, parts_b)
    order = {name: index for index, name in enumerate(names_a + names_b)}
    out = []
    for a, b, logical in groups:
        a, b = sorted(a, key=order.get), sorted(b, key=order.get)
        out.append(Correspondence(_kind(a, b, stacked), tuple(a), tuple(b), tuple(logical)))
    out.sort(key=lambda c: order[(c.a or c.b)[0]])
    return out, resolution_a.unmatched, resolution_b.unmatched


def _components(parts_a: dict[str, list[str]], parts_b: dict[str, list[str]]):
    """Union-find over physical names joined by a shared logical name."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(node):
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    owner: dict[str, tuple[str, str]] = {}
    for side, parts in (("a", parts_a), ("b", parts_b)):
        for name, logical in parts.items():
            node = (side, name)
            find(node)
            for item in logical:
                if item in owner:
                    parent[find(node)] = find(owner[item])
                else:
                    owner[item] = node
    members: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for node in parent:
        members.setdefault(find(node), []).append(node)
    for nodes in members.values():
        logical = list(dict.fromkeys(item for side, name in nodes
                                     for item in (parts_a if side == "a" else parts_b)[name]))
        yield ([name for side, name in nodes if side == "a"], [name for side, name in nodes if side == "b"], logical)


def _kind(a: list[str], b: list[str], stacked: set[str]) -> str:
    if not b:
        return "only_a"
    if not a:
        return "only_b"
    if stacked & set(a + b):
        return "stacked"
    if len(a) == 1 and len(b) == 1:
        return "same"
    if len(a) == 1:
        return "fused"
    return "split" if len(b) == 1 else "regrouped"


def module_relation(arch: ArchSpec | str, fmt_a: str, fmt_b: str) -> list[Correspondence]:
    """Module path templates of two formats that correspond, and how (same, fused, split, regrouped,
    stacked, only_a, only_b); ``logical`` holds the logical module templates of each group. Parents
    pair when their logical groups are equal; leaves through the logical modules they share."""
    from .loader import load_arch
    from .modules import group_templates, is_stacked, module_templates

    arch = load_arch(arch) if isinstance(arch, str) else arch
    sides = [module_templates(arch, fmt) for fmt in (fmt_a, fmt_b)]
    leaves = [{m.template.text: list(dict.fromkeys(text for text, _ in m.logical)) for m in side if m.leaf}
              for side in sides]
    parents = [{m.template.text: ["group:" + "|".join(group_templates(arch, m))] for m in side
                if not m.leaf and group_templates(arch, m)} for side in sides]
    stacked = {m.template.text for side in sides for m in side if m.leaf and is_stacked(m)}
    order = {m.template.text: index for side in sides for index, m in enumerate(side)}
    out = []
    for parts_a, parts_b in ((leaves[0], leaves[1]), (parents[0], parents[1])):
        for a, b, logical in _components(parts_a, parts_b):
            a, b = sorted(a, key=order.get), sorted(b, key=order.get)
            labels = tuple(item.removeprefix("group:") for item in logical)
            out.append(Correspondence(_kind(a, b, stacked), tuple(a), tuple(b), labels))
    return out
