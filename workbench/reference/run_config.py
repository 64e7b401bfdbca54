"""Reference-run configuration from YAML: sections ``model``, ``train``, ``precision``.

Every key is a field of :class:`ModelConfig`, :class:`TrainConfig` or :class:`PrecisionConfig`;
an unknown key or a wrong type is an error naming the file, line and key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.aliases import field_kinds
from ..errors import InputError, location
from ..input_files import expect
from ..yamlio import YamlDoc, load_yaml
from .config import ModelConfig, PrecisionConfig, TrainConfig

SECTIONS = {"model": ModelConfig, "train": TrainConfig, "precision": PrecisionConfig}
_KINDS = {"int": int, "float": float, "bool": bool, "str": str}


def _checked(doc: YamlDoc, section: str, values: Any) -> dict:
    cls = SECTIONS[section]
    if not isinstance(values, dict):
        raise InputError(doc.where(section), f"expected a mapping of {cls.__name__} fields", "write key: value pairs")
    kinds, locate = field_kinds(cls), _locator(doc, section)
    for key, value in values.items():
        where = locate(key)
        if key not in kinds:
            raise InputError(where, f"unknown {section} key {key!r}", f"use one of {', '.join(sorted(kinds))}")
        if kinds[key] in _KINDS:
            expect(value, _KINDS[kinds[key]], where, f"{section}.{key}", "correct the value")
    return values


def _locator(doc: YamlDoc, section: str):
    """field -> ``file:line [section.field]`` where the file sets it, else the file and the key."""
    def locate(name: str) -> str:
        dotted = f"{section}.{name}"
        return location(doc.path, doc.lines.get(dotted), dotted)
    return locate


def load_run_config(path: Path | str | None = None) -> tuple[ModelConfig, TrainConfig]:
    """(model, train) from a YAML file; the defaults (the tiny 2-layer model) when ``path`` is None."""
    if path is None:
        return ModelConfig().validate(), TrainConfig().validate()
    doc = load_yaml(path)
    data = doc.data or {}
    if not isinstance(data, dict):
        raise InputError(str(path), "expected sections model:, train:, precision:", "see docs/reference-models.md")
    unknown = set(data) - set(SECTIONS)
    if unknown:
        raise InputError(doc.where(sorted(unknown)[0]), f"unknown section(s) {sorted(unknown)}",
                         f"use {', '.join(SECTIONS)}")
    parts = {name: _checked(doc, name, data[name]) for name in SECTIONS if name in data}
    precision = PrecisionConfig(**parts.get("precision", {}))
    model = ModelConfig(**parts.get("model", {})).validate(_locator(doc, "model"))
    train = TrainConfig(**parts.get("train", {}), precision=precision).validate(_locator(doc, "train"))
    return model, train
