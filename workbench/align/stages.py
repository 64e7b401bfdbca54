"""The method's stages, from ``datasets/align_stages.yaml`` (validated when loaded).

    for stage in load_stages().stages:
        stage.id, stage.needs          # "weights", ("megatron_checkpoint", "mindformers_checkpoint")
"""
from __future__ import annotations

import re
import string
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location

STAGES_FILE = "align_stages.yaml"
_OPTIONAL = re.compile(r"\[([^\[\]]*)\]")
_STAGE_KEYS = {"id", "title", "needs", "optional", "check", "next", "explained_by"}


@dataclass(frozen=True)
class Stage:
    id: str
    title: str
    needs: tuple[str, ...]
    optional: tuple[str, ...]
    check: str                      # the deciding command, {artifact} placeholders, [optional segments]
    next: str                       # what to do when it fails
    explained_by: tuple[str, ...] = ()   # later stages that localize its failure

    def command(self, paths: dict[str, str], present: Collection[str] | None = None) -> str:
        """``check`` with the plan's paths filled in. A ``[segment]`` is kept (without its brackets) when every
        artifact it names is ``present`` (all are when ``present`` is None), and left out otherwise."""
        def segment(found: re.Match) -> str:
            inner = found.group(1)
            wanted = [name for _, name, _, _ in string.Formatter().parse(inner) if name]
            return inner if present is None or all(name in present for name in wanted) else ""

        text = " ".join(_OPTIONAL.sub(segment, self.check).split())
        return text.format_map({name: paths.get(name, "{" + name + "}") for name in self.placeholders})

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(name for _, name, _, _ in string.Formatter().parse(self.check) if name)


@dataclass(frozen=True)
class StageCatalog:
    path: Path
    artifacts: dict[str, str]        # name -> what it holds
    stages: tuple[Stage, ...]

    def stage(self, stage_id: str) -> Stage:
        for stage in self.stages:
            if stage.id == stage_id:
                return stage
        raise KeyError(stage_id)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(stage.id for stage in self.stages)


def _names(doc, key: str, value, artifacts: dict) -> tuple[str, ...]:
    where = location(doc.path, doc.lines.get(key), key)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(where, "expected a list of artifact names", "e.g. [megatron_config, mindformers_config]")
    unknown = [item for item in value if item not in artifacts]
    if unknown:
        raise InputError(where, f"unknown artifacts {', '.join(unknown)}", "declare them under artifacts: first")
    return tuple(value)


def _stage_ids(doc, key: str, value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(location(doc.path, doc.lines.get(key), key), "expected a list of stage ids", "e.g. [dumps]")
    return tuple(value)


def _text(doc, key: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(location(doc.path, doc.lines.get(key), key), "expected a non-empty string", "write one line")
    return value


def _stage(doc, index: int, body, artifacts: dict, seen: set) -> Stage:
    key = f"stages.{index}"
    where = location(doc.path, doc.lines.get(key), key)
    if not isinstance(body, dict):
        raise InputError(where, "expected a mapping", "id, title, needs, check, next")
    unknown = set(body) - _STAGE_KEYS
    if unknown:
        raise InputError(where, f"unknown keys {', '.join(sorted(map(str, unknown)))}",
                         f"use {', '.join(sorted(_STAGE_KEYS))}")
    stage_id = _text(doc, f"{key}.id", body.get("id"))
    if stage_id in seen:
        raise InputError(location(doc.path, doc.lines.get(f"{key}.id"), f"{key}.id"), f"stage {stage_id!r} twice",
                         "give each stage its own id")
    seen.add(stage_id)
    stage = Stage(stage_id, _text(doc, f"{key}.title", body.get("title")),
                  _names(doc, f"{key}.needs", body.get("needs"), artifacts),
                  _names(doc, f"{key}.optional", body.get("optional", []), artifacts),
                  _text(doc, f"{key}.check", body.get("check")), _text(doc, f"{key}.next", body.get("next")),
                  _stage_ids(doc, f"{key}.explained_by", body.get("explained_by", [])))
    stray = [name for name in stage.placeholders if name not in stage.needs + stage.optional]
    if stray:
        raise InputError(location(doc.path, doc.lines.get(f"{key}.check"), f"{key}.check"),
                         f"placeholders {', '.join(stray)} are not artifacts of this stage", "list them under needs:")
    return stage


@lru_cache(maxsize=4)
def load_stages(path: Path | None = None) -> StageCatalog:
    """The stages of ``datasets/align_stages.yaml`` (or ``path``), validated."""
    from ..knowledge import load_knowledge

    doc, data = load_knowledge("datasets", STAGES_FILE, "align_stages", "the method's stages", path)
    artifacts = data.get("artifacts")
    if not isinstance(artifacts, dict) or not all(isinstance(v, str) for v in artifacts.values()):
        raise InputError(location(doc.path, doc.lines.get("artifacts"), "artifacts"),
                         "expected a mapping of artifact name to description", "name: what it holds")
    stages = data.get("stages")
    if not isinstance(stages, list) or not stages:
        raise InputError(location(doc.path, doc.lines.get("stages"), "stages"), "expected a list of stages",
                         "see the schema at the top of the file")
    seen: set[str] = set()
    catalog = StageCatalog(doc.path, dict(artifacts),
                           tuple(_stage(doc, index, body, artifacts, seen) for index, body in enumerate(stages)))
    _check_explanations(doc, catalog)
    return catalog


def _check_explanations(doc, catalog: StageCatalog) -> None:
    for index, stage in enumerate(catalog.stages):
        later = catalog.ids[index + 1:]
        wrong = [name for name in stage.explained_by if name not in later]
        if wrong:
            key = f"stages.{index}.explained_by"
            raise InputError(location(doc.path, doc.lines.get(key), key), f"{', '.join(wrong)} is not a later stage",
                             f"name stages after {stage.id}: {', '.join(later) or 'none'}")
