"""Load and validate ``checklists/keys.yaml``: where each canonical value comes from.

The registry is data (see the comment at the top of keys.yaml); this module only parses it
into :class:`KeySpec` objects and rejects malformed entries with the file, line and key.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import InputError, location
from ..knowledge import knowledge_dir
from ..yamlio import YamlDoc, load_yaml
from .aliases import Aliases, check_aliases, check_reference_fields, parse_aliases
from .values import Bounds, parse_bounds

TYPES = ("int", "float", "bool", "str", "dtype", "any")
SIDE_FIELDS = {"arg", "path", "map", "derive", "default", "fixed", "why", "flag"}
GENERATIONS = ("legacy", "mcore")
MISSING: Any = object()


@dataclass(frozen=True)
class SourceRef:
    """One place a raw value may be read: an argument name or a dotted yaml path."""

    name: str
    negate: bool = False
    value_map: dict | None = None


@dataclass(frozen=True)
class SideSpec:
    """Where one side (Megatron, or a MindFormers generation) reads a canonical key, or how it derives it."""

    sources: tuple[SourceRef, ...] = ()
    value_map: dict | None = None
    derive: str | dict | None = None
    default: Any = MISSING
    fixed: Any = MISSING
    why: str = ""
    flag: str = ""
    where: str = field(default="", compare=False)     # its file:line [key], for errors found after loading

    def how_to_set(self, framework: str) -> str:
        """The flag or key a user edits (the ``fix`` column)."""
        if self.flag:
            return self.flag
        if self.sources:
            name = self.sources[0].name
            return "--" + name.replace("_", "-") if framework == "megatron" else name
        return ""


@dataclass(frozen=True)
class KeySpec:
    """One canonical key of keys.yaml: its type, range, aliases, and where each side sets it."""

    key: str
    type: str
    line: int
    title: str = ""
    megatron: SideSpec | None = None
    mindformers: dict[str, SideSpec] = field(default_factory=dict)  # generation -> spec
    bounds: Bounds = Bounds()       # min:/max: every value of this key must respect (checked at load)
    aliases: Aliases = Aliases()    # its names as a spec parameter, HF key, reference field (config/vocabulary.py)

    def side(self, framework: str, generation: str = "") -> SideSpec | None:
        if framework == "megatron":
            return self.megatron
        return self.mindformers.get(generation or "legacy")


@dataclass(frozen=True)
class Registry:
    """keys.yaml parsed: every canonical key, and their aliases indexed."""

    keys: dict[str, KeySpec]
    path: Path
    vocabulary: Any = None          # the keys' aliases indexed (aliases.Vocabulary)
    code_checked: list = field(default_factory=list, compare=False, repr=False)   # [True] once checked_in_code

    def __getitem__(self, key: str) -> KeySpec:
        return self.keys[key]


def _where(doc: YamlDoc, dotted: str) -> str:
    return location(doc.path, doc.lines.get(dotted), dotted)


def _parse_source(entry: Any, doc: YamlDoc, where: str, field_name: str) -> SourceRef:
    if isinstance(entry, str):
        return SourceRef(entry)
    if isinstance(entry, dict) and isinstance(entry.get(field_name), str):
        unknown = set(entry) - {field_name, "negate", "map"}
        if unknown:
            raise InputError(where, f"unknown field(s) {sorted(unknown)} in a source entry",
                             f"use {field_name}, negate, map")
        return SourceRef(entry[field_name], bool(entry.get("negate", False)), entry.get("map"))
    raise InputError(where, f"expected a name or {{{field_name}: NAME, ...}}, found {entry!r}",
                     "fix the registry entry")


def _parse_side(raw: Any, doc: YamlDoc, dotted: str, framework: str) -> SideSpec:
    where = _where(doc, dotted)
    if not isinstance(raw, dict):
        raise InputError(where, f"expected a mapping, found {type(raw).__name__}", "see the schema in keys.yaml")
    unknown = set(raw) - SIDE_FIELDS
    if unknown:
        raise InputError(where, f"unknown field(s) {sorted(unknown)}; expected some of {sorted(SIDE_FIELDS)}",
                         "fix the spelling")
    source_field = "arg" if framework == "megatron" else "path"
    wrong_field = "path" if framework == "megatron" else "arg"
    if wrong_field in raw:
        raise InputError(where, f"'{wrong_field}' is not used on the {framework} side", f"use '{source_field}'")
    entries = raw.get(source_field, [])
    entries = entries if isinstance(entries, list) else [entries]
    sources = tuple(_parse_source(entry, doc, where, source_field) for entry in entries)
    if not (sources or "derive" in raw or "default" in raw or "fixed" in raw):
        raise InputError(where, f"no {source_field}, derive, default or fixed", "say where the value comes from")
    if "fixed" in raw and not raw.get("why"):
        raise InputError(where, "a fixed value needs a 'why'", "say what fixes it")
    derive = raw.get("derive")
    if derive is not None:
        _check_derive_form(derive, where)
    return SideSpec(sources, raw.get("map"), derive, raw.get("default", MISSING), raw.get("fixed", MISSING),
                    str(raw.get("why", "")), str(raw.get("flag", "")), where)


def _check_derive_form(derive: Any, where: str) -> None:
    """A derivation's form: a name (checked against the code by :func:`checked_in_code`) or ``{copy: KEY}``."""
    if isinstance(derive, dict):
        if set(derive) != {"copy"} or not isinstance(derive["copy"], str):
            raise InputError(where, f"derive mapping must be {{copy: KEY}}, found {derive!r}", "fix the entry")
        return
    if not isinstance(derive, str):
        raise InputError(where, f"unknown derivation {derive!r}", "name a derivation of workbench/config/derive.py")


