"""``plan.yaml``: the artifacts of every stage, written by ``align prepare``, read by ``align report``.

    schema: workbench.plan/1
    inputs: {megatron: pretrain_llama.sh, mindformers: finetune_llama.yaml}
    artifacts:                       # name (datasets/align_stages.yaml) -> path, relative to this file
      megatron_config: megatron/step12.sh
      megatron_step_log: logs/megatron_step12.log
    differences:                     # CheckList items left different on purpose
      - {item: parallel_optimizer, why: "..."}
    runs:                            # how the artifacts are made (for people; the report shows it)
      step12: {megatron: megatron/step12.sh, mindformers: mindformers/step12.yaml, produces: [...]}
    thresholds:                      # optional: the commands' thresholds the stages use (defaults: theirs)
      loss: {step1_rtol: 5.0e-6}     # workbench loss --step1-rtol / --mean-rtol (the loss metric only)
      localnorm: {floor: 1.0e-5, factor: 3}   # workbench localnorm --floor / --factor
      optim_check: {rtol: 1.0e-6}    # workbench optim-check --rtol

Paths are relative to the plan's folder (absolute ones are kept). Unknown artifact names are an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, location
from .stages import StageCatalog, load_stages

PLAN_FILE = "plan.yaml"
SCHEMA = "workbench.plan/1"
_PLAN_KEYS = {"schema", "inputs", "artifacts", "differences", "runs", "thresholds"}
THRESHOLDS = {"loss": ("step1_rtol", "mean_rtol", "band_margin"), "localnorm": ("floor", "factor"), "optim_check": ("rtol",)}
"""The thresholds a plan may set, per command (each a positive number; the command's default otherwise)."""


@dataclass
class Plan:
    path: Path                                   # the plan.yaml
    artifacts: dict[str, Path]                   # name -> absolute path
    differences: list[dict[str, str]] = field(default_factory=list)
    inputs: dict[str, str] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent

    def present(self, name: str) -> bool:
        """The artifact is named by the plan and exists (a folder must not be empty)."""
        path = self.artifacts.get(name)
        if path is None or not path.exists():
            return False
        return not path.is_dir() or any(path.iterdir())

    def relative(self, name: str) -> str:
        path = self.artifacts[name]
        try:
            return str(path.relative_to(self.folder))
        except ValueError:
            return str(path)


def plan_path(path: Path | str) -> Path:
    """``DIR`` or ``DIR/plan.yaml`` -> the plan file."""
    path = Path(path)
    return path / PLAN_FILE if path.is_dir() else path


def read_plan(path: Path | str, catalog: StageCatalog | None = None) -> Plan:
    """The plan at ``path`` (a folder holding plan.yaml, or the file), validated against the stages."""
    from ..yamlio import load_yaml

    catalog = catalog or load_stages()
    file = plan_path(path)
    doc = load_yaml(file)
    data = doc.data
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InputError(str(file), f"expected a plan with schema: {SCHEMA}", "write it with `workbench align prepare`")
    unknown = set(data) - _PLAN_KEYS
    if unknown:
        raise InputError(str(file), f"unknown keys {', '.join(sorted(map(str, unknown)))}",
                         f"a plan has {', '.join(sorted(_PLAN_KEYS))}")
    return Plan(file, _artifacts(doc, catalog), _differences(doc), _strings(doc, "inputs"),
                data.get("runs") if isinstance(data.get("runs"), dict) else {}, _thresholds(doc))


def _thresholds(doc) -> dict[str, dict[str, float]]:
    import math

    given = doc.data.get("thresholds") or {}
    where = location(doc.path, doc.lines.get("thresholds"), "thresholds")
    if not isinstance(given, dict):
        raise InputError(where, "expected a mapping of command to thresholds", "e.g. loss: {step1_rtol: 5.0e-6}")
    chosen = {}
    for command, values in given.items():
        key = f"thresholds.{command}"
        where = location(doc.path, doc.lines.get(key), key)
        if command not in THRESHOLDS or not isinstance(values, dict):
            raise InputError(where, f"expected one of {', '.join(THRESHOLDS)} with a mapping of thresholds",
                             "e.g. localnorm: {floor: 1.0e-5, factor: 3}")
        for name, value in values.items():
            if name not in THRESHOLDS[command]:
                raise InputError(location(doc.path, doc.lines.get(f"{key}.{name}"), f"{key}.{name}"),
                                 f"unknown threshold {name!r}", f"{command} takes {', '.join(THRESHOLDS[command])}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InputError(location(doc.path, doc.lines.get(f"{key}.{name}"), f"{key}.{name}"),
                                 f"expected a positive number, found {value!r}", "e.g. 1.0e-5")
        chosen[command] = {name: float(value) for name, value in values.items()}
    return chosen


def _artifacts(doc, catalog: StageCatalog) -> dict[str, Path]:
    named = doc.data.get("artifacts")
    if not isinstance(named, dict):
        raise InputError(location(doc.path, doc.lines.get("artifacts"), "artifacts"),
                         "expected a mapping of artifact name to path", "e.g. megatron_config: megatron/step12.sh")
    artifacts = {}
    for name, value in named.items():
        where = location(doc.path, doc.lines.get(f"artifacts.{name}"), f"artifacts.{name}")
        if name not in catalog.artifacts:
            raise InputError(where, f"unknown artifact {name!r}", f"use one of {', '.join(catalog.artifacts)}")
        if not isinstance(value, str) or not value or "\0" in value:
            raise InputError(where, "expected a path", "write the path relative to the plan's folder")
        artifacts[name] = doc.path.parent / value
    return artifacts


def _differences(doc) -> list[dict[str, str]]:
    items = doc.data.get("differences") or []
    where = location(doc.path, doc.lines.get("differences"), "differences")
    if not isinstance(items, list) or not all(isinstance(item, dict) and isinstance(item.get("item"), str)
                                              for item in items):
        raise InputError(where, "expected a list of {item: ID, why: TEXT}", "name the CheckList item ids")
    return [{"item": item["item"], "why": str(item.get("why", ""))} for item in items]


def _strings(doc, key: str) -> dict[str, str]:
    value = doc.data.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InputError(location(doc.path, doc.lines.get(key), key), "expected a mapping of strings",
                         "e.g. {megatron: pretrain.sh, mindformers: finetune.yaml}")
    return {str(k): v for k, v in value.items()}


def plan_text(artifacts: dict[str, str], inputs: dict[str, str] | None = None,
              differences: list[dict[str, str]] | None = None, runs: dict | None = None,
              catalog: StageCatalog | None = None) -> str:
    """plan.yaml's text: artifacts grouped under a comment naming the stage that first reads them."""
    import yaml

    catalog = catalog or load_stages()
    unknown = sorted(set(artifacts) - set(catalog.artifacts))
    if unknown:
        raise ValueError(f"unknown artifacts {unknown}")
    lines = [f"schema: {SCHEMA}", "# Written by `workbench align prepare`; read by `workbench align report DIR`.",
             "# Paths are relative to this file's folder. Stages and artifacts: datasets/align_stages.yaml."]
    if inputs:
        lines.append(yaml.safe_dump({"inputs": inputs}, sort_keys=False).rstrip())
    lines.append("artifacts:")
    done: set[str] = set()
    for stage in catalog.stages:
        names = [name for name in stage.needs + stage.optional if name in artifacts and name not in done]
        if names:
            lines.append(f"  # {stage.id}: {stage.title}")
        for name in names:
            lines.append(f"  {name}: {yaml.safe_dump(artifacts[name]).splitlines()[0]}")
            done.add(name)
    for key, value in (("differences", differences), ("runs", runs)):
        if value:
            lines.append(yaml.safe_dump({key: value}, sort_keys=False, width=100).rstrip())
    return "\n".join(lines) + "\n"
