"""Safe YAML loading that remembers where each key was written.

``load_yaml`` returns the data (``yaml.safe_load`` semantics: anchors, aliases and merge
keys work, nothing is executed) together with a map from dotted key path to 1-based line,
so provenance and error messages can say ``optimizer.betas.1 (file.yaml:31)``. Nesting
depth and alias expansion are bounded before any tree is built (:mod:`workbench.yaml_scan`).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

from . import input_files
from .errors import InputError, location

_MISSING = object()


@dataclass
class YamlDoc:
    """A parsed YAML file: ``data`` plus ``lines`` (dotted path → 1-based line)."""

    path: Path
    data: Any
    lines: Mapping[str, int] = field(default_factory=dict)

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


def _loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)    # the C loader is several times faster; both are safe


def parse_yaml(text: str, path: Path) -> YamlDoc:
    """Parse YAML text within the bounds of :mod:`workbench.yaml_scan`; errors are one line."""
    import yaml

    from .yaml_scan import check_events

    loader = _loader()
    try:
        check_events(text, path, loader)     # depth, alias expansion, recursive aliases: before composing
        node = yaml.compose(text, Loader=loader)
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
    return YamlDoc(Path(path), data, LineMap(node))


def load_yaml(path: Path | str) -> YamlDoc:
    """Read and parse a YAML file (see :func:`parse_yaml`); a knowledge-base file through the cache of parsed
    knowledge (:mod:`workbench.yaml_cache`: the same document, without parsing again)."""
    path = Path(path)
    text = read_text(path)
    if _in_knowledge(path):
        from .yaml_cache import cached_parse

        return cached_parse(text, path, parse_yaml)
    return parse_yaml(text, path)


def _in_knowledge(path: Path) -> bool:
    from .knowledge import knowledge_roots

    folder = os.path.realpath(path.parent)
    return any(folder == root or folder.startswith(root + os.sep) for root in knowledge_roots())


class LineMap(Mapping[str, int]):
    """Dotted path → 1-based line, looked up in the composed nodes.

    Each node's children are tabulated once, on first use; an alias is not copied, so a path
    through ``*base`` finds the line inside the anchor. Built after construction, which has
    flattened merge keys (``<<: *base``) in place: the last pair of a key wins, as in the data.
    """

    def __init__(self, root: yaml.Node | None):
        self._root = root
        self._tables: dict[int, dict[str, tuple[int, yaml.Node]] | list[tuple[int, yaml.Node]]] = {}
        self._found: dict[str, int] = {}       # paths looked up before (readers ask for one path many times)

    def _children(self, node: yaml.Node) -> dict[str, tuple[int, yaml.Node]] | list[tuple[int, yaml.Node]]:
        import yaml

        table = self._tables.get(id(node))
        if table is None:
            if isinstance(node, yaml.MappingNode):
                table = {_key_text(key): (key.start_mark.line + 1, value) for key, value in node.value}
            elif isinstance(node, yaml.SequenceNode):
                table = [(item.start_mark.line + 1, item) for item in node.value]
            else:
                table = []
            self._tables[id(node)] = table
        return table

    def __getitem__(self, dotted: str) -> int:
        found = self._found.get(dotted) if isinstance(dotted, str) else None
        if found is not None:
            return found
        if self._root is None or not isinstance(dotted, str):
            raise KeyError(dotted)
        node, line, parts, index = self._root, None, dotted.split("."), 0
        while index < len(parts):
            table = self._children(node)
            if isinstance(table, dict):       # a key may itself hold dots: shortest match first
                name = parts[index] if parts[index] in table else next(
                    (".".join(parts[index:end]) for end in range(index + 2, len(parts) + 1)
                     if ".".join(parts[index:end]) in table), None)
                if name is None:
                    raise KeyError(dotted)
                line, node = table[name]
                index += name.count(".") + 1
            elif parts[index].isdigit() and int(parts[index]) < len(table):
                line, node = table[int(parts[index])]
                index += 1
            else:
                raise KeyError(dotted)
        if line is None:
            raise KeyError(dotted)
        self._found[dotted] = line
        return line

    def __iter__(self) -> Iterator[str]:
        """Every dotted path, aliases expanded (bounded by :data:`~workbench.yaml_scan.NODE_BUDGET`)."""
        pending: list[tuple[str, yaml.Node]] = [("", self._root)] if self._root is not None else []
        while pending:
            prefix, node = pending.pop()
            table = self._children(node)
            items = table.items() if isinstance(table, dict) else ((str(k), e) for k, e in enumerate(table))
            for name, (_, child) in items:
                yield prefix + name
                pending.append((prefix + name + ".", child))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _key_text(key: yaml.Node) -> str:
    import yaml

    return key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
