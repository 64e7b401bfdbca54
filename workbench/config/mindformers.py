"""Read a MindFormers yaml (legacy LlamaConfig style or ``use_legacy: False``) into a RawConfig.

Every node of the yaml (containers and leaves) is addressable by its dotted path; anchors
and aliases are resolved by the safe loader, so a value reached through ``*train_dataset``
reports the line of its anchor.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError, location
from ..input_files import expect
from ..yamlio import YamlDoc, parse_yaml, read_text
from .canonical import RawConfig, RawValue
from .model_class import apply_model_class
from .registry import container_paths, load_framework

_MEGATRON_HINTS = ("language_model", "model_parallel", "num_layers", "tensor_model_parallel_size", "num-layers")


def read_mindformers(path: Path | str) -> RawConfig:
    path = Path(path)
    text = read_text(path)                           # read ONCE: a pipe (<(cat x)) cannot be read again
    if path.suffix not in (".yaml", ".yml"):
        head = text[:4096]
        if "torchrun" in head or "pretrain_" in head or "arguments" in head:
            raise InputError(str(path), "this looks like a Megatron launch script or log, not a MindFormers yaml",
                             "pass it as the first argument: workbench checklist MEGATRON MINDFORMERS")
    doc = parse_yaml(text, path)
    _check_is_mindformers(doc)
    generation = _generation(doc)
    _check_containers(doc)
    raw = RawConfig("mindformers", f"mindformers-{generation}", path, generation=generation)
    _flatten(doc, doc.data, "", raw.values)
    if generation == "mcore":
        apply_model_class(raw)
    arch = doc.get("model.arch.type", None)
    known = load_framework("mindformers").get("legacy_architectures", [])
    if generation == "legacy" and arch and arch not in known:
        raw.notes.append(f"model.arch.type {arch}: the CheckList's fixed facts for legacy models are written for "
                         f"{', '.join(known)}; check values marked 'fixed'")
    return raw


def _check_is_mindformers(doc: YamlDoc) -> None:
    if not isinstance(doc.data, dict):
        found = "an empty file" if doc.data is None else type(doc.data).__name__
        raise InputError(str(doc.path), f"expected a MindFormers yaml mapping, found {found}",
                         "pass the training yaml (the one given to run_mindformer.py --config)")
    signature = load_framework("mindformers").get("signature", [])
    if any(doc.has(key) for key in signature):
        return
    if any(key in doc.data for key in _MEGATRON_HINTS):
        raise InputError(str(doc.path), "this looks like a Megatron config (--yaml-cfg or flat arguments), "
                         "not a MindFormers yaml", "pass it as the first argument: workbench checklist MEGATRON MINDFORMERS")
    top = ", ".join(list(map(str, doc.data))[:6])
    raise InputError(str(doc.path), f"not a MindFormers config (detected a YAML mapping with top-level keys "
                     f"{top}): none of {', '.join(signature)} is present",
                     "pass the training yaml given to run_mindformer.py --config")


def _check_containers(doc: YamlDoc) -> None:
    """Each section the CheckList reads must be a mapping (or a list): ``model: 5`` is an error, not a default."""
    for dotted, shape in container_paths("mindformers").items():
        value = doc.get(dotted, None)
        if value is not None:
            expect(value, shape, location(doc.path, doc.lines.get(dotted), dotted), dotted,
                   f"write {dotted} as a {'mapping of key: value' if shape is dict else 'list'}, as MindFormers expects")


def _generation(doc: YamlDoc) -> str:
    rule = load_framework("mindformers").get("generation", {})
    value = doc.get(rule.get("key", "use_legacy"), None)
    if value is None:
        return "legacy" if rule.get("legacy_when_absent", True) else "mcore"
    if not isinstance(value, bool):
        raise InputError(doc.where("use_legacy"), f"expected true or false, found {value!r}", "write use_legacy: False or True")
    return "legacy" if value else "mcore"


def _flatten(doc: YamlDoc, node: Any, prefix: str, out: dict[str, RawValue]) -> None:
    if prefix:
        out[prefix[:-1]] = RawValue(node, doc.where(prefix[:-1]))
    if isinstance(node, dict):
        for key, value in node.items():
            _flatten(doc, value, f"{prefix}{key}.", out)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _flatten(doc, value, f"{prefix}{index}.", out)
