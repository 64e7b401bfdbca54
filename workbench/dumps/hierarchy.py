"""The hierarchical view of a comparison: model → layer → module → operator, each node with the worst
relative difference (and worst status) below it, for the collapsible HTML tree and a flat table."""
from __future__ import annotations

import math
from dataclasses import dataclass, field


STATUS_RANK = {"pass": 0, "warning": 1, "error": 2}


@dataclass(slots=True)
class Node:
    name: str
    worst: float = 0.0
    status: str = "pass"
    rows: int = 0
    children: dict[str, Node] = field(default_factory=dict)

    def add(self, worst: float, status: str) -> None:
        self.rows += 1
        if math.isfinite(worst):
            self.worst = max(self.worst, worst)
        if STATUS_RANK.get(status, 0) > STATUS_RANK.get(self.status, 0):
            self.status = status


def build_tree(evaluated, model: str = "model") -> Node:
    """The tree of ``evaluated`` pairs. Rows are aggregated per call on whole columns (count, worst finite
    difference, worst status), then the calls are hung in order of first appearance: the same tree as adding
    the rows one by one."""
    return hang(call_totals(evaluated), model)


def call_totals(evaluated) -> list[tuple[tuple[str, str, str], int, float, int]]:
    """Per call, in order of first appearance: ((layer, module, call) labels, rows, worst finite relative
    difference (0.0 when none), worst status rank). A process pool's workers total their units and the parent
    joins them with :func:`joined_totals`. Rows are numbered by their raw values first (layer, logical module,
    module path, both call names) and each distinct one is labelled once: distinct values that label alike (a
    logical module missing, a layer 1 and 1.0) are one call, as numbering the rows' labels would make them."""
    import numpy as np

    if not len(evaluated):
        return []
    layer_of, layer_names = _layer_numbers(evaluated["layer"])
    raw: dict[tuple, int] = {}
    raw_of = np.asarray([raw.setdefault(key, len(raw)) for key in zip(
        layer_of, *(evaluated[c].tolist() for c in ("logical_module", "a_module_path", "call_a", "call_b")),
        strict=True)], dtype=np.int64)
    ids: dict[tuple, int] = {}
    label_of = np.asarray([ids.setdefault((layer_names[layer], logical or module or "(no module)", f"{a} ↔ {b}"),
                                          len(ids)) for layer, logical, module, a, b in raw], dtype=np.int64)
    index = label_of[raw_of]
    rows = np.bincount(index, minlength=len(ids))
    worst = np.zeros(len(ids))
    values = evaluated["worst_rel"].to_numpy(dtype=np.float64, na_value=np.nan)
    finite = np.isfinite(values)
    np.maximum.at(worst, index[finite], values[finite])
    status = evaluated["status"].to_numpy(dtype=object)
    row_ranks = np.zeros(len(status), dtype=np.int64)
    for name, rank in STATUS_RANK.items():       # STATUS_RANK.get(status, 0) of every row
        if rank:
            row_ranks[status == name] = rank
    ranks = np.zeros(len(ids), dtype=np.int64)
    np.maximum.at(ranks, index, row_ranks)
    return list(zip(ids, rows.tolist(), worst.tolist(), ranks.tolist(), strict=True))


def _layer_numbers(layers) -> tuple[list[int], list[str]]:
    """(each row's number, the labels): "layer N", or "(no layer)" for None and nan; an integer column's values
    numbered by pandas' hash table, any other's one at a time."""
    import numpy as np
    import pandas as pd

    values = layers.to_numpy()
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        numbers, distinct = pd.factorize(values)
        return numbers.tolist(), [f"layer {int(value)}" for value in distinct.tolist()]
    numbers: dict = {}
    names: list[str] = []
    found = []
    for value in layers.tolist():
        key = None if value is None or value != value else value
        number = numbers.get(key)
        if number is None:
            number = numbers[key] = len(names)
            names.append("(no layer)" if key is None else f"layer {int(key)}")
        found.append(number)
    return found, names


