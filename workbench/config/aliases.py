"""The ``aliases:`` of a canonical key (``checklists/keys.yaml``): its names in the other vocabularies.

Schema (every kind optional; see the comment at the top of keys.yaml)::

    aliases:
      spec: hidden                 # the converter specs' size parameter (workbench/spec/model_params.py), or
                                   # {name: P, stated: true, fallback: true, map: {canonical: spec or null}}
      hf: [hidden_size]            # Hugging Face config.json key(s), first present wins
      reference: model.hidden_size # the reference run's field (section.field, workbench/reference/config.py), or
                                   # {field: F, map: {...}, optional: true, requires: KEY, unset: V}, or a list

:func:`parse_aliases` parses one key's block (shapes and types, with the file, line and key);
:func:`check_aliases` checks them across keys once the registry is parsed (one owner per name, real
parameters, fields and keys) and indexes them; :mod:`workbench.config.vocabulary` translates with them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InputError, location

KINDS = ("spec", "hf", "reference")
SPEC_FIELDS = {"name", "stated", "fallback", "map"}
REFERENCE_FIELDS = {"field", "map", "optional", "requires", "unset"}
NO_VALUE: Any = object()
_SCALARS = (str, int, float, bool)
SIZE_TYPES = ("int", "any")                    # key types a spec parameter or HF size may have


@dataclass(frozen=True)
class SpecAlias:
    """The spec parameter of a key. ``stated``: only a value the config states (an argument or yaml path
    of the key, or a flag its derivation reads), never a default; ``fallback``: used when the parameter's own key is not
    settled; ``map``: canonical value -> parameter value (``None``: the parameter is not given)."""

    name: str
    stated: bool = False
    fallback: bool = False
    value_map: tuple[tuple[Any, Any], ...] = ()


@dataclass(frozen=True)
class ReferenceAlias:
    """One reference field a key sets. ``map``: canonical value -> field value; ``optional``: an unsettled
    key leaves the field's default; ``requires``: set only when that key's field is non-zero (MoE fields
    of a MoE model); ``unset``: the field value that means "not given" (no range check, not reported)."""

    field: str
    value_map: tuple[tuple[Any, Any], ...] = ()
    optional: bool = False
    requires: str = ""
    unset: Any = NO_VALUE

    @property
    def section(self) -> str:
        return self.field.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.field.split(".", 1)[1]


@dataclass(frozen=True)
class Aliases:
    """A canonical key's names in the other vocabularies (spec parameter, HF keys, reference fields)."""

    spec: SpecAlias | None = None
    hf: tuple[str, ...] = ()
    reference: tuple[ReferenceAlias, ...] = ()
    line: int = 0


def parse_aliases(raw: Any, where: Callable[[str], str], dotted: str, line: int) -> Aliases:
    """One key's ``aliases:`` block; ``where(dotted)`` is the file:line of a dotted key."""
    here = where(dotted)
    if not isinstance(raw, dict):
        raise InputError(here, f"aliases must be a mapping of kind -> name, found {_word(raw)}",
                         "write aliases: {spec: NAME, hf: [NAME], reference: section.field}")
    unknown = sorted(str(kind) for kind in set(raw) - set(KINDS))
    if unknown:
        raise InputError(where(f"{dotted}.{unknown[0]}"), f"unknown alias kind '{unknown[0]}'",
                         f"use {', '.join(KINDS)}")
    spec = _spec(raw["spec"], where(f"{dotted}.spec")) if "spec" in raw else None
    hf = _names(raw.get("hf", []), where(f"{dotted}.hf"))
    reference = raw.get("reference", [])
    entries = reference if isinstance(reference, list) else [reference]
    refs = tuple(_reference(entry, where(f"{dotted}.reference")) for entry in entries)
    return Aliases(spec, hf, refs, line)


def _spec(raw: Any, where: str) -> SpecAlias:
    if isinstance(raw, str):
        return SpecAlias(_name(raw, where, "spec"))
    body = _fields(raw, where, SPEC_FIELDS, "name", "{name: P, stated: true, fallback: true, map: {...}}")
    return SpecAlias(_name(body["name"], where, "spec.name"), _flag(body, "stated", where),
                     _flag(body, "fallback", where), _map(body.get("map"), where, allow_null=True))


