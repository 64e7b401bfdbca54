"""Resolve physical tensor names against one format's rules: exact, anchored matches only.

The result says, for every name, which rule and indices it is (or that it is unmatched / ignored),
and which rules matched nothing. :func:`missing` lists, for given sizes, every expected name that
is absent. Nothing here reads a tensor.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from math import prod
from typing import Iterable, Sequence

from ..errors import InputError
from .arch import ArchSpec, FormatSpec, Rule
from .model_params import ModelParams
from .templates import Template, glob_regex, skeleton_of


@dataclass(frozen=True)
class Match:
    """One physical name matched to a rule, with the indices its template read."""

    name: str
    rule: Rule
    env: tuple[tuple[str, int], ...]        # (("i", 3), ("e", 5)), in the template's order
    alternative: bool = False               # matched one of the rule's ``alt`` names

    @property
    def indices(self) -> dict[str, int]:
        return dict(self.env)


@dataclass
class Resolution:
    """Names resolved against one format: matched, unmatched, ignored, and the rules nothing matched."""

    arch: str
    format: str
    matches: dict[str, Match] = field(default_factory=dict)       # physical name -> match
    unmatched: list[str] = field(default_factory=list)            # no rule, not ignored
    ignored: list[str] = field(default_factory=list)              # matched an ``ignore`` pattern
    unused_rules: list[Rule] = field(default_factory=list)        # rules no name matched

    def instance(self, rule: Rule, env: dict[str, int]) -> Match | None:
        """The match of the rule's tensor with these indices, or None when absent."""
        return self._instances().get(_key(rule, env))

    def _instances(self) -> dict:
        if not hasattr(self, "_by_instance"):
            self._by_instance = {_key(m.rule, dict(m.env)): m for m in self.matches.values()}
        return self._by_instance

    def summary(self, limit: int = 5) -> str:
        parts = [f"{len(self.matches)} matched"]
        if self.unmatched:
            parts.append(f"{len(self.unmatched)} unmatched (e.g. {', '.join(self.unmatched[:limit])})")
        if self.unused_rules:
            parts.append(f"{len(self.unused_rules)} rules unused (e.g. "
                         f"{', '.join(r.name.text for r in self.unused_rules[:limit])})")
        return ", ".join(parts)


def _key(rule: Rule, env: dict[str, int]) -> tuple:
    return (id(rule), *(env[v] for v in rule.variables))


@lru_cache(maxsize=256)
def _index(fmt: FormatSpec) -> dict[str, list[tuple[Template, Rule, bool]]]:
    """skeleton -> the templates (with their rule) that could match a name of that skeleton."""
    index: dict[str, list] = {}
    for rule in fmt.rules:
        for template, alternative in [(rule.name, False)] + [(alt, True) for alt in rule.alts]:
            index.setdefault(template.skeleton, []).append((template, rule, alternative))
    return index


def resolve_names(names: Iterable[str], arch: ArchSpec, fmt: str, *,
                  skeletons: Sequence[str] | None = None) -> Resolution:
    """Match every name; ambiguous spec rules and doubly present tensors raise InputError.

    ``skeletons`` (``skeleton_of`` of each name, in order) saves recomputing them when the same
    names are resolved against many formats (detection).
    """
    spec = arch.format(fmt)
    index = _index(spec)
    ignore = [glob_regex(pattern) for pattern in spec.ignore]
    result = Resolution(arch.name, fmt)
    seen: dict[tuple, str] = {}
    names = list(names)
    for name, skeleton in zip(names, skeletons if skeletons is not None else map(skeleton_of, names), strict=True):
        found = [(t, r, a, env) for t, r, a in index.get(skeleton, ()) if (env := t.match(name)) is not None]
        if len(found) > 1:
            raise InputError(found[0][1].where, f"'{name}' matches several rules of format {fmt}: "
                             f"{'; '.join(r.describe() for _, r, _, _ in found)}", "make the templates distinct")
        if not found:
            (result.ignored if any(p.match(name) for p in ignore) else result.unmatched).append(name)
            continue
        _, rule, alternative, env = found[0]
        if rule.alts:
            key = _key(rule, env)
            if key in seen:
                raise InputError(name, f"holds the same tensor as '{seen[key]}' ({rule.describe()})",
                                 "keep only one of the two names")
            seen[key] = name
        result.matches[name] = Match(name, rule, tuple(env.items()), alternative)
    used = {id(m.rule) for m in result.matches.values()}
    result.unused_rules = [rule for rule in spec.rules if id(rule) not in used]
    return result


def out_of_range(resolution: Resolution, arch: ArchSpec, params: ModelParams) -> list[str]:
    """Matched names whose indices lie outside the sizes (layer 61 of a 61-layer model)."""
    out, ranges = [], {}
    for name, match in resolution.matches.items():
        rule_ranges = ranges.get(id(match.rule))
        if rule_ranges is None:
            rule_ranges = ranges[id(match.rule)] = arch.ranges(match.rule, params)
        if any(value not in rule_ranges[var] for var, value in match.env):
            out.append(name)
    return out


def missing(resolution: Resolution, arch: ArchSpec, params: ModelParams) -> list[tuple[Rule, str]]:
    """(rule, expected name) for every tensor these sizes need that the names lack."""
    present: dict[int, int] = {}
    for match in resolution.matches.values():
        present[id(match.rule)] = present.get(id(match.rule), 0) + 1
    outside = set(out_of_range(resolution, arch, params))
    for name in outside:
        present[id(resolution.matches[name].rule)] -= 1
    absent = []
    for rule in arch.format(resolution.format).rules:
        ranges = arch.ranges(rule, params)
        expected = prod(len(ranges[v]) for v in rule.variables)
        if present.get(id(rule), 0) == expected:       # one match per index tuple: counts suffice
            continue
        absent += [(rule, rule.name.format(env)) for env in arch.instances(rule, params)
                   if resolution.instance(rule, env) is None]
    return absent