def _check_derivation_names(registry: Registry) -> None:
    from . import derive as derivations  # local: derive imports nothing from here at module level

    for spec in registry.keys.values():
        for side in (spec.megatron, *spec.mindformers.values()):
            if side and isinstance(side.derive, str) and side.derive not in derivations.DERIVATIONS:
                raise InputError(side.where, f"unknown derivation {side.derive!r}",
                                 f"use one of {sorted(derivations.DERIVATIONS)} or add it to workbench/config/derive.py")


def _parse_key(key: str, raw: Any, doc: YamlDoc) -> KeySpec:
    dotted = f"keys.{key}"
    where = _where(doc, dotted)
    if not isinstance(raw, dict):
        raise InputError(where, "expected a mapping with type and sides", "see the schema in keys.yaml")
    unknown = set(raw) - {"type", "title", "megatron", "mindformers", "min", "max", "aliases"}
    if unknown:
        raise InputError(where, f"unknown field(s) {sorted(unknown)}",
                         "use type, title, min, max, megatron, mindformers, aliases")
    if raw.get("type") not in TYPES:
        raise InputError(where, f"type {raw.get('type')!r} is not one of {list(TYPES)}", "set a valid type")
    bounds = parse_bounds(raw, raw["type"], where)
    megatron = _parse_side(raw["megatron"], doc, dotted + ".megatron", "megatron") if "megatron" in raw else None
    mindformers: dict[str, SideSpec] = {}
    if "mindformers" in raw:
        side = raw["mindformers"]
        if isinstance(side, dict) and set(side) & set(GENERATIONS):
            if set(side) - set(GENERATIONS):
                raise InputError(_where(doc, dotted + ".mindformers"),
                                 "mix of legacy:/mcore: and plain fields", "put every field under legacy: and mcore:")
            for generation, spec in side.items():
                mindformers[generation] = _parse_side(spec, doc, f"{dotted}.mindformers.{generation}", "mindformers")
        else:
            spec = _parse_side(side, doc, dotted + ".mindformers", "mindformers")
            mindformers = {generation: spec for generation in GENERATIONS}
    for side in (megatron, *mindformers.values()):
        for literal in (side.default, side.fixed) if side else ():
            if isinstance(literal, (int, float)) and not isinstance(literal, bool):
                bounds.check(literal, where, key)
    aliases = (parse_aliases(raw["aliases"], lambda name: _where(doc, name), dotted + ".aliases",
                             doc.lines.get(dotted + ".aliases", 0)) if "aliases" in raw else Aliases())
    return KeySpec(key, raw["type"], doc.lines.get(dotted, 0), str(raw.get("title", "")), megatron, mindformers,
                   bounds, aliases)


def _check_copies(keys: dict[str, KeySpec], doc: YamlDoc) -> None:
    for spec in keys.values():
        sides = [spec.megatron, *spec.mindformers.values()]
        for side in sides:
            if side and isinstance(side.derive, dict) and side.derive["copy"] not in keys:
                raise InputError(_where(doc, f"keys.{spec.key}"), f"derive copies unknown key {side.derive['copy']!r}",
                                 "name a key defined in keys.yaml")


