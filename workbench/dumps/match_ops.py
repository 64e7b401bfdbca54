"""The operator-equivalence table ``converters/operators.yaml``: which operator names of either framework
compute the same thing, which parameter names are the same tensor, which operators only move data.

    table = load_operators()
    table.op_class("Primitive.matmul.MatMul")   # "linear";  table.op_class("Functional.linear") too
    table.param_class("gamma")                  # "weight"

Validated when loaded; every problem names the file, line and key.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location
from ..knowledge import knowledge_dir
from ..yamlio import load_yaml

OPERATORS_FILE = "operators.yaml"
SECTIONS = ("operators", "parameters", "layout_only", "tolerances")
_SPLIT = re.compile(r"[.\-/]")
_TAIL = re.compile(r"^(op)?\d+$")


def normalise(name: str) -> str:
    """Lower case, no underscores: ``MatMul`` = ``matmul``, ``__add__`` = ``add``, ``layer_norm`` = ``LayerNorm``."""
    return str(name).replace("_", "").lower()


def op_token(op: str) -> str:
    """The operator's own name out of a dumped spelling: ``Primitive.matmul.MatMul`` → ``MatMul``,
    ``MatMul-op12`` → ``MatMul``, ``Tensor.__add__`` → ``__add__``; a plain name is itself."""
    pieces = [p for p in _SPLIT.split(str(op)) if p and not _TAIL.match(p)]
    return pieces[-1] if pieces else str(op)


@dataclass(frozen=True)
class OperatorTable:
    classes: dict[str, str]          # normalised name -> class
    params: dict[str, str]           # normalised parameter name -> class
    layout: frozenset[str]           # normalised names of data-movement operators
    tolerances: dict[str, float]     # dtype -> default relative tolerance ("default" for the rest)
    _memo: dict = field(default_factory=dict, compare=False, repr=False)    # (kind, spelling) -> class

    def op_class(self, op: str) -> str:
        found = self._memo.get(("op", op))
        if found is None:
            token = normalise(op_token(op))
            found = self._memo[("op", op)] = self.classes.get(token, token)
        return found

    def param_class(self, name: str) -> str:
        found = self._memo.get(("param", name))
        if found is None:
            token = normalise(name)
            found = self._memo[("param", name)] = self.params.get(token, token)
        return found

    def is_layout(self, op: str) -> bool:
        found = self._memo.get(("layout", op))
        if found is None:
            token = normalise(op_token(op))
            found = self._memo[("layout", op)] = token in self.layout or self.classes.get(token) in self.layout
        return found


def load_operators(path: Path | str | None = None) -> OperatorTable:
    """The validated table (``converters/operators.yaml`` unless ``path``), cached per file."""
    path = Path(path) if path is not None else knowledge_dir("converters") / OPERATORS_FILE
    return _load(str(path.resolve()), path.stat().st_mtime_ns if path.exists() else 0)


@lru_cache(maxsize=8)
def _load(path: str, _mtime: int) -> OperatorTable:
    doc = load_yaml(path)
    data = doc.data
    if not isinstance(data, dict):
        raise InputError(location(path, 1), "expected a mapping with operators, parameters, layout_only",
                         "see the comments at the top of converters/operators.yaml")
    unknown = sorted(set(map(str, data)) - set(SECTIONS))
    if unknown:
        raise InputError(location(path, doc.lines.get(unknown[0]), unknown[0]), f"unknown section {unknown[0]!r}",
                         f"use {', '.join(SECTIONS)}")
    classes = _classes(doc, "operators")
    params = _classes(doc, "parameters")
    layout = _names(doc, "layout_only", data.get("layout_only", []))
    return OperatorTable(classes, params, frozenset(normalise(n) for n in layout), _tolerances(doc))


def _tolerances(doc) -> dict[str, float]:
    table = doc.data.get("tolerances")
    where = location(doc.path, doc.lines.get("tolerances"), "tolerances")
    if not isinstance(table, dict) or "default" not in table:
        raise InputError(where, "expected a mapping dtype -> relative tolerance with a `default`",
                         "e.g. tolerances: {float32: 1.0e-4, default: 1.0e-4}")
    for dtype, value in table.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 1:
            raise InputError(where, f"{dtype}: expected a relative tolerance between 0 and 1, found {value!r}",
                             "e.g. float32: 1.0e-4")
    return {str(dtype): float(value) for dtype, value in table.items()}


def _classes(doc, section: str) -> dict[str, str]:
    table = doc.data.get(section, {}) or {}
    if not isinstance(table, dict):
        raise InputError(location(doc.path, doc.lines.get(section), section), "expected a mapping class -> [names]",
                         "e.g. softmax: [softmax, Softmax]")
    found: dict[str, str] = {}
    for cls, names in table.items():
        key = f"{section}.{cls}"
        for name in _names(doc, key, names):
            token = normalise(name)
            if token in found and found[token] != str(cls):
                raise InputError(location(doc.path, doc.lines.get(key), key),
                                 f"{name!r} is already in class {found[token]!r}", "a name belongs to one class only")
            found[token] = str(cls)
        found.setdefault(normalise(cls), str(cls))
    return found


def _names(doc, key: str, names) -> list[str]:
    where = location(doc.path, doc.lines.get(key), key)
    if not isinstance(names, list) or not names:
        raise InputError(where, f"expected a non-empty list of names, found {type(names).__name__}",
                         "e.g. [MatMul, linear]")
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise InputError(where, f"expected operator names (strings), found {name!r}", "quote the name")
    return names
