"""The canonical training config: one value per canonical key, each with its provenance.

Both frameworks' readers produce a :class:`RawConfig` (what the file says, with where it
says it); :mod:`workbench.config.resolver` turns it into a :class:`TrainingConfig` using the
key registry in ``checklists/keys.yaml``. Provenance kinds:

=========  ==============================================================
set        written in the input (``source`` names the flag/key and line)
default    absent; the framework's default applies (``source`` names the version)
derived    computed by the framework from other values (``source`` is the formula)
fixed      fixed by the model implementation (e.g. LlamaForCausalLM has no dropout)
assumed    not knowable from this side alone; taken from the other side, said so
unknown    the input does not say; ``settle`` names the flag/key that would
=========  ==============================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("set", "default", "derived", "fixed", "assumed", "unknown")
# Reader notes that can change a verdict, shown in the report's summary rather than among the harmless
# notes: a dropped (undecided) `if` branch, a sourced file not followed, another launch command, facts
# written for another model class.
CRITICAL_NOTE_MARKERS = ("inside `if` not applied", "not followed", "another launch command",
                         "facts for legacy models are written for", "no class defaults known")


def is_critical(note: str) -> bool:
    return any(marker in note for marker in CRITICAL_NOTE_MARKERS)


@dataclass(frozen=True)
class RawValue:
    """One value as written in an input file, with where it was written."""

    value: Any
    origin: str                    # e.g. "--lr (pretrain.sh:47)" or "optimizer.beta2 (x.yaml:12)"
    unresolved: str | None = None  # the shell variable that could not be resolved
    kind: str = "set"              # "default" / "fixed": supplied by the model class, not written in the file


@dataclass
class RawConfig:
    """What one input file says, before defaults and derivations."""

    framework: str                 # "megatron" | "mindformers"
    form: str                      # how it was read: "shell", "log", "yaml-cfg", "mindformers-legacy", ...
    path: Path
    values: dict[str, RawValue] = field(default_factory=dict)   # arg name or dotted yaml path
    launcher: dict[str, RawValue] = field(default_factory=dict)  # torchrun args (world size)
    notes: list[str] = field(default_factory=list)
    generation: str = ""           # mindformers: "legacy" | "mcore"
    accessed: set[str] = field(default_factory=set)   # names the resolver read (the rest is "not interpreted")

    def lookup(self, name: str) -> RawValue | None:
        self.accessed.add(name)
        raw = self.values.get(name)
        if raw is None or (raw.value is None and raw.unresolved is None):
            return None
        return raw


@dataclass(frozen=True)
class CanonicalValue:
    key: str
    value: Any
    kind: str                      # one of KINDS
    source: str                    # flag/key + line, "default (...)", or the formula
    settle: str = ""               # for unknown: the flag or key that would settle it

    @property
    def known(self) -> bool:
        return self.kind != "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "kind": self.kind, "source": self.source,
                **({"settle": self.settle} if self.settle else {})}


@dataclass
class TrainingConfig:
    """One framework's config in canonical keys."""

    framework: str
    form: str
    path: Path
    values: dict[str, CanonicalValue]
    notes: list[str] = field(default_factory=list)
    not_interpreted: list[str] = field(default_factory=list)
    generation: str = ""

    def __getitem__(self, key: str) -> CanonicalValue:
        return self.values[key]

    def value(self, key: str, default: Any = None) -> Any:
        item = self.values.get(key)
        return item.value if item is not None and item.known else default
