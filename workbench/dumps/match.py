"""Automatic matching of two dump tables (``workbench.dumps.schema``) across frameworks.

    matching = match_dumps(torch_table, mindspore_table, resolve_a=..., resolve_b=..., mapping=...)
    matching.pairs       # one row per compared tensor pair: both sides' statistics (combined for fused parts)
    matching.unmatched   # every row that found no counterpart, with the reason

1. Modules: module/cell rows of both sides whose paths resolve (through the spec's module view, or the
   user mapping) to the same logical module pair up, k-th call with k-th call; a fused module (Megatron
   ``linear_qkv``) pairs with its parts (``wq``, ``wk``, ``wv``) and is compared on combined statistics.
   Without a resolver, only identical module paths pair (an exact key, never a similarity).
2. Operators inside each matched module (and outside any module) are aligned in order through the
   operator-equivalence table (:mod:`.match_align`).
3. Rows of paired calls pair by io and position (parameters by name), only with equal element counts.
Ranks and steps are independent units: A's (rank, step) is compared with B's same (rank, step).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from itertools import groupby
from operator import attrgetter
from typing import Callable

from .match_calls import Call, call_numbers, calls_of
from .match_features import CallFeatures
from .match_fused import pair_fused
from .match_mapping import Mapping
from .match_ops import OperatorTable, load_operators
from .match_rows import PairBuilder

Resolver = Callable[[str], object]          # module path -> ModuleRef | None (workbench/spec/modules.py)


@dataclass
class Matching:
    pairs: object          # DataFrame, see match_rows.PAIR_COLUMNS
    unmatched: object      # DataFrame, see match_rows.UNMATCHED_COLUMNS


def spec_resolver(arch: str | None, fmt: str | None) -> Resolver | None:
    """The spec's module resolver for ``fmt`` of ``arch`` (the one place this package calls the spec)."""
    if not arch or not fmt:
        return None
    from ..spec.modules import module_resolver      # built by issue 11 §1

    return module_resolver(arch, fmt)


def match_dumps(a, b, *, resolve_a: Resolver | None = None, resolve_b: Resolver | None = None,
                mapping: Mapping | None = None, ops: OperatorTable | None = None,
                unmatched_sides: bool = False) -> Matching:
    """The pairs and unmatched rows of two dump tables; ``unmatched_sides``: of the unmatched rows only their
    ``side`` column (:meth:`.match_rows.PairBuilder.unmatched_sides`), which is all a CSV report reads of them."""
    ops = ops or load_operators()
    mapping = mapping or Mapping()
    builder = PairBuilder(a, b)
    unaligned = partial(_unaligned, ops)        # one function for all groups: its reasons are made once per text
    features = CallFeatures(builder.rows_a, builder.rows_b, ops)
    units_b = _units(calls_of(builder.rows_b))
    units_a = _units(calls_of(builder.rows_a))
    for rows in (builder.rows_a, builder.rows_b):
        rows.release(keep=("name", "numel", "shape", "l2norm"))    # what pairing and features read later
    for unit in sorted(set(units_a) | set(units_b)):
        calls_a, calls_b = units_a.get(unit, []), units_b.get(unit, [])
        if not calls_a or not calls_b:
            side, missing = ("A", "B") if calls_a else ("B", "A")
            for call in calls_a or calls_b:
                builder.unmatched_call(side, call, f"rank {unit[0]} step {unit[1]} is not in {missing}")
            continue
        _match_unit(builder, features, calls_a, calls_b, resolve_a, resolve_b, mapping, ops, unaligned)
    builder.match_pending(ops)                 # the paired calls' rows, all at once
    del units_a, units_b                       # the calls and the column lists: memory for the tables
    builder.rows_a.release()
    builder.rows_b.release()
    return Matching(builder.pairs_table(),
                    builder.unmatched_sides() if unmatched_sides else builder.unmatched_table())


def _units(calls: list[Call]) -> dict[tuple, list[Call]]:
    """(rank, step) -> its calls, in order: calls_of sorts them by rank and step, so each unit is one run, and a table
    of one unit (a dump folder's, as compare reads them) is known by its first and last call alone."""
    if not calls:
        return {}
    first, last = calls[0], calls[-1]
    if first.rank == last.rank and first.step == last.step:
        return {(first.rank, first.step): calls}
    units: dict[tuple, list[Call]] = defaultdict(list)
    for unit, group in groupby(calls, key=attrgetter("rank", "step")):
        units[unit].extend(group)
    return units


