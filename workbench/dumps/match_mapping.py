"""The user's mapping file (``workbench compare --mapping FILE``): pairs matching cannot find, or
overrides. YAML, two optional sections (docs/compare.md):

    modules:                       # module path in A: module path in B (replaces the spec's resolution)
      decoder.final_layernorm: model.norm_out
    calls:                         # one call in A: one call in B (the row names without .input/.output/...)
      Functional.gelu.0.forward: Cell.gelu.GELU.forward.0

Validated when loaded (file:line errors).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, location
from ..yamlio import load_yaml

SECTIONS = ("modules", "calls")


@dataclass
class Mapping:
    modules: dict[str, str] = field(default_factory=dict)       # A path -> B path
    calls: dict[str, str] = field(default_factory=dict)         # A call -> B call
    source: str = ""

    def __post_init__(self):
        self._reverse = {b: a for a, b in self.modules.items()}

    def module_a(self, path: str) -> str | None:
        return path if path in self.modules else None

    def module_b(self, path: str) -> str | None:
        return self._reverse.get(path)

    def call_pairs(self, calls_a: list, calls_b: list) -> list[tuple]:
        """The explicitly mapped call pairs among these calls (one unit)."""
        if not self.calls:
            return []
        by_stem = {c.stem: c for c in calls_b}
        return [(c, by_stem[self.calls[c.stem]]) for c in calls_a
                if c.stem in self.calls and self.calls[c.stem] in by_stem]


def load_mapping(path: Path | str) -> Mapping:
    doc = load_yaml(path)
    data = doc.data if doc.data is not None else {}
    if not isinstance(data, dict):
        raise InputError(location(path, 1), f"expected a mapping with {' and/or '.join(SECTIONS)}, "
                         f"found {type(data).__name__}", "see docs/compare.md (the mapping file)")
    sections = {}
    for name, value in data.items():
        where = location(path, doc.lines.get(str(name)), str(name))
        if name not in SECTIONS:
            raise InputError(where, f"unknown section {name!r}", f"use {', '.join(SECTIONS)}")
        if not isinstance(value, dict):
            raise InputError(where, f"expected a mapping of A names to B names, found {type(value).__name__}",
                             "e.g. modules: {decoder.final_layernorm: model.norm_out}")
        for key, other in value.items():
            if not isinstance(key, str) or not isinstance(other, str) or not key or not other:
                raise InputError(location(path, doc.lines.get(f"{name}.{key}"), f"{name}.{key}"),
                                 f"expected a name: a name, found {key!r}: {other!r}", "quote both names")
        targets = list(value.values())
        duplicate = next((t for t in targets if targets.count(t) > 1), None)
        if duplicate is not None:
            raise InputError(where, f"{duplicate!r} is the target of two names", "map each B name once")
        sections[name] = dict(value)
    return Mapping(sections.get("modules", {}), sections.get("calls", {}), str(path))
