"""The ``aliases:`` of a canonical key (``checklists/keys.yaml``): its names in the other vocabularies.

Schema (every kind optional; see the comment at the top of keys.yaml)::

    aliases:
      spec: hidden                 # the converter specs' size parameter (workbench/spec/model_params.py), or
                                   # {name: P, stated: true, fallback: true, map: {canonical: spec or null}}
      hf: [hidden_size]            # Hugging Face config.json key(s), first present wins
      reference: model.hidden_size # the reference run's field (section.field, workbench/reference/config.py), or
                                   # {field: F, map: {...}, optional: true, requires: KEY, unset: V}, or a list

This module only parses one key's block (shapes and types, with the file, line and key); the checks
across keys (duplicates, unknown parameters, fields or keys) are in :mod:`workbench.config.vocabulary`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InputError

KINDS = ("spec", "hf", "reference")
SPEC_FIELDS = {"name", "stated", "fallback", "map"}
REFERENCE_FIELDS = {"field", "map", "optional", "requires", "unset"}
NO_VALUE: Any = object()
_SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class SpecAlias:
    """The spec parameter of a key. ``stated``: only a value the config itself writes (an argument or yaml
    path of the key), never a default or derivation; ``fallback``: used when the parameter's own key is not
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


def _word(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if not isinstance(value, (dict, list)) else type(value).__name__
