"""The fault catalog ``datasets/demo_faults.yaml``: known migration bugs the demo plants on the MindSpore side.

    faults = load_faults()                # name -> Fault, validated (file:line [key] on any problem)
    faults["norm_epsilon"].stage          # "step1_loss": the first stage of the method that must fail
    faults["norm_epsilon"].plant          # Plant(kind="model", values={"norm_epsilon_layer": 0, ...})

Each fault is planted by kind: ``model`` (a :class:`~workbench.reference.ms_model.PlantedFaults` field),
``precision`` (one MindSpore compute dtype differs from the config), ``optimizer``
(:class:`~workbench.reference.ms_train.OptimizerFaults`), ``schedule`` (the MindSpore side computes
its lr with other schedule values), all by ``workbench reference train --fault NAME``; ``weights``
(the converted checkpoint rewritten) and ``replay`` (the replayed batches changed) by
:mod:`workbench.demo.faults`. This module imports neither torch nor mindspore.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import InputError, location

CATALOG_FILE = "demo_faults.yaml"


def stages() -> tuple[str, ...]:
    """The method's stages in order (datasets/align_stages.yaml): a fault's ``stage`` is the first one that must fail."""
    from ..align.stages import load_stages

    return load_stages().ids

DTYPES = ("fp32", "fp16", "bf16")
PRECISION_KNOBS = ("param_dtype", "compute_dtype", "embedding_dtype", "softmax_dtype", "norm_dtype", "rotary_dtype",
                   "residual_dtype")
PLANT_VALUES: dict[str, dict[str, type | tuple]] = {
    "model": {"softmax_fp16_layer": int, "norm_epsilon_layer": int, "wrong_norm_epsilon": float,
              "rotary_base": float},
    "precision": {"knob": PRECISION_KNOBS, "dtype": DTYPES},
    "optimizer": {"weight_decay_1d": bool, "bias_correction": bool},
    "schedule": {"decay_style": ("constant", "linear", "cosine"), "min_lr": float, "warmup_steps": int},
    "weights": {"swap_gate_up": bool, "pad_vocab_rows": int},
    "replay": {"shift_steps": int},
}
"""Per plant kind: each value's type, or its choices (a tuple of strings)."""
REQUIRED_VALUES = {"precision": ("knob", "dtype")}
CODE_KINDS = ("model", "precision", "optimizer", "schedule")
"""Kinds ``workbench reference train --fault`` plants; ``weights`` and ``replay`` are planted in files."""
KEYS = ("name", "title", "stage", "component", "report", "plant", "why", "parameters")


@dataclass(frozen=True)
class Plant:
    kind: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fault:
    name: str
    title: str
    stage: str            # the first stage of the method that must fail (stages())
    component: str        # what the report must name
    plant: Plant
    why: str              # why this stage, from the measured numbers
    report: str = ""      # a regular expression the align report's component must match (the demo tier checks it)
    parameters: tuple[str, ...] = ()   # regular expressions over Megatron parameter names: the component's evidence


def _where(doc, key: str) -> str:
    return location(doc.path, doc.lines.get(key), key)