def parse_registry(doc: YamlDoc, *, check_code: bool = True) -> Registry:
    """The registry of a parsed keys.yaml, every entry checked; with ``check_code=False`` the names it gives
    of code (derivations, reference fields) are left to :func:`checked_in_code`, run by the code that uses them."""
    if not isinstance(doc.data, dict) or not isinstance(doc.data.get("keys"), dict):
        raise InputError(str(doc.path), "expected a top-level 'keys:' mapping", "see checklists/keys.yaml")
    keys = {key: _parse_key(key, raw, doc) for key, raw in doc.data["keys"].items()}
    _check_copies(keys, doc)
    registry = Registry(keys, doc.path)
    registry = replace(registry, vocabulary=check_aliases(registry))
    return checked_in_code(registry) if check_code else registry


def checked_in_code(registry: Registry) -> Registry:
    """``registry`` once the code it names exists: every derivation is one of workbench/config/derive.py, every
    reference alias a field of the reference configs (workbench/reference/config.py). Checked once per registry,
    by the resolver and the reference translations: a command that reads only sizes (``workbench convert``)
    imports neither module. A wrong name is the same one-line error, with the file and line, as at load."""
    if not registry.code_checked:
        _check_derivation_names(registry)
        check_reference_fields(registry)
        registry.code_checked.append(True)
    return registry


@lru_cache(maxsize=4)
def load_registry(path: Path | None = None) -> Registry:
    """The shipped (or a knowledge folder's) keys.yaml, parsed once; its names of code are checked where they are
    used (:func:`checked_in_code`)."""
    return parse_registry(load_yaml(path or knowledge_dir("checklists") / "keys.yaml"), check_code=False)


@dataclass(frozen=True)
class ValueRule:
    """A raw argument or yaml path that derivations read directly: its type and range."""

    type: str
    bounds: Bounds


@lru_cache(maxsize=4)
def raw_value_rules(name: str) -> dict[str, ValueRule]:
    """The ``values:`` section of ``checklists/frameworks/<name>.yaml`` (raw name -> rule)."""
    path = knowledge_dir("checklists") / "frameworks" / f"{name}.yaml"
    entries = load_framework(name).get("values") or {}
    if not isinstance(entries, dict):
        raise InputError(location(path, key="values"), "expected a mapping of name -> {type, min, max}", "fix the file")
    rules = {}
    for raw_name, entry in entries.items():
        where = location(path, key=f"values.{raw_name}")
        if not isinstance(entry, dict) or entry.get("type") not in TYPES or set(entry) - {"type", "min", "max"}:
            raise InputError(where, f"expected {{type: one of {list(TYPES)}, min, max}}, found {entry!r}", "fix it")
        rules[str(raw_name)] = ValueRule(entry["type"], parse_bounds(entry, entry["type"], where))
    return rules


@lru_cache(maxsize=4)
def container_paths(framework: str) -> dict[str, type]:
    """Every dotted prefix of a path the CheckList reads -> the container it must be (dict or list).

    ``optimizer.betas.0`` makes ``optimizer`` a mapping and ``optimizer.betas`` a list: a config
    that writes ``optimizer.betas: 0.9`` would otherwise have its value silently replaced by a default.
    """
    names = list(raw_value_rules(framework))
    for spec in load_registry().keys.values():
        for side in [spec.megatron] if framework == "megatron" else spec.mindformers.values():
            names += [source.name for source in side.sources] if side else []
    shapes: dict[str, type] = {}
    for name in names:
        parts = name.split(".")
        for depth in range(1, len(parts)):
            shapes[".".join(parts[:depth])] = list if parts[depth].isdigit() else dict
    return shapes


@lru_cache(maxsize=4)
def load_framework(name: str) -> dict:
    """``checklists/frameworks/<name>.yaml`` as a plain dict."""
    doc = load_yaml(knowledge_dir("checklists") / "frameworks" / f"{name}.yaml")
    if not isinstance(doc.data, dict) or doc.data.get("framework") != name:
        raise InputError(str(doc.path), f"expected 'framework: {name}' at the top", "fix the file")
    return doc.data