def _match_unit(builder: PairBuilder, features: CallFeatures, calls_a: list[Call], calls_b: list[Call], resolve_a,
                resolve_b, mapping: Mapping, ops: OperatorTable, unaligned) -> None:
    explicit = mapping.call_pairs(calls_a, calls_b)
    for call_a, call_b in explicit:
        builder.add_calls(call_a, call_b, "mapping")
    taken_a = {id(c) for c, _ in explicit}
    taken_b = {id(c) for _, c in explicit}
    calls_a = [c for c in calls_a if id(c) not in taken_a]
    calls_b = [c for c in calls_b if id(c) not in taken_b]
    key_a = _keyer(resolve_a, mapping.module_a, _module_paths(calls_a))
    key_b = _keyer(resolve_b, mapping.module_b, _module_paths(calls_b))
    modules_a = [c for c in calls_a if c.is_module]
    modules_b = [c for c in calls_b if c.is_module]
    paired = _pair_modules(builder, modules_a, modules_b, key_a, key_b, ops)
    ops_a = _by_module(builder, [c for c in calls_a if not c.is_module], key_a)
    ops_b = _by_module(builder, [c for c in calls_b if not c.is_module], key_b)
    for key in sorted(set(ops_a) | set(ops_b), key=str):
        group_a, group_b = ops_a.get(key, []), ops_b.get(key, [])
        if key not in paired and group_a and group_b:
            paired[key] = "same"          # no module rows (a kernel dump): the ops' module paths still pair
        if paired.get(key) != "same":                 # a reason the key's calls are not aligned
            for side, group in (("A", group_a), ("B", group_b)):
                if group:
                    builder.unmatched_numbers(side, group[0].table, call_numbers(group),
                                              paired.get(key, _no_module_reason))
            continue
        _align_ops(builder, features, group_a, group_b, unaligned)


def _keyer(resolve: Resolver | None, override: Callable[[str], str | None], paths: list[str]):
    """path -> (logical key, layer, kind); ``paths`` (the unit's distinct module paths) are resolved at once when
    the resolver resolves many (the spec's: a template per match key, not per path)."""
    cache: dict[str, tuple] = {}

    def remember(path: str, mapped: str | None, ref) -> None:
        if mapped is not None:
            cache[path] = ((f"map:{mapped}",), None, "same")
        elif ref is not None:
            cache[path] = (tuple(ref.logical), ref.layer, ref.kind)
        else:
            cache[path] = ((f"path:{path}",), None, "same")

    many = getattr(resolve, "many", None)
    if many is not None:
        mapped = [override(path) for path in paths]
        unmapped = [path for path, found in zip(paths, mapped, strict=True) if found is None]
        refs = dict(zip(unmapped, many(unmapped), strict=True))
        for path, found in zip(paths, mapped, strict=True):
            remember(path, found, refs.get(path))

    def key(path: str) -> tuple:
        if path not in cache:
            mapped = override(path)
            remember(path, mapped, None if mapped is not None or resolve is None else resolve(path))
        return cache[path]
    return key


def _module_paths(calls: list[Call]) -> list[str]:
    """The calls' distinct module paths but the empty one (no module), in order of first call."""
    return [path for path in dict.fromkeys(map(attrgetter("module_path"), calls)) if path]


def _pair_modules(builder: PairBuilder, modules_a, modules_b, key_a, key_b, ops) -> dict:
    """Pair module calls; returns logical key -> "same" or the reason ops inside are not aligned."""
    slots_b = defaultdict(list)
    for call in modules_b:
        slots_b[(key_b(call.module_path)[0], call.pass_)].append(call)
    seen: dict[tuple, int] = defaultdict(int)
    paired: dict = {(): "same"}
    leftovers_a = []
    for call in modules_a:
        logical, layer, _ = key_a(call.module_path)
        slot = (logical, call.pass_)
        candidates = slots_b.get(slot, [])
        if seen[slot] < len(candidates):
            other = candidates[seen[slot]]
            candidates[seen[slot]] = None
            seen[slot] += 1
            builder.add_calls(call, other, "module", logical=logical, layer=layer)
            paired[logical] = "same"
        else:
            leftovers_a.append(call)
    leftovers_b = [c for group in slots_b.values() for c in group if c is not None]
    pair_fused(builder, leftovers_a, leftovers_b, key_a, key_b, paired, ops)
    return paired


def _by_module(builder: PairBuilder, calls: list[Call], key) -> dict:
    groups = defaultdict(list)
    logical: dict[str, tuple] = {}                 # module path -> its logical key, looked up once per path
    for call in calls:
        path = call.module_path
        found = logical.get(path)
        if found is None:
            found = logical[path] = key(path)[0] if path else ()
        groups[found].append(call)
    return groups


def _no_module_reason(side: str, op: str, module_path: str) -> str:
    other = "B" if side == "A" else "A"
    return f"its module {module_path!r} has no counterpart in {other}"


def _align_ops(builder: PairBuilder, features: CallFeatures, group_a: list[Call], group_b: list[Call],
               unaligned) -> None:
    """The ops of one module group aligned in order; the calls left over recorded by number, with ``unaligned``
    (:func:`_unaligned` of the operator table) as their reason."""
    import numpy as np

    at_a, at_b = call_numbers(group_a), call_numbers(group_b)
    pairs = features.aligned_at(at_a, at_b)
    for i, j in pairs:
        builder.add_calls(group_a[i], group_b[j], "operator")
    for side, group, at, used in (("A", group_a, at_a, [i for i, _ in pairs]), ("B", group_b, at_b,
                                                                               [j for _, j in pairs])):
        left = np.ones(len(at), dtype=bool)
        left[used] = False
        if left.any():
            builder.unmatched_numbers(side, group[0].table, at[left], unaligned)


def _unaligned(ops: OperatorTable, side: str, op: str, module_path: str) -> str:
    what = "a layout-only operator" if ops.is_layout(op) else f"operator {op!r}"
    return f"{what} with no equivalent at its place in the other side's sequence for module {module_path!r}"