def _reference(raw: Any, where: str) -> ReferenceAlias:
    if isinstance(raw, str):
        return ReferenceAlias(_field_name(raw, where))
    body = _fields(raw, where, REFERENCE_FIELDS, "field",
                   "{field: section.name, map: {...}, optional: true, requires: KEY, unset: VALUE}")
    requires = body.get("requires", "")
    if not isinstance(requires, str):
        raise InputError(where, f"requires must be a canonical key, found {_word(requires)}", "write requires: KEY")
    unset = body.get("unset", NO_VALUE)
    if unset is not NO_VALUE and not isinstance(unset, _SCALARS):
        raise InputError(where, f"unset must be a plain value, found {_word(unset)}", "write unset: 0")
    return ReferenceAlias(_field_name(body["field"], where), _map(body.get("map"), where, allow_null=False),
                          _flag(body, "optional", where), requires, unset)


def _fields(raw: Any, where: str, allowed: set[str], required: str, form: str) -> dict:
    if not isinstance(raw, dict):
        raise InputError(where, f"expected a name or {form}, found {_word(raw)}", "fix the alias")
    unknown = sorted(str(name) for name in set(raw) - allowed)
    if unknown:
        raise InputError(where, f"unknown field(s) {unknown} in an alias", f"use {', '.join(sorted(allowed))}")
    if required not in raw:
        raise InputError(where, f"the alias has no '{required}'", f"write {form}")
    return raw


def _names(raw: Any, where: str) -> tuple[str, ...]:
    entries = raw if isinstance(raw, list) else [raw]
    return tuple(_name(entry, where, "hf") for entry in entries)


