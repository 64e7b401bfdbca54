"""MindSpore full scope names → (module path, operator, pass).

``Default/network-WithLossCell/model-LlamaModel/layers-CellList/0-LlamaDecodeLayer/attention-Attention/
wq-Linear/MatMul-op12`` → ``model.layers.0.attention.wq``, ``MatMul``, ``forward``. Dump files replace
``/`` by ``_`` in op names; :func:`parse_scope` reads both spellings (cells are ``attr-Class`` pieces,
class names carry no ``_``). Prefixes, wrapper cells and the operator grammar come from
``datasets/dump_formats.yaml`` (``scope``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .formats import DumpFormats

_CELL = re.compile(r"(?P<attr>[^-/]+?)-(?P<cls>[A-Za-z0-9]+)(?:[_/]|$)")


@dataclass(frozen=True)
class Scope:
    module_path: str
    op: str
    backward: bool


def parse_scope(name: str, fmt: DumpFormats) -> Scope:
    """Module path, operator type and pass of a full scope name (``/`` or ``_`` separated)."""
    text = name.strip()
    backward = any(text.startswith(prefix) for prefix in fmt.backward_prefixes)
    text = _strip_prefixes(text, fmt.skip_prefixes)
    op, text = _split_op(text, fmt)
    cells = []
    position = 0
    while position < len(text):
        found = _CELL.match(text, position)
        if not found:
            break                                   # the rest is gradient bookkeeping (Grad_MatMul_...)
        cells.append(found.group("attr"))
        position = found.end()
    while cells and cells[0] in fmt.wrappers:
        cells.pop(0)
    return Scope(".".join(cells), op, backward)


def _strip_prefixes(text: str, prefixes: tuple[str, ...]) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in prefixes:
            for sep in ("/", "_"):
                if text.startswith(prefix + sep):
                    text, changed = text[len(prefix) + 1:], True
    return text


def _split_op(text: str, fmt: DumpFormats) -> tuple[str, str]:
    """The trailing ``Type-opN`` piece and what precedes it."""
    cut = max(text.rfind("/"), text.rfind("_"))
    last = text[cut + 1:]
    found = fmt.op_pattern.match(last)
    if not found:
        return "", text
    return found.group("op"), text[:max(cut, 0)]
