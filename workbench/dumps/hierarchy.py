"""The hierarchical view of a comparison: model → layer → module → operator, each node with the worst
relative difference (and worst status) below it, for the collapsible HTML tree and a flat table."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .schema import row_dicts

STATUS_RANK = {"pass": 0, "warning": 1, "error": 2}


@dataclass
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
    root = Node(model)
    for row in row_dicts(evaluated):
        layer = row.get("layer")
        path = ["(no layer)" if layer is None or layer != layer else f"layer {int(layer)}",
                row.get("logical_module") or row.get("a_module_path") or "(no module)",
                f"{row['call_a']} ↔ {row['call_b']}"]
        node = root
        node.add(row["worst_rel"], row["status"])
        for name in path:
            node = node.children.setdefault(name, Node(name))
            node.add(row["worst_rel"], row["status"])
    return root


def flat(root: Node):
    """The tree as a table: depth, path, worst relative difference, status, rows."""
    import pandas as pd

    rows = []

    def visit(node: Node, depth: int, path: str) -> None:
        here = f"{path}/{node.name}" if path else node.name
        rows.append({"depth": depth, "path": here, "worst_rel": node.worst, "status": node.status, "rows": node.rows})
        for child in node.children.values():
            visit(child, depth + 1, here)

    visit(root, 0, "")
    return pd.DataFrame(rows, columns=["depth", "path", "worst_rel", "status", "rows"])
