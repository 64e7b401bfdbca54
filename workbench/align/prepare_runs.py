"""The runs ``align prepare`` writes and their settings, from ``datasets/align_runs.yaml`` (validated).

    runs = load_runs()
    runs.runs["step12"].settings      # {"lr.decay_style": "constant", ...} canonical key -> value
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import InputError, location

RUNS_FILE = "align_runs.yaml"
SIDES = ("megatron", "mindformers")
CAPTURES = ("batches", "grads")
_TOP_KEYS = {"kind", "every_run", "parallel_off", "runs", "set_through", "set_with", "differences"}
_RUN_KEYS = {"title", "sides", "steps", "settings", "capture", "produces", "from"}


@dataclass(frozen=True)
class Run:
    name: str
    title: str
    sides: tuple[str, ...]
    steps: int | str                  # 2, or "long" (align prepare --long-steps)
    settings: dict[str, Any]          # canonical key -> value (None: remove; {side: value}: one side only)
    capture: tuple[str, ...]
    produces: tuple[str, ...]
    start: str = ""                   # `from:` the run whose written files this one starts from


@dataclass(frozen=True)
class RunCatalog:
    path: Path
    every_run: dict[str, Any]
    parallel_off: dict[str, Any]
    runs: dict[str, Run]
    set_through: dict[str, dict[str, str]]   # derived key -> {side: flag or yaml path}
    set_with: dict[str, dict[str, Any]]      # key -> {other key: value} set with it on the same side
    differences: dict[str, str]              # CheckList item id -> why


def _where(doc, key: str) -> str:
    return location(doc.path, doc.lines.get(key), key)


def _settings(doc, key: str, value: Any, registry) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(_where(doc, key), "expected a mapping of canonical key to value", "e.g. optimizer.eps: 1.0e-8")
    for name, setting in value.items():
        if name not in registry.keys:
            raise InputError(_where(doc, f"{key}.{name}"), f"unknown canonical key {name!r}",
                             "use a key of checklists/keys.yaml")
        if isinstance(setting, dict) and setting and not set(setting) - set(SIDES):
            if any(isinstance(v, (dict, list)) for v in setting.values()):
                raise InputError(_where(doc, f"{key}.{name}"), "expected a single value per side", "e.g. {mindformers: fp32}")
        elif isinstance(setting, (dict, list)):
            raise InputError(_where(doc, f"{key}.{name}"), "expected a single value, or {megatron: V, mindformers: V}",
                             "write a number, string, bool or null")
    return dict(value)


def _names(doc, key: str, value: Any, allowed) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(_where(doc, key), "expected a list of names", f"use some of {', '.join(allowed)}")
    unknown = [item for item in value if item not in allowed]
    if unknown:
        raise InputError(_where(doc, key), f"unknown {', '.join(unknown)}", f"use some of {', '.join(allowed)}")
    return tuple(value)


def _run(doc, name: str, body: Any, registry, artifacts) -> Run:
    key = f"runs.{name}"
    if not isinstance(body, dict) or set(body) - _RUN_KEYS:
        raise InputError(_where(doc, key), f"expected a mapping with some of {', '.join(sorted(_RUN_KEYS))}",
                         "see the schema at the top of the file")
    title = body.get("title")
    if not isinstance(title, str) or not title.strip():
        raise InputError(_where(doc, f"{key}.title"), "expected a one-line title", "say what the run is for")
    steps = body.get("steps")
    if steps != "long" and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
        raise InputError(_where(doc, f"{key}.steps"), f"expected a step count >= 1 or 'long', found {steps!r}",
                         "e.g. steps: 2")
    return Run(name, title, _names(doc, f"{key}.sides", body.get("sides"), SIDES), steps,
               _settings(doc, f"{key}.settings", body.get("settings"), registry),
               _names(doc, f"{key}.capture", body.get("capture", []), CAPTURES),
               _names(doc, f"{key}.produces", body.get("produces", []), artifacts), _start(doc, key, body))


def _start(doc, key: str, body: dict) -> str:
    start = body.get("from", "")
    if start == "":
        return ""
    if not isinstance(start, str) or start not in (doc.data.get("runs") or {}) or start == key.split(".", 1)[1]:
        raise InputError(_where(doc, f"{key}.from"), f"expected the name of another run, found {start!r}",
                         "name a run listed above it")
    return start


def _set_through(doc, value: Any, registry) -> dict[str, dict[str, str]]:
    value = value or {}
    if not isinstance(value, dict):
        raise InputError(_where(doc, "set_through"), "expected a mapping of canonical key to {side: name}",
                         "e.g. parallel.micro_batches: {mindformers: runner_config.gradient_accumulation_steps}")
    for name, sides in value.items():
        where = _where(doc, f"set_through.{name}")
        if name not in registry.keys:
            raise InputError(where, f"unknown canonical key {name!r}", "use a key of checklists/keys.yaml")
        if not isinstance(sides, dict) or set(sides) - set(SIDES) or not all(isinstance(v, str) and v
                                                                             for v in sides.values()):
            raise InputError(where, "expected {megatron: FLAG, mindformers: PATH}", "name one setting per side")
    return {str(name): dict(sides) for name, sides in value.items()}


def _set_with(doc, value: Any, registry) -> dict[str, dict[str, Any]]:
    value = value or {}
    if not isinstance(value, dict):
        raise InputError(_where(doc, "set_with"), "expected a mapping of canonical key to {key: value}",
                         "e.g. lr.warmup_steps: {lr.warmup_fraction: null}")
    out = {}
    for name, also in value.items():
        if name not in registry.keys:
            raise InputError(_where(doc, f"set_with.{name}"), f"unknown canonical key {name!r}",
                             "use a key of checklists/keys.yaml")
        out[str(name)] = _settings(doc, f"set_with.{name}", also, registry)
    return out


def _differences(doc, value: Any) -> dict[str, str]:
    value = value or {}
    if not isinstance(value, dict) or not all(isinstance(v, str) and v.strip() for v in value.values()):
        raise InputError(_where(doc, "differences"), "expected a mapping of CheckList item id to why",
                         "e.g. data_parallel: the reference runs on more cards")
    return {str(k): v for k, v in value.items()}


@lru_cache(maxsize=4)
def load_runs(path: Path | None = None) -> RunCatalog:
    """The runs of ``datasets/align_runs.yaml`` (or ``path``), validated against keys.yaml and the stages."""
    from ..config.registry import load_registry
    from ..knowledge import load_knowledge
    from .stages import load_stages

    doc, data = load_knowledge("datasets", RUNS_FILE, "align_runs", "the runs align prepare writes", path)
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise InputError(_where(doc, sorted(map(str, unknown))[0]), f"unknown key {sorted(map(str, unknown))[0]!r}",
                         f"use {', '.join(sorted(_TOP_KEYS))}")
    registry, artifacts = load_registry(), load_stages().artifacts
    runs = data.get("runs")
    if not isinstance(runs, dict) or not runs:
        raise InputError(_where(doc, "runs"), "expected a mapping of run name to run", "see the schema")
    return RunCatalog(doc.path, _settings(doc, "every_run", data.get("every_run"), registry),
                      _settings(doc, "parallel_off", data.get("parallel_off"), registry),
                      {str(name): _run(doc, str(name), body, registry, artifacts) for name, body in runs.items()},
                      _set_through(doc, data.get("set_through"), registry), _set_with(doc, data.get("set_with"), registry),
                      _differences(doc, data.get("differences")))
