"""Safe YAML loading that remembers where each key was written.

``load_yaml`` returns the data (``yaml.safe_load`` semantics: anchors, aliases and merge
keys work, nothing is executed) together with a map from dotted key path to 1-based line,
so provenance and error messages can say ``optimizer.betas.1 (file.yaml:31)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import input_files
from .errors import InputError, location

try:  # the C loader is several times faster; both are safe loaders
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader

_MISSING = object()


@dataclass
class YamlDoc:
    """A parsed YAML file: ``data`` plus ``lines`` (dotted path → 1-based line)."""

    path: Path
    data: Any
    lines: dict[str, int] = field(default_factory=dict)

    def get(self, dotted: str, default: Any = _MISSING) -> Any:
        """Value at a dotted path (``a.b.0.c``); ``default`` (or KeyError) when absent."""
        node = self.data
        for part in dotted.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
                node = node[int(part)]
            else:
                if default is _MISSING:
                    raise KeyError(dotted)
                return default
        return node

    def has(self, dotted: str) -> bool:
        absent = object()
        return self.get(dotted, absent) is not absent

    def where(self, dotted: str) -> str:
        """``dotted (file:line)`` for provenance."""
        line = self.lines.get(dotted)
        return f"{dotted} ({self.path.name}:{line})" if line else f"{dotted} ({self.path.name})"


def read_text(path: Path) -> str:
    """Read a text config once, bounded, with one-line errors (see :mod:`workbench.input_files`)."""
    return input_files.read_text(path, what="config")


def parse_yaml(text: str, path: Path) -> YamlDoc:
    """Parse YAML text; syntax errors become one-line errors with line and column."""
    try:
        node = yaml.compose(text, Loader=_Loader)
        lines: dict[str, int] = {}
        if node is not None:  # before construction: it flattens merge keys in place
            _record_lines(node, "", lines, set())
        data = yaml.SafeLoader("").construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        problem = (error.problem or error.context or "invalid YAML").strip()
        raise InputError(location(path, line, column=column), f"YAML syntax error: {problem}",
                         "fix the YAML at that line") from None
    except yaml.YAMLError as error:
        raise InputError(str(path), f"YAML error: {error}", "fix the YAML") from None
    return YamlDoc(Path(path), data, lines)


def load_yaml(path: Path | str) -> YamlDoc:
    """Read and parse a YAML file (see :func:`parse_yaml`)."""
    path = Path(path)
    return parse_yaml(read_text(path), path)


def _record_lines(node: yaml.Node, prefix: str, lines: dict[str, int], active: set[int]) -> None:
    if id(node) in active:  # a recursive alias: stop rather than loop
        return
    active.add(id(node))
    if isinstance(node, yaml.MappingNode):
        merges = []
        for key_node, value_node in node.value:  # explicit keys first: they override merged ones
            if key_node.tag == "tag:yaml.org,2002:merge":
                merges += value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                continue
            path = f"{prefix}{key_node.value}"
            lines.setdefault(path, key_node.start_mark.line + 1)
            _record_lines(value_node, path + ".", lines, active)
        for source in merges:
            _record_lines(source, prefix, lines, active)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            path = f"{prefix}{index}"
            lines.setdefault(path, item.start_mark.line + 1)
            _record_lines(item, path + ".", lines, active)
    active.discard(id(node))
