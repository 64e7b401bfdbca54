"""Edit a MindFormers yaml line by line, keeping its comments, order and anchors.

The file is never re-dumped: a value is replaced on the line that holds it, a missing key is added
under its parent block (the parent created when absent), a key removed is commented out, a block
replaced is rewritten at its own indentation. Every changed line carries ``# workbench: <why>``.
Lines are found through :mod:`workbench.yamlio` (the safe loader's line of each dotted path).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from ..yamlio import parse_yaml
from .prepare_keys import REMOVE

_KEY_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<dash>- )?(?P<key>[^\s:#][^:#]*?|\"[^\"]*\"|'[^']*'):(?P<rest>.*)$")


def scalar(value: Any) -> str:
    """A value as one YAML line (flow style for short lists and mappings)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        text = repr(value)
        return text if ("." in text or "e" in text or "n" in text) else text + ".0"
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...").strip()


@dataclass
class YamlEdit:
    path: Path
    lines: list[str]
    data: Any
    line_of: dict[str, int]
    replaced: dict[int, list[str]] = field(default_factory=dict)
    added: dict[tuple[int, int], tuple[dict, dict]] = field(default_factory=dict)   # new keys, why per key

    def has(self, dotted: str) -> bool:
        return dotted in self.line_of

    def get(self, dotted: str, default: Any = None) -> Any:
        node = self.data
        for part in dotted.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return default
        return node

    # ------------------------------------------------------------------ changes
    def set(self, keys: tuple[str, ...], value: Any, why: str) -> None:
        """Set ``keys`` (a path) to ``value``; REMOVE comments the key out; a dict writes a block."""
        dotted = ".".join(keys)
        if value is REMOVE:
            if dotted in self.line_of:
                self._comment_out(dotted, why)
            return
        if keys[-1].isdigit() and ".".join(keys[:-1]) in self.line_of:     # a list item: the list rewritten

            parent = self.get(".".join(keys[:-1]))
            items = list(parent) if isinstance(parent, list) else []
            if int(keys[-1]) >= len(items):
                raise InputError(str(self.path), f"{dotted}: the list has {len(items)} items", "write the list whole")
            items[int(keys[-1])] = value
            self._replace(keys[:-1], items, why)
        elif dotted in self.line_of:
            self._replace(keys, value, why)
        else:
            self._add(keys, value, why)

    def _index(self, dotted: str) -> int:
        return self.line_of[dotted] - 1

    def _block_end(self, index: int) -> int:
        """The last line of the block that starts at ``index`` (deeper-indented or blank lines after it)."""
        indent = _indent(self.lines[index])
        end = index
        for following in range(index + 1, len(self.lines)):
            text = self.lines[following]
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            if _indent(text) <= indent and not text.lstrip().startswith("- ") or _indent(text) < indent:
                break
            end = following
        return end

    def _replace(self, keys: tuple[str, ...], value: Any, why: str) -> None:
        index = self._index(".".join(keys))
        match = _KEY_LINE.match(self.lines[index])
        if match is None:
            raise InputError(f"{self.path}:{index + 1}", f"cannot edit {'.'.join(keys)} on this line",
                             "write the key as `key: value` on its own line")
        end = self._block_end(index)
        head = f"{match['indent']}{match['dash'] or ''}{match['key']}:"
        anchor = re.match(r"\s*(&\S+)", match["rest"])
        anchor_text = f" {anchor.group(1)}" if anchor else ""
        if isinstance(value, dict):
            body = _block(value, _indent(self.lines[index]) + 2)
            self._put(index, end, [f"{head}{anchor_text}  # workbench: {why}"] + body)
        else:
            self._put(index, end, [f"{head}{anchor_text} {scalar(value)}  # workbench: {why}"])

    def _put(self, start: int, end: int, lines: list[str]) -> None:
        self.replaced[start] = lines
        for index in range(start + 1, end + 1):
            self.replaced[index] = []

    def _comment_out(self, dotted: str, why: str) -> None:
        index = self._index(dotted)
        end = self._block_end(index)
        indent = " " * _indent(self.lines[index])
        lines = [f"{indent}# workbench: removed: {why}"]
        lines += [f"{indent}# {text.strip()}" for text in self.lines[index:end + 1] if text.strip()]
        self._put(index, end, lines)

    def _add(self, keys: tuple[str, ...], value: Any, why: str) -> None:
        for depth in range(len(keys) - 1, 0, -1):
            parent = ".".join(keys[:depth])
            if parent in self.line_of:
                node = self.get(parent)
                if not isinstance(node, dict):
                    raise InputError(f"{self.path}:{self.line_of[parent]}", f"{parent} is not a mapping",
                                     f"make it a block to add {'.'.join(keys)} under it")
                index = self._index(parent)
                if _is_flow(self.lines[index]):
                    merged = dict(node)
                    _nest(merged, keys[depth:], value)
                    self._replace(keys[:depth], merged, why)
                    return
                self._pending(self._block_end(index), self._child_indent(index), keys[depth:], value, why)
                return
        self._pending(-1, 0, keys, value, why)

    def _pending(self, after: int, indent: int, keys: tuple[str, ...], value: Any, why: str) -> None:
        """New keys under one parent are merged, so two additions never create the parent twice."""
        tree, whys = self.added.setdefault((after, indent), ({}, {}))
        whys.setdefault(keys[0], why)
        _nest(tree, keys, value)

    def _child_indent(self, index: int) -> int:
        for following in range(index + 1, len(self.lines)):
            text = self.lines[following]
            if text.strip() and not text.lstrip().startswith("#"):
                return _indent(text) if _indent(text) > _indent(self.lines[index]) else _indent(self.lines[index]) + 2
        return _indent(self.lines[index]) + 2

    def text(self) -> str:
        out = []
        for index, line in enumerate(self.lines):
            out.extend(self.replaced.get(index, [line]))
            # deeper blocks first: a child block and its parent's block can end on the same line
            for (after, indent), (tree, why) in sorted(self.added.items(), key=lambda entry: -entry[0][1]):
                if after == index:
                    out.extend(_block(tree, indent, why))
        if (-1, 0) in self.added:
            tree, why = self.added[(-1, 0)]
            out.extend(["", "# workbench: settings align prepare adds"] + _block(tree, 0, why))
        return "\n".join(out) + "\n"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_flow(line: str) -> bool:
    match = _KEY_LINE.match(line)
    return bool(match) and match["rest"].strip().startswith("{")


def _nested(keys: tuple[str, ...], value: Any) -> dict:
    out: dict = {}
    _nest(out, keys, value)
    return out


def _nest(target: dict, keys: tuple[str, ...], value: Any) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def _block(mapping: dict, indent: int, why: str | dict | None = None) -> list[str]:
    lines = []
    for key, value in mapping.items():
        text = why.get(key) if isinstance(why, dict) else why
        note = f"  # workbench: {text}" if text else ""
        if isinstance(value, dict) and value:
            lines.append(f"{' ' * indent}{_key(key)}:{note}")
            lines.extend(_block(value, indent + 2))
        else:
            lines.append(f"{' ' * indent}{_key(key)}: {scalar(value)}{note}")
    return lines


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z_][\w.\-]*", key) else scalar(key)


def open_yaml(path: Path, text: str) -> YamlEdit:
    doc = parse_yaml(text, path)
    if not isinstance(doc.data, dict):
        raise InputError(str(path), "expected a MindFormers yaml (a mapping at the top)", "pass the training yaml")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return YamlEdit(path, lines, doc.data, dict(doc.lines))
