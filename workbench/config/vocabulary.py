"""The one size vocabulary: canonical keys, and their names as spec parameters, HF keys, reference fields.

Each canonical key of ``checklists/keys.yaml`` may declare ``aliases:`` (parsed by
:mod:`workbench.config.aliases`); this module checks them across keys when the registry loads and
translates by key, with no per-name tables in Python::

    spec_params(values)                  canonical values -> converter-spec size parameters
    hf_to_canonical(config)              HF config.json -> canonical values (the keys it names)
    canonical_to_hf(values)              canonical values -> HF config.json sizes
    model_config(values), train_config(values)   canonical values -> reference ModelConfig / TrainConfig
    canonical_values(model, train)       reference configs -> canonical values (the inverse)

"Canonical values" is a plain mapping key -> value (settled values only); :func:`known_values` gives it
for a resolved :class:`~workbench.config.canonical.TrainingConfig`. Every function takes the registry
(default: the shipped keys.yaml), so a test or a user's knowledge folder can add a name in YAML alone.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import InputError, location
from .aliases import NO_VALUE, ReferenceAlias, SpecAlias

SIZE_TYPES = ("int", "any")                    # key types a spec parameter or HF size may have


@dataclass(frozen=True)
class Vocabulary:
    """The aliases of one registry, indexed (built once at load by :func:`check_aliases`)."""

    spec: tuple[tuple[str, SpecAlias], ...]                 # (key, alias); fallbacks last
    hf: tuple[tuple[str, tuple[str, ...]], ...]             # (key, HF names)
    reference: tuple[tuple[str, tuple[ReferenceAlias, ...]], ...]   # (key, fields), registry order


def vocabulary(registry=None) -> Vocabulary:
    from .registry import load_registry

    return (registry or load_registry()).vocabulary


# ----------------------------------------------------------------------------- checks at load

def check_aliases(registry) -> Vocabulary:
    """Every alias names a real parameter / field, and no name belongs to two keys; the index of them all."""
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
        for ref in aliases.reference:
            _check_field(ref, where)
    _check_links(registry, owners)
    return _index(registry)


def _check_spec(alias: SpecAlias | None, where: str) -> None:
    from ..spec.model_params import PARAM_NAMES

    if alias is not None and alias.name not in PARAM_NAMES:
        raise InputError(where, f"spec parameter {alias.name!r} is not a size of the converter specs",
                         f"use one of {', '.join(sorted(PARAM_NAMES))} (workbench/spec/model_params.py)")


def _check_field(ref: ReferenceAlias, where: str) -> None:
    sections = _sections()
    if ref.section not in sections:
        raise InputError(where, f"reference section {ref.section!r} is unknown", f"use {', '.join(sections)}")
    cls = sections[ref.section]
    if ref.name not in _fields(cls) and not isinstance(getattr(cls, ref.name, None), property):
        raise InputError(where, f"{cls.__name__} has no field {ref.name!r}",
                         f"use one of {', '.join(sorted(_fields(cls)))}")


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


def _sections() -> dict[str, type]:
    from ..reference.config import ModelConfig, PrecisionConfig, TrainConfig

    return {"model": ModelConfig, "train": TrainConfig, "precision": PrecisionConfig}


def _fields(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls) if f.name != "precision"}


# ----------------------------------------------------------------------------- canonical values

def known_values(config) -> dict[str, Any]:
    """A resolved TrainingConfig's settled values, key -> value."""
    return {key: item.value for key, item in config.values.items() if item.known}


def stated_in(raw, registry=None) -> Callable[[str], bool]:
    """key -> whether the raw config itself writes one of the key's arguments / yaml paths."""
    from .registry import load_registry

    registry = registry or load_registry()

    def stated(key: str) -> bool:
        side = registry[key].side(raw.framework, raw.generation)
        return any(getattr(raw.values.get(source.name), "value", None) is not None
                   for source in (side.sources if side else ()))
    return stated


# ----------------------------------------------------------------------------- spec parameters and HF

def spec_params(values: Mapping[str, Any], stated: Callable[[str], bool] | None = None,
                registry=None) -> dict[str, int]:
    """Canonical values -> the spec size parameters they give (integers only; a ``stated:`` alias only
    where ``stated(key)``, when given; a ``fallback:`` alias only where the parameter is still missing)."""
    out: dict[str, int] = {}
    for key, alias in vocabulary(registry).spec:
        if key not in values or (alias.fallback and alias.name in out):
            continue
        if alias.stated and stated is not None and not stated(key):
            continue
        value = _to_int(values[key])
        if value is not None:
            value = _mapped(value, alias.value_map)
        if value is not None:
            out[alias.name] = value
    return out


def hf_names(registry=None) -> tuple[str, ...]:
    """Every HF config.json key the vocabulary reads (all model sizes)."""
    return tuple(name for _, names in vocabulary(registry).hf for name in names)


def hf_to_canonical(config: Mapping[str, Any], registry=None) -> dict[str, Any]:
    """HF config.json -> canonical values: per key, its first HF name that is present and not null."""
    out = {}
    for key, names in vocabulary(registry).hf:
        value = next((config[name] for name in names if config.get(name) is not None), None)
        if value is not None:
            out[key] = value
    return out


