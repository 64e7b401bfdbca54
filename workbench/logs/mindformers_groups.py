"""MindFormers' ``Param groups = {json}`` start-up block: the optimizer order of the trainable parameters
(``{group: {"params": [name, ...], ...}, ...}``, printed with ``json.dumps(indent=2)``), and those names put
onto the nameless ``local_norm`` blocks when ``norm_size`` lists as many parameters."""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..input_files import parse_json
from .tables import set_texts

MAX_GROUP_LINES = 2_000_000          # a Param groups block longer than this is not one
MAX_JSON_DEPTH = 32
JSON_CONTINUATION = (b" ", b"\t", b"}", b"]", b'"')      # json.dumps(indent=2): every later line starts so


def param_order(body: list[str], where: str) -> tuple[list[str] | None, str | None]:
    """The parameter names of the block's lines in optimizer order, or None and the note that says why not."""
    try:
        data = parse_json("\n".join(body), where, max_depth=MAX_JSON_DEPTH, what="Param groups JSON")
    except InputError as error:
        return None, f"{error}: parameter names not taken from it"
    order = _names_of(data)
    if order is None:
        return None, f"{where}: expected {{group: {{'params': [name, ...]}}}}: parameter names not taken from it"
    return order, None


def _names_of(data) -> list[str] | None:
    if not isinstance(data, dict):
        return None
    order = []
    for group in data.values():
        names = group.get("params") if isinstance(group, dict) else None
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            return None
        order += names
    return order


def name_blocks(norms, order: list[str], lengths: set[int], notes: list[str], definition: str) -> None:
    """Names from the Param groups block onto the local_norm blocks, when norm_size agrees."""
    rows = norms["definition"] == definition
    if not rows.any():
        return
    if lengths != {len(order)}:
        notes.append(f"Param groups lists {len(order)} parameters but norm_size lists "
                     f"{', '.join(map(str, sorted(lengths)))}: names not attached (is the log from the same run?)")
        return
    norms["param"] = set_texts(norms["param"], np.flatnonzero(rows.to_numpy()),
                               [order[position] for position in norms.loc[rows, "position"]])
    notes.append(f"local_norm names from the Param groups block ({len(order)} parameters, optimizer order)")
