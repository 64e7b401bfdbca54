"""Tensor-parallel merge rules for Megatron rank files, declared in ``converters/megatron_parallel.yaml``.

Each rule knows the merged shape from the shard shapes alone (for ``metas``) and how to merge
the shard arrays (for ``read``)::

    column      [a0, h] [a1, h]          -> [a0+a1, h]            concat dim 0
    row         [h, b0] [h, b1]          -> [h, b0+b1]            concat dim 1
    gate_up     [g0; u0] [g1; u1]        -> [g0; g1; u0; u1]      each rank its own [gate_r; up_r]
    replicated  X X                      -> X                     (ranks compared when small)
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from ..yamlio import load_yaml
from .megatron_files import arg

RULES = ("column", "row", "gate_up", "replicated", "skip", "unsupported")
RULES_FILE = "megatron_parallel.yaml"
COMPARE_BYTES = 4 * 1024 * 1024          # replicated shards are compared up to this size
_KEYS = {"pattern", "rule", "when", "unless", "why"}


@dataclass(frozen=True)
class ParallelRule:
    pattern: str
    rule: str
    when: str | None = None
    unless: str | None = None
    why: str = ""
    where: str = ""                      # file:line, for messages

    def applies(self, name: str, args: Any) -> bool:
        if not fnmatch.fnmatchcase(name, self.pattern):
            return False
        if self.when and not _flag(args, self.when, self):
            return False
        return not (self.unless and _flag(args, self.unless, self))


def _flag(args: Any, name: str, rule: ParallelRule) -> bool:
    if args is None:
        raise InputError(rule.where, f"rule depends on Megatron argument {name!r} but the checkpoint has no args",
                         f"pass {name}=True/False to the reader")
    return arg(args, name, bool, False, "the checkpoint's args")


def megatron_parallel_rules(path: Path | str | None = None) -> list[ParallelRule]:
    """The ordered rules of ``path`` (default: ``converters/megatron_parallel.yaml``), validated."""
    if path is None:
        from ..knowledge import knowledge_dir

        path = knowledge_dir("converters") / RULES_FILE
    doc = load_yaml(path)
    entries = doc.get("rules", None)
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{doc.path}:{doc.lines.get('rules', 1)}", "expected a non-empty list under 'rules'",
                         "see converters/megatron_parallel.yaml for the schema")
    return [_rule(doc, index, entry) for index, entry in enumerate(entries)]


def _rule(doc, index: int, entry: Any) -> ParallelRule:
    where = f"{doc.path}:{doc.lines.get(f'rules.{index}', '?')}"
    if not isinstance(entry, dict):
        raise InputError(where, f"rule {index} is a {type(entry).__name__}, expected a mapping",
                         "write {pattern: GLOB, rule: NAME}")
    unknown = set(entry) - _KEYS
    if unknown:
        raise InputError(where, f"unknown key(s) {sorted(unknown)} in rule {index}", f"allowed: {sorted(_KEYS)}")
    rule_line = f"{doc.path}:{doc.lines.get(f'rules.{index}.rule', doc.lines.get(f'rules.{index}', '?'))}"
    if entry.get("rule") not in RULES:
        raise InputError(rule_line, f"unknown rule {entry.get('rule')!r}", f"use one of {', '.join(RULES)}")
    pattern = entry.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise InputError(where, f"rule {index} needs a glob 'pattern' string", "e.g. pattern: \"*.linear_fc1.weight\"")
    for key in ("when", "unless", "why"):
        if key in entry and not isinstance(entry[key], str):
            raise InputError(where, f"'{key}' must be a string (a Megatron argument name)", "e.g. when: swiglu")
    return ParallelRule(pattern, entry["rule"], entry.get("when"), entry.get("unless"), entry.get("why", ""), where)


def rule_for(name: str, rules: list[ParallelRule], args: Any) -> ParallelRule:
    for rule in rules:
        if rule.applies(name, args):
            return rule
    raise InputError(name, "no tensor-parallel rule matches this tensor",
                     f"add a pattern for it to converters/{RULES_FILE} (a final '*' catches everything)")


# ----------------------------------------------------------------------------- shapes and merges

def merged_shape(rule: ParallelRule, name: str, shapes: list[tuple[int, ...]], where: str) -> tuple[int, ...]:
    """The full tensor's shape from its shards' shapes (no data read)."""
    first = shapes[0]
    if len(shapes) == 1:
        return first
    if rule.rule == "unsupported":
        raise InputError(f"{where} [{name}]", f"split over {len(shapes)} ranks and cannot be merged: {rule.why}",
                         "re-save the checkpoint with tensor/expert parallel size 1")
    if rule.rule == "replicated":
        if any(shape != first for shape in shapes):
            raise InputError(f"{where} [{name}]", f"replicated tensor has different shapes on the ranks: {shapes}",
                             f"check the rule at {rule.where}")
        return first
    axis = 1 if rule.rule == "row" else 0
    if len(first) <= axis or any(len(s) != len(first) or s[:axis] + s[axis + 1:] != first[:axis] + first[axis + 1:]
                                 for s in shapes):
        raise InputError(f"{where} [{name}]", f"shards {shapes} cannot be joined on dim {axis} ({rule.rule})",
                         f"check the rule at {rule.where}")
    if rule.rule == "gate_up" and any(s[0] % 2 for s in shapes):
        raise InputError(f"{where} [{name}]", f"gate_up shards {shapes} have an odd number of rows",
                         f"check the rule at {rule.where} (is swiglu set correctly?)")
    return first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]


def merge(rule: ParallelRule, name: str, pieces: list[np.ndarray], where: str) -> np.ndarray:
    """The full tensor from its shards in rank order (the single shard is returned as is)."""
    import numpy as np

    if len(pieces) == 1:
        return pieces[0]
    if rule.rule == "replicated":
        return _replicated(rule, name, pieces, where)
    if rule.rule == "column":
        return np.concatenate(pieces, axis=0)
    if rule.rule == "row":
        return np.concatenate(pieces, axis=1)
    if rule.rule == "gate_up":
        halves = [np.split(piece, 2, axis=0) for piece in pieces]
        return np.concatenate([gate for gate, _ in halves] + [up for _, up in halves], axis=0)
    raise InputError(f"{where} [{name}]", f"rule {rule.rule!r} cannot merge shards", f"see {rule.where}")


def _replicated(rule: ParallelRule, name: str, pieces: list[np.ndarray], where: str) -> np.ndarray:
    import numpy as np

    first = pieces[0]
    if first.nbytes <= COMPARE_BYTES:
        raw = np.ascontiguousarray(first).view(np.uint8)
        for rank, piece in enumerate(pieces[1:], start=1):
            if not np.array_equal(raw, np.ascontiguousarray(piece).view(np.uint8)):
                raise InputError(f"{where} [{name}]", f"replicated tensor differs between tensor-parallel ranks 0 "
                                 f"and {rank}", f"if it is split, give it a rule in converters/{RULES_FILE}")
    return first
