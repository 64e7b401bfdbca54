"""The one size vocabulary: canonical keys, and their names as spec parameters, HF keys, reference fields.

Each canonical key of ``checklists/keys.yaml`` may declare ``aliases:`` (parsed and checked when the
registry loads, :mod:`workbench.config.aliases`); this module translates by key, with no per-name
tables in Python::

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
from typing import Any, Callable, Mapping

from ..errors import InputError
from .aliases import NO_VALUE, ReferenceAlias, Vocabulary, field_kinds, reference_classes


def vocabulary(registry=None) -> Vocabulary:
    """The registry's aliases, indexed (checked when the registry loaded)."""
    from .registry import load_registry

    return (registry or load_registry()).vocabulary


def _reference_vocabulary(registry=None) -> Vocabulary:
    """:func:`vocabulary`, its reference fields checked against the reference configs (once per registry)."""
    from .registry import checked_in_code, load_registry

    return checked_in_code(registry or load_registry()).vocabulary


# ----------------------------------------------------------------------------- canonical values

def known_values(config) -> dict[str, Any]:
    """A resolved TrainingConfig's settled values, key -> value."""
    return {key: item.value for key, item in config.values.items() if item.known}


def stated_in(config, raw, registry=None) -> Callable[[str], bool]:
    """key -> whether the config itself states it: one of the key's arguments / yaml paths is written in
    ``raw`` (a model class's default included), or ``config`` settled it from a flag it writes (kind set)."""
    from .registry import load_registry

    registry = registry or load_registry()

    def stated(key: str) -> bool:
        item = config.values.get(key)
        if item is not None and item.kind == "set":
            return True
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
    out: dict[str, dict[str, Any]] = {name: {} for name in reference_classes()}
    entries = _reference_vocabulary(registry).reference
    for deferred in (False, True):            # the fields a `requires:` reads are set first
        for key, aliases in entries:
            for alias in aliases:
                if (bool(alias.requires) != deferred or alias.section not in sections
                        or alias.name not in field_kinds(reference_classes()[alias.section])):
                    continue
                if alias.requires and not _field_value(out, _first(entries, alias.requires)):
                    continue
                if key not in values:
                    if alias.optional or alias.unset is not NO_VALUE:   # the field keeps its default / "not given"
                        continue
                    raise missing(key)
                out[alias.section][alias.name] = _field_type(alias, _mapped(values[key], alias.value_map))
    return out


def model_config(values: Mapping[str, Any], missing: Callable[[str], Exception] | None = None, registry=None,
                 where: str = "canonical config"):
    """The reference ModelConfig of these canonical values (not yet validated). A key whose alias is a
    computed property (``model.head_dim``) must agree with it: the reference has no field to follow it."""
    from ..reference.config import ModelConfig

    model = ModelConfig(**reference_sections(values, missing, registry, ("model",))["model"])
    for key, aliases in _reference_vocabulary(registry).reference:
        for alias in aliases:
            computed = getattr(model, alias.name) if alias.section == "model" else None
            if alias.name in field_kinds(ModelConfig) or computed is None or key not in values:
                continue
            if not _same(computed, _mapped(values[key], alias.value_map)):
                raise InputError(where, f"{key} is {values[key]!r}; the reference model computes {alias.field} = "
                                 f"{computed!r} and cannot follow it", f"use sizes where {key} is {computed!r}")
    return model


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
    entries = _reference_vocabulary(registry).reference
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
    return {alias.field: (key, alias) for key, aliases in _reference_vocabulary(registry).reference for alias in aliases}


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
    cls = reference_classes()[alias.section]
    return next(f.default for f in dataclasses.fields(cls) if f.name == alias.name)


def _field_type(alias: ReferenceAlias, value: Any) -> Any:
    kind = field_kinds(reference_classes()[alias.section])[alias.name]
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