def _name(raw: Any, where: str, what: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InputError(where, f"{what} must be a name, found {_word(raw)}", "write the name as a string")
    return raw


def _field_name(raw: Any, where: str) -> str:
    name = _name(raw, where, "reference")
    if name.count(".") != 1 or not all(name.split(".")):
        raise InputError(where, f"reference field {name!r} is not section.field", "write e.g. model.hidden_size")
    return name


def _flag(body: dict, name: str, where: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise InputError(where, f"{name} must be true or false, found {_word(value)}", f"write {name}: true")
    return value


def _map(raw: Any, where: str, *, allow_null: bool) -> tuple[tuple[Any, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise InputError(where, f"map must be a mapping of canonical value -> value, found {_word(raw)}",
                         "write map: {1: 0}")
    for value in raw.values():
        if not (isinstance(value, _SCALARS) or (allow_null and value is None)):
            raise InputError(where, f"map values must be plain values, found {_word(value)}", "fix the map")
    targets = [value for value in raw.values() if value is not None]
    if not allow_null and len(set(map(repr, targets))) != len(targets):
        raise InputError(where, "map gives two canonical values the same value, so it cannot be read back",
                         "give each canonical value its own value")
    return tuple(raw.items())


@dataclass(frozen=True)
class Vocabulary:
    """The aliases of one registry, indexed (built once at load by :func:`check_aliases`)."""

    spec: tuple[tuple[str, SpecAlias], ...]                 # (key, alias); fallbacks last
    hf: tuple[tuple[str, tuple[str, ...]], ...]             # (key, HF names)
    reference: tuple[tuple[str, tuple[ReferenceAlias, ...]], ...]   # (key, fields), registry order


# ----------------------------------------------------------------------------- checks at load

def check_aliases(registry) -> Vocabulary:
    """Every alias names a real spec parameter, and no name belongs to two keys; the index of them all (the
    reference fields are checked by :func:`check_reference_fields`)."""
    owners: dict[tuple[str, str], str] = {}
    for key, spec in registry.keys.items():
        where = location(registry.path, spec.aliases.line or spec.line, f"keys.{key}.aliases")
        aliases = spec.aliases
        if (aliases.spec or aliases.hf) and spec.type not in SIZE_TYPES:
            raise InputError(where, f"{key} is a {spec.type} key; spec and hf aliases name sizes (int keys)",
                             "remove the alias, or alias an int key")
        if aliases.hf and not aliases.spec:
            raise InputError(where, "an hf alias needs a spec alias (HF names here are model sizes)",
                             "add spec: PARAMETER, or state the HF key in the family's hf_config block")
        names = [("hf", name) for name in aliases.hf] + [("reference", ref.field) for ref in aliases.reference]
        if aliases.spec and not aliases.spec.fallback:
            names.append(("spec", aliases.spec.name))
        for kind_name in names:
            if kind_name in owners:
                raise InputError(where, f"{kind_name[0]} alias {kind_name[1]!r} is already the alias of "
                                 f"{owners[kind_name]}", "give each name to one canonical key")
            owners[kind_name] = key
        _check_spec(aliases.spec, where)
    _check_links(registry, owners)
    return _index(registry)


def check_reference_fields(registry) -> None:
    """Every reference alias names a field of the reference configs: run by ``registry.checked_in_code`` where
    the reference translations first use the registry (importing them is not needed to read sizes)."""
    for key, spec in registry.keys.items():
        for ref in spec.aliases.reference:
            _check_field(ref, location(registry.path, spec.aliases.line or spec.line, f"keys.{key}.aliases"))


def _check_spec(alias: SpecAlias | None, where: str) -> None:
    from ..spec.model_params import PARAM_NAMES

    if alias is not None and alias.name not in PARAM_NAMES:
        raise InputError(where, f"spec parameter {alias.name!r} is not a size of the converter specs",
                         f"use one of {', '.join(sorted(PARAM_NAMES))} (workbench/spec/model_params.py)")


def _check_field(ref: ReferenceAlias, where: str) -> None:
    sections = reference_classes()
    if ref.section not in sections:
        raise InputError(where, f"reference section {ref.section!r} is unknown", f"use {', '.join(sections)}")
    cls = sections[ref.section]
    if ref.name not in field_kinds(cls) and not isinstance(getattr(cls, ref.name, None), property):
        raise InputError(where, f"{cls.__name__} has no field {ref.name!r}",
                         f"use one of {', '.join(sorted(field_kinds(cls)))}")


def _check_links(registry, owners: dict[tuple[str, str], str]) -> None:
    for key, spec in registry.keys.items():
        where = location(registry.path, spec.aliases.line or spec.line, f"keys.{key}.aliases")
        alias = spec.aliases.spec
        if alias is not None and alias.fallback and ("spec", alias.name) not in owners:
            raise InputError(where, f"fallback for spec parameter {alias.name!r}, which no key owns",
                             "give the parameter to one key without fallback: true")
        for ref in spec.aliases.reference:
            required = registry.keys.get(ref.requires)
            if ref.requires and (required is None or not required.aliases.reference):
                raise InputError(where, f"requires {ref.requires!r}, which is not a key with a reference field",
                                 "name a canonical key that has a reference alias")


def _index(registry) -> Vocabulary:
    items = registry.keys.items()
    spec = [(key, s.aliases.spec) for key, s in items if s.aliases.spec]
    return Vocabulary(tuple(sorted(spec, key=lambda pair: pair[1].fallback)),
                      tuple((key, s.aliases.hf) for key, s in items if s.aliases.hf),
                      tuple((key, s.aliases.reference) for key, s in items if s.aliases.reference))


def reference_classes() -> dict[str, type]:
    """Reference section -> its dataclass (the sections of a reference run config, reference/run_config.py)."""
    from ..reference.config import ModelConfig, PrecisionConfig, TrainConfig

    return {"model": ModelConfig, "train": TrainConfig, "precision": PrecisionConfig}


def field_kinds(cls: type) -> dict[str, str]:
    """A reference dataclass's plain fields -> their type name (``int``, ``float``, ``bool``, ``str``)."""
    return {f.name: str(f.type) for f in dataclasses.fields(cls) if f.name != "precision"}


def _word(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if not isinstance(value, (dict, list)) else type(value).__name__