def joined_totals(parts: list[list]) -> list:
    """The call totals of the joined rows, from each unit's (in unit order): rows added, worst of the worst;
    a call first seen in an earlier unit keeps its place. Exact: counts are integers, maxima are maxima."""
    found: dict[tuple, list] = {}
    for part in parts:
        for key, count, high, rank in part:
            seen = found.get(key)
            if seen is None:
                found[key] = [count, high, rank]
            else:
                seen[0] += count
                seen[1] = max(seen[1], high)
                seen[2] = max(seen[2], rank)
    return [(key, *values) for key, values in found.items()]


def hang(totals: list, model: str = "model") -> Node:
    """The tree of call totals (:func:`call_totals`): model → layer → module → call, a None label skipping its
    level. Each total is added to the deepest node of its path, then every node totals its children once
    (sums and maxima: the same tree as adding each total to every node of its path, which
    ``tests/test_compare_fast_matching.py`` holds it to)."""
    names = {rank: status for status, rank in STATUS_RANK.items()}
    root = Node(model)
    for (layer, module, call), count, high, rank in totals:
        node = root
        for name in (layer, module):
            if name is not None:
                children = node.children
                child = children.get(name)
                if child is None:
                    child = children[name] = Node(name)
                node = child
        leaf = None if call is None else node.children.get(call)
        if call is not None and leaf is None:          # a new call node: _add's totals on a fresh node
            node.children[call] = Node(call, high if high > 0.0 else 0.0, names[rank] if rank > 0 else "pass", count)
        else:
            _add(node if call is None else leaf, count, high, rank, names)
    _total(root, names)
    return root


def _add(node: Node, count: int, high: float, rank: int, names: dict) -> None:
    node.rows += count
    if high > node.worst:                     # NaN never is: as Node.add skips what is not finite
        node.worst = high
    if rank > STATUS_RANK.get(node.status, 0):
        node.status = names[rank]


def _total(node: Node, names: dict) -> None:
    """The node's own totals plus its children's, below it first (the tree is four levels deep): the sums and
    maxima that :func:`_add` of each child in turn gives, kept in locals."""
    rows, worst, rank = node.rows, node.worst, STATUS_RANK.get(node.status, 0)
    for child in node.children.values():
        if child.children:
            _total(child, names)
        rows += child.rows
        if child.worst > worst:
            worst = child.worst
        child_rank = STATUS_RANK.get(child.status, 0)
        if child_rank > rank:
            rank = child_rank
    node.rows, node.worst = rows, worst
    if rank > STATUS_RANK.get(node.status, 0):
        node.status = names[rank]


def flat(root: Node):
    """The tree as a table: depth, path, worst relative difference, status, rows; depth first, children in
    order. The children of a node that has no grandchildren (a module's calls, most of the nodes) are taken a
    column at a time."""
    import numpy as np
    import pandas as pd

    columns: tuple[list, ...] = ([], [], [], [], [])
    _flat_into(columns, root, 0, root.name)
    types = (np.int64, object, np.float64, object, np.int64)     # what pandas infers from these lists, given
    names = ("depth", "path", "worst_rel", "status", "rows")
    return pd.DataFrame({name: np.asarray(values, dtype=kind) for name, values, kind in zip(names, columns, types,
                                                                                               strict=True)}, copy=False)


def _flat_into(columns: tuple, node: Node, depth: int, here: str) -> None:
    depths, paths, worst, status, rows = columns
    depths.append(depth)
    paths.append(here)
    worst.append(node.worst)
    status.append(node.status)
    rows.append(node.rows)
    children = list(node.children.values())
    if any(child.children for child in children):
        for child in children:
            _flat_into(columns, child, depth + 1, f"{here}/{child.name}" if here else child.name)
        return
    depths.extend([depth + 1] * len(children))
    paths.extend([f"{here}/{child.name}" for child in children] if here else [child.name for child in children])
    worst.extend([child.worst for child in children])
    status.extend([child.status for child in children])
    rows.extend([child.rows for child in children])