def canonical_to_hf(values: Mapping[str, Any], registry=None) -> dict[str, Any]:
    """Canonical values -> HF config.json sizes (each key under its first HF name)."""
    return {names[0]: values[key] for key, names in vocabulary(registry).hf if values.get(key) is not None}


# ----------------------------------------------------------------------------- reference configs

def reference_sections(values: Mapping[str, Any], missing: Callable[[str], Exception] | None = None,
                       registry=None, sections: tuple[str, ...] = ("model", "train", "precision"),
                       ) -> dict[str, dict[str, Any]]:
    """Canonical values -> the reference fields of ``sections`` (``model``, ``train``, ``precision``).

    A key that is absent from ``values`` raises ``missing(key)`` unless its alias is ``optional`` or has an
    ``unset`` value; ``requires:`` fields are set only when the required key's field is non-zero."""
    missing = missing or _missing
    out: dict[str, dict[str, Any]] = {name: {} for name in _sections()}
    entries = vocabulary(registry).reference
    for deferred in (False, True):            # the fields a `requires:` reads are set first
        for key, aliases in entries:
            for alias in aliases:
                if (bool(alias.requires) != deferred or alias.section not in sections
                        or alias.name not in _fields(_sections()[alias.section])):
                    continue
                if alias.requires and not _field_value(out, _first(entries, alias.requires)):
                    continue
                if key not in values:
                    if alias.optional or alias.unset is not NO_VALUE:   # the field keeps its default / "not given"
                        continue
                    raise missing(key)
                out[alias.section][alias.name] = _field_type(alias, _mapped(values[key], alias.value_map))
    return out


def model_config(values: Mapping[str, Any], missing: Callable[[str], Exception] | None = None, registry=None):
    """The reference ModelConfig of these canonical values (not yet validated)."""
    from ..reference.config import ModelConfig

    return ModelConfig(**reference_sections(values, missing, registry, ("model",))["model"])


def train_config(values: Mapping[str, Any], missing: Callable[[str], Exception] | None = None, registry=None):
    """The reference TrainConfig (with its PrecisionConfig) of these canonical values (not yet validated)."""
    from ..reference.config import PrecisionConfig, TrainConfig

    sections = reference_sections(values, missing, registry, ("train", "precision"))
    return TrainConfig(**sections["train"], precision=PrecisionConfig(**sections["precision"]))


def canonical_values(model=None, train=None, registry=None) -> dict[str, Any]:
    """Reference ModelConfig / TrainConfig -> canonical values (the inverse of model_config / train_config).

    A field at its ``unset:`` value gives nothing (the next field of the key, if any); a ``requires:`` field
    of a model whose required field is zero (a dense model's MoE fields) gives nothing."""
    objects = {"model": model, "train": train, "precision": train.precision if train is not None else None}
    entries = vocabulary(registry).reference
    out: dict[str, Any] = {}
    for key, aliases in entries:
        for alias in aliases:
            owner = objects[alias.section]
            if owner is None:
                continue
            if alias.requires:
                required = _first(entries, alias.requires)
                if not getattr(objects[required.section], required.name, 0):
                    break
            value = getattr(owner, alias.name)
            if alias.unset is not NO_VALUE and _same(value, alias.unset):
                continue
            out[key] = _unmapped(value, alias.value_map)
            break
    return out


def reference_field_keys(registry=None) -> dict[str, tuple[str, ReferenceAlias]]:
    """``section.field`` -> (canonical key, alias): whose ``min:``/``max:`` each reference field obeys."""
    return {alias.field: (key, alias) for key, aliases in vocabulary(registry).reference for alias in aliases}


def to_canonical(value: Any, alias: ReferenceAlias) -> Any:
    """A reference field's value in the canonical key's terms (its ``map:`` read backwards)."""
    return _unmapped(value, alias.value_map)


# ----------------------------------------------------------------------------- helpers

def _missing(key: str) -> Exception:
    return InputError("canonical config", f"{key} is not given", f"give a value for {key}")


def _first(entries, key: str) -> ReferenceAlias:
    return next(aliases[0] for owner, aliases in entries if owner == key)


def _field_value(sections: dict[str, dict[str, Any]], alias: ReferenceAlias) -> Any:
    section = sections[alias.section]
    if alias.name in section:
        return section[alias.name]
    cls = _sections()[alias.section]
    return next(f.default for f in dataclasses.fields(cls) if f.name == alias.name)


def _field_type(alias: ReferenceAlias, value: Any) -> Any:
    kind = _fields(_sections()[alias.section])[alias.name]
    convert = {"int": int, "float": float, "bool": bool, "str": str}.get(kind)
    return convert(value) if convert is not None and value is not None else value


def _same(a: Any, b: Any) -> bool:
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _mapped(value: Any, value_map: tuple[tuple[Any, Any], ...]) -> Any:
    return next((target for source, target in value_map if _same(source, value)), value)


def _unmapped(value: Any, value_map: tuple[tuple[Any, Any], ...]) -> Any:
    return next((source for source, target in value_map if _same(target, value)), value)


def _to_int(value: Any) -> int | None:
    """An int as written (``32``, or ``"32"`` from a script); None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None
