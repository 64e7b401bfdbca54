"""RawConfig + registry → TrainingConfig: explicit values, derivations, defaults, provenance."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .canonical import CanonicalValue, RawConfig, RawValue, TrainingConfig
from ..errors import InputError
from .registry import (MISSING, KeySpec, Registry, SideSpec, SourceRef, checked_in_code, load_framework, load_registry,
                       raw_value_rules)
from .values import checked, convert, map_value


@dataclass(frozen=True)
class Derived:
    """What a derivation returns: a value and the formula (or flag) that produced it."""

    value: Any
    source: str
    kind: str = "derived"


@dataclass(frozen=True)
class Unknown:
    """A derivation that cannot conclude: ``settle`` names what would settle it."""

    settle: str
    source: str = ""


class UnresolvedArg(Exception):
    """A derivation read an argument whose shell variable could not be resolved."""

    def __init__(self, raw: RawValue):
        super().__init__(raw.origin)
        self.raw = raw


class NeedsInput(Exception):
    """A derivation's input is unknown: the derived value is unknown too (``unknown`` says why)."""

    def __init__(self, unknown: Unknown):
        super().__init__(unknown.settle)
        self.unknown = unknown


class Resolver:
    """Resolves canonical keys for one side, lazily and memoised (derivations call ``key``)."""

    def __init__(self, raw: RawConfig, registry: Registry, overrides: dict[str, CanonicalValue] | None = None):
        self.raw = raw
        self.registry = checked_in_code(registry)     # its derivations exist (once per registry)
        self.framework = raw.framework
        label = load_framework(raw.framework).get("default_label", raw.framework)
        self.label = label.get(raw.generation, raw.framework) if isinstance(label, dict) else str(label)
        self._values: dict[str, CanonicalValue] = dict(overrides or {})
        self._active: set[str] = set()

    # -- API used by derivations -----------------------------------------------------------
    def key(self, key: str) -> CanonicalValue:
        if key not in self._values:
            if key in self._active:
                raise RuntimeError(f"derivation cycle through {key}")
            self._active.add(key)
            try:
                self._values[key] = self._in_range(self.registry[key], self._resolve(key))
            finally:
                self._active.discard(key)
        return self._values[key]

    def _in_range(self, spec: KeySpec, item: CanonicalValue) -> CanonicalValue:
        """The declared ``min:``/``max:`` of the key; derivations divide by these values unguarded."""
        if not item.known or item.value is None or isinstance(item.value, bool):
            return item
        if item.kind == "set":
            spec.bounds.check(item.value, item.source, spec.key)
        else:
            spec.bounds.check(item.value, f"{self.raw.path} [{spec.key}]", f"{spec.key} ({item.kind}: {item.source})")
        return item

    def need(self, *keys: str) -> Any:
        """The values of canonical ``keys`` (one value for one key); NeedsInput if any is unknown."""
        values = []
        for key in keys:
            item = self.key(key)
            if not item.known:
                raise NeedsInput(Unknown(item.settle, f"needs {key}"))
            values.append(item.value)
        return values[0] if len(values) == 1 else tuple(values)

    def value(self, key: str, default: Any = None) -> Any:
        item = self.key(key)
        return item.value if item.known else default

    def arg(self, name: str, kind: str = "any", default: Any = None) -> Any:
        """A raw argument / yaml path converted to ``kind``; ``default`` when absent or unresolved."""
        raw = self.raw.lookup(name)
        if raw is None:
            return default
        if raw.unresolved:
            raise UnresolvedArg(raw)
        return convert(raw.value, kind, raw.origin)

    def origin(self, name: str) -> str:
        raw = self.raw.lookup(name)
        return raw.origin if raw else ""

    # -- resolution -----------------------------------------------------------------------
    def resolve_all(self) -> dict[str, CanonicalValue]:
        for key, spec in self.registry.keys.items():
            if spec.side(self.framework, self.raw.generation) is not None:
                self.key(key)
        return {key: self._values[key] for key in self.registry.keys if key in self._values}

    def _resolve(self, key: str) -> CanonicalValue:
        spec = self.registry[key]
        side = spec.side(self.framework, self.raw.generation)
        if side is None:
            return CanonicalValue(key, None, "unknown", "", f"not available in {self.framework}")
        for source in side.sources:  # a stated value wins over a fixed fact (another model class may read it)
            raw = self.raw.lookup(source.name)
            if raw is not None:
                return self._from_raw(key, spec.type, side, source, raw)
        if side.fixed is not MISSING:
            per_generation = spec.mindformers.get("legacy") is not spec.mindformers.get("mcore")
            return self._fixed(key, spec.type, side, model_fact=per_generation)
        if side.derive is not None:
            try:
                result = self._derive(side.derive)
            except UnresolvedArg as error:
                return CanonicalValue(key, None, "unknown", error.raw.origin, _unresolved_settle(error.raw))
            except NeedsInput as error:
                result = error.unknown
            if isinstance(result, Derived):
                value = result.value if result.value is None else convert(result.value, spec.type, result.source)
                return CanonicalValue(key, value, result.kind, result.source)
            if isinstance(result, Unknown) and side.default is MISSING:
                return CanonicalValue(key, None, "unknown", result.source, result.settle)
        if side.default is not MISSING:
            return self._default(key, spec.type, side)
        return CanonicalValue(key, None, "unknown", "", f"set {side.how_to_set(self.framework)}")

    def _from_raw(self, key: str, kind: str, side: SideSpec, source: SourceRef, raw: RawValue) -> CanonicalValue:
        if raw.unresolved:
            return CanonicalValue(key, None, "unknown", raw.origin, _unresolved_settle(raw))
        value = raw.value
        if isinstance(value, (dict, list)) and kind != "any":
            raise InputError(raw.origin, f"{source.name} is a {'mapping' if isinstance(value, dict) else 'list'}, "
                             f"expected a single value", f"write {source.name}: VALUE")
        for value_map in (source.value_map, side.value_map):
            if value_map is not None:
                found, mapped = map_value(value, value_map)
                if not found:
                    known = ", ".join(str(k) for k in value_map)
                    return CanonicalValue(key, value, "unknown", raw.origin,
                                          f"unrecognised value {value!r}; the CheckList knows {known}")
                value = mapped
        value = convert(value, kind, raw.origin)
        if source.negate:
            value = not value
        return CanonicalValue(key, value, raw.kind, raw.origin)

    def _fixed(self, key: str, kind: str, side: SideSpec, model_fact: bool) -> CanonicalValue:
        """A fact fixed by the implementation; legacy MindFormers model facts (keys.yaml `legacy:` sides)
        hold only for the model classes listed in frameworks/mindformers.yaml (legacy_architectures)."""
        legacy_model = model_fact and self.framework == "mindformers" and self.raw.generation == "legacy"
        arch = self.raw.lookup("model.arch.type") if legacy_model else None
        if arch is not None:
            from .registry import load_framework

            known = load_framework("mindformers").get("legacy_architectures", [])
            if arch.value not in known:
                return CanonicalValue(key, None, "unknown", arch.origin,
                                      f"model.arch.type {arch.value} is not a class this fact is known for "
                                      f"({side.why}): check {side.how_to_set('mindformers') or 'its model code'}")
        return CanonicalValue(key, convert(side.fixed, kind, "keys.yaml"), "fixed", f"fixed: {side.why}")

    def _default(self, key: str, kind: str, side: SideSpec) -> CanonicalValue:
        default = side.default
        label = f"default ({self.label})"
        if isinstance(default, dict) and "by" in default:
            paths = default["by"] if isinstance(default["by"], list) else [default["by"]]
            selector = next((self.arg(path) for path in paths if self.arg(path) is not None), None)
            values = default.get("values", {})
            found, chosen = map_value(selector, values) if selector is not None else (False, None)
            default = chosen if found else default.get("otherwise")
            if found:
                label = f"default for {selector} ({self.label})"
        if side.value_map is not None:  # a default written in the framework's own spelling
            found, mapped = map_value(default, side.value_map)
            default = mapped if found else default
        return CanonicalValue(key, convert(default, kind, "keys.yaml"), "default", label)

    def _derive(self, derive: str | dict) -> Derived | Unknown | None:
        from .derive import DERIVATIONS

        if isinstance(derive, dict):
            target = self.key(derive["copy"])
            if not target.known:
                return Unknown(target.settle, f"= {derive['copy']}")
            return Derived(target.value, f"= {derive['copy']} ({target.source})")
        return DERIVATIONS[derive](self)


def _unresolved_settle(raw: RawValue) -> str:
    return f"${raw.unresolved} is not set where the script is read; give it a value"


def resolve(raw: RawConfig, overrides: dict[str, CanonicalValue] | None = None,
            registry: Registry | None = None, not_interpreted: list[str] | None = None) -> TrainingConfig:
    """Build the canonical config of one side."""
    check_raw_values(raw)
    resolver = Resolver(raw, registry or load_registry(), overrides)
    values = resolver.resolve_all()
    return TrainingConfig(raw.framework, raw.form, raw.path, values, list(raw.notes),
                          list(not_interpreted or []), raw.generation)


def check_raw_values(raw: RawConfig) -> None:
    """Type and range of every raw value a derivation reads (``values:`` in the framework yaml)."""
    for name, rule in raw_value_rules(raw.framework).items():
        item = raw.values.get(name)
        if item is not None and item.value is not None and not item.unresolved:
            checked(item.value, rule.type, rule.bounds, item.origin, name)
