"""The module view of a spec: a framework's module/cell path -> the logical module(s) it holds.

A *module path* is a physical tensor name without its leaf (``.weight``, ``.bias``,
``.embedding_weight``, ``.e_score_correction_bias``, ...): the path a dump row carries. Every
format's module paths come from the same anchored templates as its tensor names, so a module
resolves exactly or not at all::

    megatron decoder.layers.0.self_attention.linear_qkv  -> (layers.0.attn.q, .k, .v)    kind fused
    megatron decoder.layers.0.self_attention             -> (layers.0.attn,)             kind group
    mindformers model.layers.0.feed_forward.ffn.w1       -> (layers.0.moe.experts.*.gate,) kind stacked
    megatron decoder                                      -> ()                          kind root

=========  =====================================================================================
kind       the module path is
=========  =====================================================================================
same       a leaf holding one logical module (``wq`` -> ``layers.0.attn.q``)
fused      a leaf holding several (``linear_qkv`` -> q, k, v; ``w_gate_hidden`` -> gate, up)
stacked    a leaf holding one module per expert (``ffn.w1``, ``experts.weight1``); the experts are
           ``*`` unless ``params`` gives ``num_experts``
group      a parent: its logical group is the common logical prefix of its leaves (``layers.0.attn``,
           ``layers.0.mlp``, ``layers.0``); where dense and MoE layers differ and ``params`` does
           not say which layer set the layer is in, every candidate (``layers.3.mlp``, ``layers.3.moe``)
root       a parent whose leaves share no logical prefix (``decoder``, ``model``)
=========  =====================================================================================

A logical tensor's logical module is the hub's ``module:`` of that tensor (biases and the expert
bias belong to their linear / router module), else the tensor's own name. Only each rule's own
name defines modules; ``alt`` names (Transformer Engine fused-norm weights) add none.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable

from ..errors import InputError
from .arch import ArchSpec, FormatSpec
from .model_params import ModelParams
from .templates import Template, skeleton_of

KINDS = ("same", "fused", "stacked", "group", "root")
ANY_INDEX = "*"


@dataclass(frozen=True)
class ModuleRef:
    logical: tuple[str, ...]
    layer: int | None
    kind: str


@dataclass(frozen=True)
class ModuleTemplate:
    """One module path template of a format and the logical module templates below it, per layer set."""

    template: Template
    leaf: bool
    logical: tuple[tuple[str, str], ...]      # (logical module template, layer set), in spec order


def module_of(name: str) -> str:
    """``decoder.layers.{i}.mlp.linear_fc1.weight`` -> ``decoder.layers.{i}.mlp.linear_fc1``."""
    return name.rpartition(".")[0]


_CACHE: dict[tuple[int, str], tuple[ArchSpec, tuple, dict]] = {}      # ArchSpec is unhashable: keyed by id


def module_templates(arch: ArchSpec, fmt: str) -> tuple[ModuleTemplate, ...]:
    """Leaf and parent module templates of one format (leaves first, in spec order)."""
    return _cached(arch, fmt)[1]


def _cached(arch: ArchSpec, fmt: str) -> tuple[ArchSpec, tuple, dict]:
    key = (id(arch), fmt)
    if key not in _CACHE or _CACHE[key][0] is not arch:
        templates = _build(arch, fmt)
        index: dict[str, list[ModuleTemplate]] = {}
        for module in templates:
            index.setdefault(module.template.skeleton, []).append(module)
        _CACHE[key] = (arch, templates, index)
    return _CACHE[key]


def _build(arch: ArchSpec, fmt: str) -> tuple[ModuleTemplate, ...]:
    spec: FormatSpec = arch.format(fmt)
    leaves: dict[str, list[tuple[str, str]]] = {}
    for rule in spec.rules:
        text = module_of(rule.name.text)
        if not text:
            continue
        for part in rule.parts:
            tensor = arch.tensor(part)
            entry = (tensor.module or tensor.name, tensor.layers if "i" in part.variables else "all")
            if entry not in leaves.setdefault(text, []):
                leaves[text].append(entry)
    parents: dict[str, list[tuple[str, str]]] = {}
    for text, logical in leaves.items():
        segments = text.split(".")
        for end in range(1, len(segments)):
            prefix = ".".join(segments[:end])
            if prefix not in leaves:
                parents.setdefault(prefix, [])
                parents[prefix] += [entry for entry in logical if entry not in parents[prefix]]
    return tuple([ModuleTemplate(Template.parse(text), True, tuple(logical)) for text, logical in leaves.items()]
                 + [ModuleTemplate(Template.parse(text), False, tuple(logical)) for text, logical in parents.items()])


class _Unknown(dict):
    """Formatting env: an index the module path lacks (experts of a stacked module) reads ``*``."""

    def __missing__(self, key: str) -> str:
        return ANY_INDEX


def _layer_sets(arch: ArchSpec, logical: tuple[tuple[str, str], ...], layer: int | None,
                params: ModelParams | None) -> list[str]:
    """The layer sets this module can be in: the one ``params`` puts the layer in, else every one."""
    sets = sorted({layer_set for _, layer_set in logical if layer_set != "all"}) or ["all"]
    if layer is not None and params is not None and params.num_layers:
        chosen = [name for name in sets if name == "all" or layer in arch.layers(name, params)]
        return chosen or sets
    return sets


def common_prefix(texts: Iterable[str], known: Iterable[str]) -> str:
    """The longest common dotted prefix, cut before a segment with an index not in ``known``."""
    split = [text.split(".") for text in texts]
    out = []
    for segments in zip(*split, strict=False):
        if len(set(segments)) != 1 or any(v not in known for v in Template.parse(segments[0]).variables):
            break
        out.append(segments[0])
    return ".".join(out)


def group_templates(arch: ArchSpec, module: ModuleTemplate, layer: int | None = None,
                    params: ModelParams | None = None) -> list[str]:
    """A parent's logical group template(s): the common prefix of its leaves, per candidate layer set."""
    groups = []
    for layer_set in _layer_sets(arch, module.logical, layer, params):
        texts = [text for text, member in module.logical if member in ("all", layer_set)]
        prefix = common_prefix(texts, module.template.variables)
        if prefix and prefix not in groups:
            groups.append(prefix)
    return groups


