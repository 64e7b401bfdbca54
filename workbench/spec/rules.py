"""Parse one format rule from YAML and validate a whole format; every error names file:line [key]."""
from __future__ import annotations

from ..errors import InputError, location
from ..yamlio import YamlDoc
from .arch import ArchSpec, FormatSpec, Rule
from .expr import ExprError, parse
from .hub import parse_shape
from .pipeline import Pipeline
from .templates import Template, TemplateError, split_parts_key
from .transforms import TRANSFORM_NAMES, expand

RULE_KEYS = {"name", "transform", "alt", "args", "reshape"}


def parse_rule(doc: YamlDoc, spec: ArchSpec, dotted: str, key: str, value: object) -> Rule:
    where = location(doc.path, doc.lines.get(dotted), dotted)
    body = {"name": value} if isinstance(value, str) else value
    if not isinstance(body, dict) or "name" not in body:
        raise InputError(where, f"expected a tensor name or {{name: ..., transform: ...}}, found {value!r}",
                         "write logical: physical.name or a mapping with 'name'")
    unknown = sorted(set(body) - RULE_KEYS)
    if unknown:
        raise InputError(where, f"unknown rule field(s) {', '.join(unknown)}", f"use {', '.join(sorted(RULE_KEYS))}")
    try:
        parts = tuple(Template.parse(text) for text in split_parts_key(key))
        name = Template.parse(body["name"])
        alts = tuple(Template.parse(text) for text in _as_list(body.get("alt", [])))
    except TemplateError as error:
        raise InputError(where, str(error), "fix the template") from None
    for part in parts:
        if part.text not in spec.logical:
            raise InputError(where, f"logical name '{part.text}' is not one of arch '{spec.name}' "
                             f"(hub names it has: {', '.join(spec.logical)})",
                             "add it under logical: (it must be a hub name) or fix the spelling")
    pipeline = _pipeline(where, spec, body, len(parts))
    layers = _layer_set(where, spec, parts)
    return Rule(key, parts, name, alts, pipeline, where, layers)


def _as_list(value: object) -> list:
    return value if isinstance(value, list) else [value]


def _pipeline(where: str, spec: ArchSpec, body: dict, parts: int) -> Pipeline:
    names = _as_list(body.get("transform", []))
    try:
        steps = expand([str(n) for n in names])
    except KeyError as error:
        raise InputError(where, f"unknown transform '{error.args[0]}'",
                         f"use one of {', '.join(TRANSFORM_NAMES)}") from None
    _check_arity(where, steps, parts)
    known = frozenset(spec.params)
    accepted = {arg for step in steps for arg in step.arg_names}
    raw_args = body.get("args", {}) or {}
    if not isinstance(raw_args, dict):
        raise InputError(where, f"args must be a mapping, found {raw_args!r}", "write args: {heads: num_kv_heads}")
    extra = sorted(set(raw_args) - accepted)
    if extra:
        raise InputError(where, f"argument(s) {', '.join(extra)} not taken by {', '.join(map(str, names)) or 'rename'}",
                         f"accepted: {', '.join(sorted(accepted)) or 'none'}")
    args = {}
    for step in steps:
        for arg in step.arg_names:
            text = raw_args.get(arg, step.arg_defaults.get(arg))
            if text is None:
                raise InputError(where, f"transform {step.name} needs argument '{arg}'", f"add args: {{{arg}: ...}}")
            try:
                args[arg] = parse(text, known)
            except ExprError as error:
                raise InputError(where, f"argument {arg}: {error}", "use parameters listed in params") from None
    reshape = parse_shape(body["reshape"], where, known) if "reshape" in body else None
    return Pipeline(steps, reshape, args)


def _layer_set(where: str, spec: ArchSpec, parts: tuple[Template, ...]) -> str:
    sets = {spec.logical[p.text].layers for p in parts if "i" in p.variables}
    if len(sets) > 1:
        raise InputError(where, f"parts live in different layer sets ({', '.join(sorted(sets))})",
                         "fuse only tensors that every such layer has")
    return sets.pop() if sets else "all"


# ---------------------------------------------------------------------- format validation

def validate_format(spec: ArchSpec, fmt: FormatSpec) -> None:
    covered: dict[str, Rule] = {}
    physical: dict[str, Rule] = {}
    for rule in fmt.rules:
        _check_structure(rule)
        for part in rule.parts:
            if part.text not in spec.logical:
                raise InputError(rule.where, f"logical name '{part.text}' is not one of arch '{spec.name}'",
                                 "drop the rule or add the logical name")
            if part.text in covered:
                raise InputError(rule.where, f"'{part.text}' is already mapped by {covered[part.text].describe()}",
                                 "map each logical name once per format")
            covered[part.text] = rule
        for template in (rule.name, *rule.alts):
            if template.text in physical:
                raise InputError(rule.where, f"duplicate physical name '{template.text}' in format {fmt.name} "
                                 f"(also {physical[template.text].describe()})", "give each physical tensor one rule")
            physical[template.text] = rule
    missing = [name for name in spec.logical if name not in covered]
    if missing:
        raise InputError(fmt.where or str(spec.path), f"format {fmt.name} of arch {spec.name} does not map "
                         f"{', '.join(missing)}", "add a rule for each (every format maps every logical name)")


def _check_structure(rule: Rule) -> None:
    part_vars = set().union(*(p.variables for p in rule.parts))
    for template in (rule.name, *rule.alts):
        extra = set(template.variables) - part_vars
        if extra:
            raise InputError(rule.where, f"physical name '{template.text}' has placeholder(s) "
                             f"{', '.join('{' + v + '}' for v in sorted(extra))} that the logical name lacks",
                             "use the same placeholders on both sides")
        if set(template.variables) != set(rule.name.variables):
            raise InputError(rule.where, f"alternative '{template.text}' has other placeholders than '{rule.name.text}'",
                             "alternatives must have the same placeholders")
    collapsed = rule.collapsed
    if bool(collapsed) != rule.pipeline.collapses:
        problem = (f"the logical index {{{collapsed[0]}}} is missing from the physical name, so the parts must be "
                   "joined by 'stack'") if collapsed else "'stack' used but every logical index is in the physical name"
        raise InputError(rule.where, problem, "add stack (or stack_experts) to transform, or fix the placeholders")
    _check_arity(rule.where, rule.pipeline.steps, len(rule.parts))


def _check_arity(where: str, steps, count: int) -> None:
    """Each step gets as many parts as it takes; one tensor comes out."""
    for step in steps:
        if step.collapses:
            if count != 1:
                raise InputError(where, f"stack needs one tensor per expert, but {count} parts are still separate",
                                 "fuse the parts first, e.g. transform: [concat0, stack]")
        elif step.arity is not None and step.arity != count:
            raise InputError(where, f"transform {step.name} takes {step.arity} part(s), the key lists {count}",
                             "list that many parts in [...] or pick another transform")
        count = 1
    if count != 1:
        raise InputError(where, f"{count} logical parts in one tensor need a transform",
                         "add e.g. transform: concat0 or grouped_qkv")
