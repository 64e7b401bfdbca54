"""Load and validate the CheckList sections (``checklists/*.yaml`` with ``section:``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..config.registry import load_registry
from ..errors import InputError, location
from ..knowledge import knowledge_dir
from ..yamlio import YamlDoc, load_yaml

SEVERITIES = ("error", "warning")
CONDITIONS = ("moe",)
ITEM_FIELDS = {"id", "title", "keys", "rule", "params", "severity", "why", "fix", "check", "when"}


@dataclass(frozen=True)
class Item:
    section: str
    id: str
    title: str
    keys: tuple[str, ...]
    rule: str
    severity: str = "error"
    params: dict = field(default_factory=dict)
    why: str = ""
    fix: dict = field(default_factory=dict)
    check: str = ""
    when: str = ""


@dataclass(frozen=True)
class Section:
    name: str
    order: int
    path: Path
    items: tuple[Item, ...]


def _item(raw: object, section: str, doc: YamlDoc, index: int, known_keys: set[str]) -> Item:
    from .rules import RULES

    where = location(doc.path, doc.lines.get(f"items.{index}"), f"items[{index}]")
    if not isinstance(raw, dict):
        raise InputError(where, f"expected a mapping, found {type(raw).__name__}", "write the item as id:, title:, keys:, rule:")
    unknown = set(raw) - ITEM_FIELDS
    if unknown:
        raise InputError(where, f"unknown field(s) {sorted(unknown)}; expected some of {sorted(ITEM_FIELDS)}", "fix the spelling")
    for required in ("id", "title", "rule", "why"):
        if not raw.get(required):
            raise InputError(where, f"missing '{required}'", f"add {required}: to the item")
    if raw["rule"] not in RULES:
        raise InputError(where, f"unknown rule {raw['rule']!r}", f"use one of {sorted(RULES)}")
    keys = raw.get("keys", [])
    if not isinstance(keys, list) or any(key not in known_keys for key in keys):
        bad = [key for key in keys if key not in known_keys] if isinstance(keys, list) else keys
        raise InputError(where, f"unknown canonical key(s) {bad}", "declare them in checklists/keys.yaml first")
    severity = raw.get("severity", "error")
    if severity not in SEVERITIES:
        raise InputError(where, f"severity {severity!r} is not one of {list(SEVERITIES)}", "use error or warning")
    if raw.get("when") and raw["when"] not in CONDITIONS:
        raise InputError(where, f"when {raw['when']!r} is not one of {list(CONDITIONS)}", "remove it or use a known one")
    return Item(section, str(raw["id"]), str(raw["title"]), tuple(keys), raw["rule"], severity, dict(raw.get("params") or {}),
                str(raw["why"]), dict(raw.get("fix") or {}), str(raw.get("check", "")), str(raw.get("when", "")))


def parse_section(doc: YamlDoc, known_keys: set[str]) -> Section:
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("section"), str) or not isinstance(data.get("items"), list):
        raise InputError(str(doc.path), "expected 'section: NAME' and an 'items:' list", "see checklists/network.yaml")
    items = tuple(_item(raw, data["section"], doc, index, known_keys) for index, raw in enumerate(data["items"]))
    return Section(data["section"], int(data.get("order", 99)), doc.path, items)


@lru_cache(maxsize=4)
def load_checklist(folder: Path | None = None) -> tuple[Section, ...]:
    """Every section file in the folder, ordered; ids unique across the CheckList."""
    folder = folder or knowledge_dir("checklists")
    known_keys = set(load_registry().keys)
    sections = [parse_section(load_yaml(path), known_keys) for path in sorted(folder.glob("*.yaml"))
                if path.name != "keys.yaml"]
    seen: dict[str, Path] = {}
    for section in sections:
        for item in section.items:
            if item.id in seen:
                raise InputError(str(section.path), f"item id {item.id!r} is also used in {seen[item.id].name}",
                                 "give every item a unique id")
            seen[item.id] = section.path
    return tuple(sorted(sections, key=lambda s: (s.order, s.name)))
