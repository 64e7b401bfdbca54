"""The loaded form of one ``converters/<arch>.yaml``: logical tensors, formats and their rules.

A :class:`Rule` maps one physical tensor name template to the logical tensor(s) it holds::

    layers.{i}.attn.[q,k,v]  ->  decoder.layers.{i}.self_attention.linear_qkv.weight   (grouped_qkv)

Its parts are listed flat in fuse order; when the physical name lacks an index of the parts
(``{e}`` of ``layers.{i}.moe.experts.{e}.gate`` in a stacked ``ffn.w1``) the parts repeat per
value of that index, in order: ``[e0.gate, e0.up, e1.gate, e1.up, ...]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import product
from math import prod
from pathlib import Path
from typing import Iterator, Sequence

from .expr import Dim, Expr, evaluate_shape
from .model_params import ModelParams
from .pipeline import Pipeline
from .templates import Template


@dataclass(frozen=True)
class LogicalTensor:
    """One hub name as an architecture uses it: shape in parameters, which layers have it."""

    template: Template
    shape: tuple[Expr, ...]
    layers: str                  # "all" | "dense" | "moe" (ignored for names without {i})
    order: int                   # position in the hub (output order)
    tied_to: str | None = None   # may be absent from a checkpoint: then it is this tensor (tied embeddings)
    module: str | None = None    # the logical module holding it when not itself (hub ``module:``)

    @property
    def name(self) -> str:
        return self.template.text


@dataclass(frozen=True)
class Rule:
    """One physical tensor of a format: its name template(s), the logical parts it holds and how."""

    key: str                                  # the YAML key as written, e.g. layers.{i}.attn.[q,k,v]
    parts: tuple[Template, ...]               # logical templates, in fuse order
    name: Template                            # physical name template
    alts: tuple[Template, ...] = ()           # accepted alternative physical names (reading only)
    pipeline: Pipeline = field(default_factory=Pipeline)
    where: str = ""                           # file:line [formats.F.key] of the rule
    layers: str = "all"

    @property
    def variables(self) -> tuple[str, ...]:
        return self.name.variables

    @cached_property
    def collapsed(self) -> tuple[str, ...]:
        """Indices of the parts that the physical name lacks (joined by ``stack``)."""
        seen = []
        for part in self.parts:
            seen += [v for v in part.variables if v not in self.name.variables and v not in seen]
        return tuple(seen)

    def describe(self) -> str:
        return f"rule '{self.key}' -> '{self.name.text}' ({self.pipeline.describe()}) at {self.where}"


@dataclass(frozen=True, eq=False)          # hashed by identity: caches key on it
class FormatSpec:
    """One checkpoint format of an architecture (``hf``, ``megatron``, ``mindformers``...): its rules."""

    name: str
    rules: tuple[Rule, ...]
    ignore: tuple[str, ...] = ()              # glob patterns of physical names never read (``*._extra_state``)
    variant_of: str | None = None
    note: str = ""
    where: str = ""


@dataclass
class ArchSpec:
    """One converter spec (``converters/<arch>.yaml``): sizes, logical tensors and formats."""

    name: str
    path: Path
    params: tuple[str, ...]
    logical: dict[str, LogicalTensor]          # template text -> tensor, in hub order
    formats: dict[str, FormatSpec]
    extends: str | None = None
    description: str = ""
    hf_config: object = None                   # HfConfigSpec of the ``hf_config:`` block (spec/hf_config.py)
    indices: object = None                     # Indices of the hub (spec/layer_sets.py): sizes, layer sets

    # ------------------------------------------------------------------ lookups
    def format(self, name: str) -> FormatSpec:
        from ..errors import InputError

        try:
            return self.formats[name]
        except KeyError:
            raise InputError(f"{self.path.name}", f"arch '{self.name}' has no format '{name}'",
                             f"use one of {', '.join(self.formats)}") from None

    def tensor(self, part: Template) -> LogicalTensor:
        return self.logical[part.text]

    # ------------------------------------------------------------------ instances
    def layers(self, layer_set: str, params: ModelParams) -> Sequence[int]:
        """The layers of a hub layer set (``all``, ``dense``, ``moe``, ...) for these sizes."""
        sets = self.indices.layer_sets
        return sets[layer_set].members(params, sets)

    def ranges(self, rule: Rule, params: ModelParams) -> dict[str, Sequence[int]]:
        env = params.env()
        return {var: self.layers(rule.layers, params) if var == "i" else range(env[size])
                for var, size in self.indices.sizes.items()}

    def instances(self, rule: Rule, params: ModelParams) -> Iterator[dict[str, int]]:
        """Every index assignment of the rule's physical name (one per physical tensor)."""
        ranges = self.ranges(rule, params)
        for values in product(*(ranges[v] for v in rule.variables)):
            yield dict(zip(rule.variables, values, strict=True))

    def groups(self, rule: Rule, params: ModelParams) -> int:
        ranges = self.ranges(rule, params)
        return prod(len(ranges[v]) for v in rule.collapsed)

    def part_names(self, rule: Rule, env: dict[str, int], params: ModelParams) -> list[str]:
        """Concrete logical names of one physical tensor, flat in fuse order."""
        if not rule.collapsed:
            return [part.format(env) for part in rule.parts]
        ranges = self.ranges(rule, params)
        names = []
        for values in product(*(ranges[v] for v in rule.collapsed)):
            full = {**env, **dict(zip(rule.collapsed, values, strict=True))}
            names += [part.format(full) for part in rule.parts]
        return names

    # ------------------------------------------------------------------ shapes
    def part_shapes(self, rule: Rule, env: dict[str, int]) -> list[tuple[int, ...]]:
        return [evaluate_shape(self.tensor(part).shape, env) for part in rule.parts]

    def physical_shape(self, rule: Rule, params: ModelParams) -> tuple[int, ...]:
        env = params.env()
        args = rule.pipeline.evaluate_args(env)
        shape = rule.pipeline.shape(self.part_shapes(rule, env), self.groups(rule, params), args)
        reshape = rule.pipeline.reshape_to(env)
        if reshape is not None and prod(reshape) != prod(shape):
            raise ValueError(f"{rule.describe()}: reshape {list(reshape)} does not hold {list(shape)}")
        return reshape if reshape is not None else tuple(int(d) for d in shape)

    def symbolic_shape(self, rule: Rule) -> tuple[Dim, ...]:
        """The physical shape as formulas in the parameters (for inference)."""
        shapes = [self.tensor(part).shape for part in rule.parts]
        groups: Dim = 1
        for variable in rule.collapsed:
            groups = groups * Expr.var(self.indices.sizes[variable])
        if rule.pipeline.reshape is not None:
            return rule.pipeline.reshape
        return rule.pipeline.shape(shapes, groups, dict(rule.pipeline.args))

    # ------------------------------------------------------------------ metadata only
    def expected_names(self, fmt: str, params: ModelParams) -> dict[str, Rule]:
        """Every physical name of ``fmt`` for these sizes -> its rule (spec order)."""
        return {rule.name.format(env): rule for rule in self.format(fmt).rules for env in self.instances(rule, params)}
