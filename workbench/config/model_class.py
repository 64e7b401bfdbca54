"""What an mcore-style MindFormers model class supplies when the yaml does not say it.

``use_legacy: False`` yamls name a model type (model.model_config.model_type); its configuration class
registers defaults (``register_mf_model_parameter`` and the ``__init__`` defaults) and its model code
fixes some values whatever the yaml says. checklists/frameworks/mindformers.yaml (model_classes) lists
them per model type with the source file; they enter the raw config as values of kind "default" or
"fixed" with that source as their origin, so derivations and keys read them like written values.
"""
from __future__ import annotations

from .canonical import RawConfig, RawValue
from .registry import load_framework

MODEL_TYPE = "model.model_config.model_type"
PREFIX = "model.model_config."


def apply_model_class(raw: RawConfig) -> None:
    model_type = raw.values.get(MODEL_TYPE)
    classes = load_framework("mindformers").get("model_classes", {})
    spec = classes.get(model_type.value) if model_type is not None and isinstance(model_type.value, str) else None
    if spec is None:
        if model_type is not None and model_type.value:
            raw.notes.append(f"model_type {model_type.value}: no class defaults known to the CheckList "
                             f"(it knows {', '.join(classes)}); generic TransformerConfig defaults applied")
        return
    label = f"{spec['class']} ({spec['source']})"
    for name, value in spec.get("defaults", {}).items():
        if raw.lookup(PREFIX + name) is None and not _alias_written(raw, name, spec):
            raw.values[PREFIX + name] = RawValue(value, f"default of {label}", kind="default")
    for name, fact in spec.get("fixed", {}).items():
        raw.values[PREFIX + name] = RawValue(fact["value"], f"fixed by the {model_type.value} model: {fact['why']}",
                                                 kind="fixed")


def _alias_written(raw: RawConfig, name: str, spec: dict) -> bool:
    """A default is not applied where the yaml writes the same setting under another accepted name."""
    return any(raw.lookup(PREFIX + alias) is not None for alias in spec.get("aliases", {}).get(name, []))
