"""A fused module on one side (Megatron ``linear_qkv``, logical ``q,k,v``) against its parts on the other
(MindFormers ``wq``, ``wk``, ``wv``).

What is comparable from statistics alone:
- forward outputs, parameters, and backward inputs (the gradient of the outputs) are the parts
  concatenated: compared against the parts' COMBINED statistics (:func:`.match_combine.combine`);
- forward inputs are the same tensor fed to every part: compared with each part's input;
- backward outputs (the gradient of the input) are the SUM of the parts' gradients, which statistics
  cannot give: listed unmatched with that reason.
"""
from __future__ import annotations

from collections import defaultdict

from .match_calls import Call, call_numbers
from .match_names import param_name

FUSED_REASON = "inside a fused module: compared at module level on combined statistics"
GRAD_SUM_REASON = ("gradient of a fused module's input is the sum of its parts' gradients, "
                   "not derivable from statistics")


def pair_fused(builder, leftovers_a: list[Call], leftovers_b: list[Call], key_a, key_b, paired: dict, ops) -> None:
    """Pair fused module calls left over by exact matching with their parts; the rest is unmatched."""
    keyed_a = [(call, key_a(call.module_path)) for call in leftovers_a]      # each call keyed once, for both ways
    keyed_b = [(call, key_b(call.module_path)) for call in leftovers_b]
    used: set = set()
    _pair_side(builder, keyed_a, keyed_b, paired, ops, False, used)
    _pair_side(builder, keyed_b, keyed_a, paired, ops, True, used)
    for side, calls in (("A", leftovers_a), ("B", leftovers_b)):
        left = [call for call in calls if id(call) not in used]
        if left:               # by number: the reasons made with the table, once per module path (none for a CSV)
            builder.unmatched_numbers(side, left[0].table, call_numbers(left), _no_counterpart)


def _no_counterpart(side: str, op: str, module_path: str) -> str:
    """The reason a leftover module call of ``side`` is unmatched."""
    return f"module {module_path!r} has no counterpart in {'B' if side == 'A' else 'A'}"


def _pair_side(builder, fused_side: list[tuple], parts_side: list[tuple], paired: dict, ops, swap: bool,
               used: set) -> None:
    """Pair each fused call of ``fused_side`` with the first calls of its parts in ``parts_side`` (both lists of
    (call, its key); calls in ``used`` are skipped). Only the parts some fused call names are collected: most
    leftover calls are neither."""
    fused = [(call, logical, layer) for call, (logical, layer, _) in fused_side
             if len(logical) > 1 and id(call) not in used]
    if not fused:
        return
    names = {name for _, logical, _ in fused for name in logical}
    slots = defaultdict(list)
    for call, (logical, _, _) in parts_side:
        if len(logical) == 1 and logical[0] in names and id(call) not in used:
            slots[(logical[0], call.pass_)].append(call)
    taken: dict[tuple, int] = defaultdict(int)
    for call, logical, layer in fused:
        wanted = [(name, call.pass_) for name in logical]
        if not all(taken[w] < len(slots[w]) for w in wanted):
            continue
        parts = [slots[w][taken[w]] for w in wanted]
        for w in wanted:
            taken[w] += 1
        used.update([id(call), *(id(p) for p in parts)])
        paired[logical] = FUSED_REASON
        for name in logical:
            paired[(name,)] = FUSED_REASON
        _pair_rows(builder, call, parts, logical, layer, ops, swap)


def _pair_rows(builder, fused: Call, parts: list[Call], logical, layer, ops, swap: bool) -> None:
    side_f, side_p = ("B", "A") if swap else ("A", "B")
    rows_f, rows_p = builder.rows(side_f), builder.rows(side_p)
    stems = "+".join(p.stem for p in parts)
    for io in ("input", "output", "parameter"):
        found_f = _io_rows(rows_f, fused, io, ops)
        if not found_f:
            continue
        found_p = [_io_rows(rows_p, part, io, ops) for part in parts]
        for key, index in found_f.items():
            found = [part.get(key) for part in found_p]
            if None in found:
                builder.unmatched_row(side_f, index, f"{io} {key} missing in a part of the fused module")
                continue
            if io == "output" and fused.pass_ == "backward":
                builder.unmatched_row(side_f, index, GRAD_SUM_REASON)
                for i in found:
                    builder.unmatched_row(side_p, i, GRAD_SUM_REASON)
                continue
            if io == "input" and fused.pass_ == "forward":
                for i in found:
                    builder.add_fused(index, [i], fused.stem, stems, logical, layer, swap)
            else:
                builder.add_fused(index, found, fused.stem, stems, logical, layer, swap)


def _io_rows(rows, call: Call, io: str, ops) -> dict:
    found = call.io_rows(io)
    if io == "parameter":
        names = rows["name"]
        return {ops.param_class(param_name(names[i])): i for i in found}
    return dict(enumerate(found))