def is_stacked(module: ModuleTemplate) -> bool:
    """A leaf whose logical modules carry an index its path lacks (experts in one tensor)."""
    return any(v not in module.template.variables for text, _ in module.logical for v in Template.parse(text).variables)


def resolve_ref(arch: ArchSpec, module: ModuleTemplate, env: dict[str, int], params: ModelParams | None,
             memo: dict | None = None) -> ModuleRef:
    """``memo`` (one resolver's, for one arch and params): what depends on the template alone, kept per template
    (a dump's paths are thousands of layers of a few dozen templates): :func:`_plan`."""
    _, layer_of, stacked, leaf_texts, groups_at = plan_of(arch, module, params, {} if memo is None else memo)
    layer = layer_of(env)
    if module.leaf:
        names = list(dict.fromkeys(name for text, index, count in leaf_texts for name in (
            [text.format_map(_Unknown(env))] if index is None
            else [text.format_map({**env, index: value}) for value in range(count)])))
        kind = "stacked" if stacked else ("fused" if len(names) > 1 else "same")
        return ModuleRef(tuple(names), layer, kind)
    key = layer if params is not None else None           # without params no layer set is chosen
    groups = groups_at.get(key)
    if groups is None:
        groups = groups_at[key] = group_templates(arch, module, layer, params)
    if not groups:
        return ModuleRef((), layer, "root")
    return ModuleRef(tuple(text.format_map(env) for text in groups), layer, "group")


def plan_of(arch: ArchSpec, module: ModuleTemplate, params: ModelParams | None, memo: dict) -> tuple:
    """The template's :func:`_plan`, kept in ``memo``."""
    plan = memo.get(id(module))
    if plan is None or plan[0] is not module:
        plan = memo[id(module)] = _plan(arch, module, params)
    return plan


def _plan(arch: ArchSpec, module: ModuleTemplate, params: ModelParams | None) -> tuple:
    """(the module, its layer index reader, stacked, per logical text of a leaf (text, the index it spreads or None,
    its size), a parent's groups per layer): what depends on the template's own variables, which every path it
    matches has, and on ``params``. The layer is the path's index sized by ``num_layers`` (hub ``indices:``). A
    logical text takes the path's indices; an index the path lacks takes every value its size allows, or reads
    ``*`` when the sizes are not known."""
    variables = set(module.template.variables)
    reader = next((v for v, size in arch.indices.sizes.items() if size == "num_layers" and v in variables), None)
    texts = []
    sizes = params.env() if params is not None else {}
    for text, _ in module.logical if module.leaf else ():
        missing = [v for v in Template.parse(text).variables if v not in variables]
        count = sizes.get(arch.indices.sizes[missing[0]]) if len(missing) == 1 else None
        texts.append((text, missing[0], count) if count else (text, None, None))
    return (module, (lambda env: None) if reader is None else (lambda env: env[reader]),
            module.leaf and is_stacked(module), tuple(texts), {})