def _text(doc, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(_where(doc, key), f"expected a non-empty string, found {_short(value)}", "write text")
    return value.strip()


def _short(value: Any) -> str:
    from ..input_files import type_word

    text = repr(value)
    return f"{type_word(value)} {text if len(text) <= 40 else text[:37] + '...'}"


def _choice(doc, key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InputError(_where(doc, key), f"expected one of {', '.join(choices)}, found {_short(value)}",
                         f"use one of {', '.join(choices)}")
    return value


def _plant_value(doc, key: str, value: Any, kind: type | tuple) -> Any:
    from ..input_files import expect, expect_count, expect_in_range

    if isinstance(kind, tuple):
        return _choice(doc, key, value, kind)
    if kind is int:
        return expect_count(value, _where(doc, key), key)
    if kind is float:
        return float(expect_in_range(value, _where(doc, key), key, minimum=0.0))
    return expect(value, kind, _where(doc, key), key)


def _plant(doc, key: str, value: Any) -> Plant:
    if not isinstance(value, dict):
        raise InputError(_where(doc, key), f"expected a mapping with kind: and its values, found {_short(value)}",
                         "e.g. {kind: optimizer, bias_correction: false}")
    kind = _choice(doc, f"{key}.kind", value.get("kind"), tuple(PLANT_VALUES))
    allowed = PLANT_VALUES[kind]
    values = {}
    for name, item in value.items():
        if name == "kind":
            continue
        if name not in allowed:
            raise InputError(_where(doc, f"{key}.{name}"), f"unknown {kind} value {name!r}",
                             f"use {', '.join(allowed)}")
        values[name] = _plant_value(doc, f"{key}.{name}", item, allowed[name])
    missing = [name for name in REQUIRED_VALUES.get(kind, ()) if name not in values]
    if missing or not values:
        raise InputError(_where(doc, key), f"a {kind} plant needs {', '.join(missing or allowed)}",
                         f"add {', '.join(missing or list(allowed)[:1])}")
    return Plant(kind, values)


def _parameters(doc, key: str, value: Any) -> tuple[str, ...]:
    import re

    if not isinstance(value, list):
        raise InputError(_where(doc, key), f"expected a list of regular expressions, found {_short(value)}",
                         'e.g. ["input_layernorm"]')
    for index, item in enumerate(value):
        text = _text(doc, f"{key}.{index}", item)
        try:
            re.compile(text)
        except re.error as error:
            raise InputError(_where(doc, f"{key}.{index}"), f"bad regular expression ({error})",
                             "fix the pattern") from None
    return tuple(value)


def _fault(doc, index: int, entry: Any) -> Fault:
    key = f"faults.{index}"
    if not isinstance(entry, dict):
        raise InputError(_where(doc, key), f"expected a mapping (name, title, stage, ...), found {_short(entry)}",
                         "see the schema at the top of the file")
    unknown = sorted(map(str, set(entry) - set(KEYS)))
    if unknown:
        raise InputError(_where(doc, f"{key}.{unknown[0]}"), f"unknown key {unknown[0]!r}", f"use {', '.join(KEYS)}")
    missing = [name for name in KEYS[:-1] if name not in entry]
    if missing:
        raise InputError(_where(doc, key), f"fault lacks {', '.join(missing)}", "every fault states " + ", ".join(KEYS[:-1]))
    name = _text(doc, f"{key}.name", entry["name"])
    if not name.replace("_", "").isalnum() or not name.islower():
        raise InputError(_where(doc, f"{key}.name"), f"name {name!r} is not a lower-case identifier",
                         "use letters, digits and _ (it is typed on command lines)")
    return Fault(name=name, title=_text(doc, f"{key}.title", entry["title"]),
                 stage=_choice(doc, f"{key}.stage", entry["stage"], stages()),
                 component=_text(doc, f"{key}.component", entry["component"]),
                 plant=_plant(doc, f"{key}.plant", entry["plant"]), why=_text(doc, f"{key}.why", entry["why"]),
                 parameters=_parameters(doc, f"{key}.parameters", entry.get("parameters", [])),
                 report=_parameters(doc, f"{key}.report", [entry["report"]])[0])


@dataclass(frozen=True)
class Thresholds:
    """The demo's verdict thresholds for its fp32 pair (``thresholds:`` of the catalog), set from the
    measured clean torch-vs-MindSpore noise: ``workbench loss --step1-rtol``, ``workbench localnorm
    --floor`` and ``--factor``."""

    step1_loss_rtol: float
    localnorm_floor: float
    localnorm_factor: float
    long_band_margin: float      # workbench loss's band margin in the long-run stages (one rerun's band is a sample)


def _document(path: Path | None):
    from ..knowledge import load_knowledge

    doc, data = load_knowledge("datasets", CATALOG_FILE, "demo_faults", "the demo's fault catalog", path)
    unknown = sorted(map(str, set(data) - {"kind", "faults", "thresholds"}))
    if unknown:
        raise InputError(_where(doc, unknown[0]), f"unknown key {unknown[0]!r}", "use kind, thresholds and faults")
    return doc, data


@lru_cache(maxsize=4)
def load_thresholds(path: Path | None = None) -> Thresholds:
    """The catalog's ``thresholds:`` (every field, each a positive number), validated."""
    from ..input_files import expect_in_range

    doc, data = _document(path)
    values = data.get("thresholds")
    names = [item.name for item in fields(Thresholds)]
    if not isinstance(values, dict) or sorted(values) != sorted(names):
        raise InputError(_where(doc, "thresholds"), f"expected a mapping of {', '.join(names)}, found {_short(values)}",
                         "state each threshold")
    return Thresholds(**{name: float(expect_in_range(values[name], _where(doc, f"thresholds.{name}"),
                                                     f"thresholds.{name}", minimum=1e-12)) for name in names})


@lru_cache(maxsize=4)
def load_faults(path: Path | None = None) -> dict[str, Fault]:
    """Every fault of ``datasets/demo_faults.yaml`` (or ``path``) by name, in file order, validated."""
    doc, data = _document(path)
    entries = data.get("faults")
    if not isinstance(entries, list) or not entries:
        raise InputError(_where(doc, "faults"), "expected a non-empty list of faults", "see the schema")
    faults: dict[str, Fault] = {}
    for index, entry in enumerate(entries):
        fault = _fault(doc, index, entry)
        if fault.name in faults:
            raise InputError(_where(doc, f"faults.{index}.name"), f"fault {fault.name!r} is listed twice",
                             "give each fault its own name")
        faults[fault.name] = fault
    return faults


def find_fault(name: str, faults: dict[str, Fault] | None = None) -> Fault:
    """The fault called ``name``; an unknown name is an :class:`InputError` listing the catalog."""
    faults = load_faults() if faults is None else faults
    if name not in faults:
        raise InputError("--fault", f"unknown fault {name!r}", f"use one of {', '.join(faults)} (--list-faults)")
    return faults[name]


def format_catalog(faults: dict[str, Fault]) -> str:
    """One block per fault: name, stage, component, how it is planted, title."""
    width = max(len(name) for name in faults)
    lines = [f"{'fault':<{width}}  {'first failing stage':<19}  {'plant':<10}  component / title"]
    for fault in faults.values():
        lines.append(f"{fault.name:<{width}}  {fault.stage:<19}  {fault.plant.kind:<10}  {fault.component}")
        lines.append(f"{'':<{width}}  {'':<19}  {'':<10}  {fault.title}")
    return "\n".join(lines)