def module_resolver(arch: ArchSpec | str, fmt: str,
                    params: ModelParams | None = None) -> Callable[[str], ModuleRef | None]:
    """A function: module path of ``fmt`` -> its :class:`ModuleRef`, None when no template matches; its ``many``
    attribute: a list of paths -> their refs, in order (:mod:`.module_batch`)."""
    if isinstance(arch, str):
        from .loader import load_arch
        arch = load_arch(arch)
    index = _cached(arch, fmt)[2]
    memo: dict = {}

    @lru_cache(maxsize=65536)
    def resolve(path: str) -> ModuleRef | None:
        for module in index.get(skeleton_of(path), ()):
            env = module.template.match(path)
            if env is not None:
                return formatter(arch, module, params, memo)(env)
        return None

    from .module_batch import formatter, resolve_paths

    resolve.many = lambda paths: resolve_paths(paths, index, lambda module: formatter(arch, module, params, memo))
    return resolve


@dataclass(frozen=True)
class ModuleFit:
    arch: str
    format: str
    matched: int
    unmatched: tuple[str, ...]


def module_fits(paths: Iterable[str], archs: Iterable[str] | None = None) -> list[ModuleFit]:
    """How many of the paths each format of each architecture resolves (templates matched, nothing built)."""
    from .loader import available_archs, load_arch

    import numpy as np

    from .module_keys import literal_runs, match_keys

    paths = list(dict.fromkeys(paths))
    found = [(arch_name, fmt, _cached(arch, fmt)[2]) for arch_name in (archs if archs is not None else available_archs())
             for arch in (load_arch(arch_name),) for fmt in arch.formats]
    literals = literal_runs(module.template.text for *_, index in found for group in index.values() for module in group)
    keys = match_keys(paths, literals)            # paths every template matches alike share a key: tried once
    distinct = list(dict.fromkeys(keys))
    number = {key: n for n, key in enumerate(distinct)}
    key_of = np.fromiter((number[key] for key in keys), np.int64, len(keys))
    texts = np.array(paths, dtype=object)
    fits = []
    for arch_name, fmt, index in found:
        missed = [n for n, key in enumerate(distinct) if not any(
            module.template.match(key) is not None for module in index.get(skeleton_of(key), ()))]
        unmatched = tuple(texts[np.isin(key_of, missed)].tolist()) if missed else ()
        fits.append(ModuleFit(arch_name, fmt, len(paths) - len(unmatched), unmatched))
    return fits


def detect_module_format(paths: Iterable[str], archs: Iterable[str] | None = None) -> tuple[str, str]:
    """(arch, format) whose module templates match the most of ``paths`` (exact, anchored); ties are
    broken by the fewest leaf templates (the narrower spec). InputError when none matches any path."""
    paths = [path for path in dict.fromkeys(paths) if path]
    fits = module_fits(paths, archs)
    best = max((fit.matched for fit in fits), default=0)
    if not best:
        sample = ", ".join(paths[:3])
        raise InputError(f"{len(paths)} module paths", f"no converter spec matches any module path (e.g. {sample})",
                         "pass --arch and check the paths are the model's own module names")
    top = [fit for fit in fits if fit.matched == best]
    from .loader import load_arch

    def narrowness(fit: ModuleFit) -> tuple[int, int]:
        leaves = sum(module.leaf for module in module_templates(load_arch(fit.arch), fit.format))
        return leaves, 0 if load_arch(fit.arch).formats[fit.format].variant_of is None else 1

    winner = min(top, key=narrowness)
    return winner.arch, winner.format


def unmatched_paths(paths: Iterable[str], arch: ArchSpec | str, fmt: str) -> list[str]:
    """The paths (in order, once each) that no module template of ``fmt`` matches."""
    resolve = module_resolver(arch, fmt)
    return [path for path in dict.fromkeys(paths) if resolve(path) is None]
