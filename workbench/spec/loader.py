"""Load ``converters/<arch>.yaml`` into an :class:`ArchSpec`, validating everything at load time.

Schema (one file per architecture)::

    arch: qwen2                      # = the file name
    extends: llama                   # optional: start from another arch (params, logical, formats)
    drop: [layers.{i}.mlp.gate]      # optional: logical names of the parent this arch does not have
    drop_formats: [meta]             # optional: parent formats this arch does not have
    params: [num_layers, hidden]     # size parameters the shapes use (added to the parent's)
    logical:                         # hub names this arch has (added to the parent's);
      - layers.{i}.attn.q_bias       #   `- name: [shape]` overrides the hub's default shape
    formats:
      hf:                            # a format: logical key -> physical name or {name, transform, ...}
        layers.{i}.attn.q_bias: model.layers.{i}.self_attn.q_proj.bias
      mindformers_qkv_concat:
        extends: mindformers         # optional: start from another format of this arch
        variant_of: mindformers      # optional: documentation / grouping
        note: text                   # optional
        ignore: ["*._extra_state"]   # optional: physical names never read
        layers.{i}.attn.[q,k,v]: {name: model.layers.{i}.attention.w_qkv.weight, transform: grouped_qkv}
    hf_config: {model_type: llama, ...}  # optional: the HF config.json of this arch (schema: spec/hf_config.py)

A rule value is a name or ``{name, transform (name or list), alt (list), args {arg: expr}, reshape [exprs]}``.
YAML note: a name with ``{i}`` inside a flow collection (``{name: ...}``, ``[...]``) must be quoted.
A format inherited from the parent (or from ``extends``) is overlaid: a rule replaces every inherited
rule that shares a logical part. Every format must then map every logical name exactly once.
"""
from __future__ import annotations

from dataclasses import replace
import os
import re
from pathlib import Path

from ..errors import InputError, location
from ..input_files import input_stat
from ..knowledge import knowledge_dir
from ..yamlio import YamlDoc, load_yaml
from .arch import ArchSpec, FormatSpec, LogicalTensor
from .hf_config import check_sizes, parse_block
from .hub import HUB_FILE, load_hub, parse_shape
from .layer_sets import load_indices
from .model_params import PARAM_NAMES
from .rules import parse_rule, validate_format

TOP_KEYS = {"arch", "description", "extends", "drop", "drop_formats", "params", "logical", "formats", "hf_config"}
FORMAT_KEYS = {"extends", "variant_of", "note", "ignore"}
_ARCH_LINE = re.compile(r"^arch:", re.MULTILINE)      # other files here (megatron_parallel.yaml) are not arch specs


def converters_dir(folder: Path | str | None = None) -> Path:
    return Path(folder) if folder is not None else knowledge_dir("converters")


def available_archs(folder: Path | str | None = None) -> list[str]:
    """Names of the architecture specs: ``converters/*.yaml`` with a top-level ``arch:`` (not ``_hub.yaml``)."""
    return sorted(p.stem for p in converters_dir(folder).glob("*.yaml")       # is_file: a FIFO here is not read
                  if not p.name.startswith("_") and p.is_file()
                  and _ARCH_LINE.search(p.read_text(encoding="utf-8", errors="replace")))


def archs_declaring(model_type: str, folder: Path | str | None = None) -> list[str]:
    """Architectures whose spec declares this HF ``model_type`` (``hf_config.model_type``, its own or
    inherited through ``extends``), read from the files' data without building any spec: detection
    tries them first (:func:`workbench.spec.detect.detect_arch`). A file that does not parse declares
    nothing here; building it reports what is wrong."""
    base = converters_dir(folder)
    return [name for name in available_archs(base) if _declared_model_type(base, name, set()) == model_type]


def _declared_model_type(base: Path, name: str, seen: set[str]) -> str | None:
    if name in seen or not (base / f"{name}.yaml").is_file():
        return None
    seen.add(name)
    try:
        data = load_yaml(base / f"{name}.yaml").data
    except InputError:
        return None
    block = data.get("hf_config") if isinstance(data, dict) else None
    if isinstance(block, dict) and "model_type" in block:
        return block["model_type"] if isinstance(block["model_type"], str) else None
    parent = data.get("extends") if isinstance(data, dict) else None
    return _declared_model_type(base, parent, seen) if isinstance(parent, str) else None


def load_arch(name: str, folder: Path | str | None = None) -> ArchSpec:
    """The validated spec of architecture ``name`` (cached per file)."""
    base = converters_dir(folder)
    path = base / f"{name}.yaml"
    if not os.path.lexists(path):
        raise InputError(str(path), f"no converter spec for arch '{name}'",
                         f"use one of {', '.join(available_archs(base))} or write converters/{name}.yaml")
    input_stat(path, regular=True)          # a looping symlink or a FIFO is named, not "no spec"
    return _load(path.resolve(), path.stat().st_mtime_ns, ())


_SPECS: dict[tuple[Path, int], ArchSpec] = {}


def _load(path: Path, mtime: int, chain: tuple[str, ...]) -> ArchSpec:
    """The spec of one file version, built once whether it is loaded itself or as the parent of
    others (``chain``: the archs extending it, for cycle detection; it does not change the result)."""
    key = (path, mtime)
    if key not in _SPECS:
        if len(_SPECS) >= 64:
            _SPECS.clear()
        _SPECS[key] = _build(path, chain)
    return _SPECS[key]


def _build(path: Path, chain: tuple[str, ...]) -> ArchSpec:
    doc = load_yaml(path)
    data = doc.data
    if not isinstance(data, dict):
        raise InputError(str(path), "expected a mapping with arch, params, logical, formats",
                         "see the schema in workbench/spec/loader.py")
    _check_keys(doc, data, TOP_KEYS, "", "top-level key")
    if data.get("arch") != path.stem:
        raise InputError(_where(doc, "arch"), f"arch: {data.get('arch')!r} must equal the file name '{path.stem}'",
                         f"write arch: {path.stem}")
    hub = load_hub(path.parent / HUB_FILE)
    spec = _start(doc, data, chain, path)
    spec.indices = load_indices(path.parent / HUB_FILE)
    _drop(doc, data, spec)
    _add_params(doc, data, spec)
    _add_logical(doc, data, spec, hub)
    _add_formats(doc, data, spec)
    for fmt in spec.formats.values():
        validate_format(spec, fmt)
    used = _used_params(spec)
    undeclared = sorted(used - set(spec.params))
    if undeclared:
        raise InputError(_where(doc, "params"), f"the logical names need parameter(s) {', '.join(undeclared)}",
                         f"add {', '.join(undeclared)} to params")
    spec.params = tuple(name for name in spec.params if name in used)
    spec.hf_config = parse_block(doc, spec.hf_config)
    if spec.hf_config is not None:
        check_sizes(spec.hf_config, spec.params)
    return spec


def _used_params(spec: ArchSpec) -> set[str]:
    """Parameters some shape, argument or reshape uses, plus the counted ones the names imply."""
    used: set[str] = set()
    for tensor in spec.logical.values():
        used |= set().union(*(d.variables() for d in tensor.shape))
    for fmt in spec.formats.values():
        for rule in fmt.rules:
            used |= set().union(set(), *(a.variables() for a in rule.pipeline.args.values()),
                                *(d.variables() for d in rule.pipeline.reshape or ()))
    layer_sets = {t.layers for t in spec.logical.values() if "i" in t.template.variables}
    if layer_sets:
        used.add("num_layers")
    if "moe" in layer_sets:
        used.add("num_experts")
        if "dense" in layer_sets:
            used.add("first_dense_layers")
    return used


def _where(doc: YamlDoc, key: str) -> str:
    return location(doc.path, doc.lines.get(key), key)


def _check_keys(doc: YamlDoc, node: dict, allowed: set, prefix: str, what: str) -> None:
    for key in node:
        if key not in allowed:
            raise InputError(_where(doc, prefix + str(key)), f"unknown {what} '{key}'",
                             f"use one of {', '.join(sorted(allowed))}")


def _list(doc: YamlDoc, data: dict, key: str) -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise InputError(_where(doc, key), f"{key} must be a list, found {type(value).__name__}", f"write {key}: [...]")
    return value


def _start(doc: YamlDoc, data: dict, chain: tuple[str, ...], path: Path) -> ArchSpec:
    parent_name = data.get("extends")
    description = str(data.get("description", ""))
    if parent_name is None:
        return ArchSpec(path.stem, path, (), {}, {}, None, description)
    if parent_name in chain + (path.stem,):
        raise InputError(_where(doc, "extends"), f"extends cycle: {' -> '.join(chain + (path.stem, parent_name))}",
                         "remove the cycle")
    parent_path = path.parent / f"{parent_name}.yaml"
    if not os.path.lexists(parent_path):
        raise InputError(_where(doc, "extends"), f"extends unknown arch '{parent_name}'",
                         f"use one of {', '.join(available_archs(path.parent))}")
    input_stat(parent_path, regular=True)
    parent = _load(parent_path.resolve(), parent_path.stat().st_mtime_ns, chain + (path.stem,))
    return ArchSpec(path.stem, path, parent.params, dict(parent.logical), dict(parent.formats), parent_name,
                    description or parent.description, parent.hf_config)


def _drop(doc: YamlDoc, data: dict, spec: ArchSpec) -> None:
    dropped = set()
    for index, name in enumerate(_list(doc, data, "drop")):
        if name not in spec.logical:
            raise InputError(_where(doc, f"drop.{index}"), f"cannot drop '{name}': the parent has no such logical name",
                             f"use one of {', '.join(spec.logical)}")
        dropped.add(name)
        del spec.logical[name]
    for fmt_name, fmt in list(spec.formats.items()):
        kept = []
        for rule in fmt.rules:
            parts = {p.text for p in rule.parts}
            if parts & dropped and not parts <= dropped:
                raise InputError(_where(doc, "drop"), f"format {fmt_name}: {rule.describe()} holds both dropped and "
                                 f"kept logical names", "drop all of its parts or none")
            if not parts & dropped:
                kept.append(rule)
        spec.formats[fmt_name] = FormatSpec(fmt_name, tuple(kept), fmt.ignore, fmt.variant_of, fmt.note, fmt.where)
    for index, name in enumerate(_list(doc, data, "drop_formats")):
        if spec.formats.pop(name, None) is None:
            raise InputError(_where(doc, f"drop_formats.{index}"), f"cannot drop format '{name}': not inherited",
                             f"inherited formats: {', '.join(spec.formats)}")


def _add_params(doc: YamlDoc, data: dict, spec: ArchSpec) -> None:
    params = list(spec.params)
    for index, name in enumerate(_list(doc, data, "params")):
        if name not in PARAM_NAMES:
            raise InputError(_where(doc, f"params.{index}"), f"unknown parameter '{name}'",
                             f"use one of {', '.join(sorted(PARAM_NAMES))}")
        if name not in params:
            params.append(name)
    spec.params = tuple(params)


def _add_logical(doc: YamlDoc, data: dict, spec: ArchSpec, hub: dict[str, LogicalTensor]) -> None:
    known = frozenset(spec.params)
    for index, item in enumerate(_list(doc, data, "logical")):
        where = _where(doc, f"logical.{index}")
        name, shape = item, None
        if isinstance(item, dict) and len(item) == 1:
            name, raw_shape = next(iter(item.items()))
            shape = parse_shape(raw_shape, where, PARAM_NAMES)
        if not isinstance(name, str) or name not in hub:
            raise InputError(where, f"logical name {name!r} is unknown to the hub ({HUB_FILE})",
                             "use a hub name (see converters/_hub.yaml) or add it there")
        entry = hub[name]
        tensor = replace(entry, shape=shape or entry.shape)
        missing = sorted(set().union(*(d.variables() for d in tensor.shape)) - known)
        if missing:
            raise InputError(where, f"shape of '{name}' uses parameter(s) {', '.join(missing)} not in params",
                             f"add {', '.join(missing)} to params")
        spec.logical[name] = tensor
    spec.logical = dict(sorted(spec.logical.items(), key=lambda item: item[1].order))


def _add_formats(doc: YamlDoc, data: dict, spec: ArchSpec) -> None:
    formats = data.get("formats", {})
    if not isinstance(formats, dict):
        raise InputError(_where(doc, "formats"), "formats must be a mapping of format name -> rules",
                         "write formats: {hf: {...}}")
    for fmt_name, body in formats.items():
        prefix = f"formats.{fmt_name}."
        if not isinstance(body, dict):
            raise InputError(_where(doc, f"formats.{fmt_name}"), "a format must be a mapping of logical name -> rule",
                             "write logical: physical lines under it")
        base = _base_format(doc, spec, str(fmt_name), body)
        rules = list(base.rules)
        for key, value in body.items():
            if key in FORMAT_KEYS:
                continue
            rule = parse_rule(doc, spec, prefix + str(key), str(key), value)
            new_parts = {p.text for p in rule.parts}
            rules = [r for r in rules if not new_parts & {p.text for p in r.parts}] + [rule]
        ignore = _ignore(doc, body, prefix, base.ignore)
        spec.formats[fmt_name] = FormatSpec(fmt_name, tuple(rules), ignore, body.get("variant_of", base.variant_of),
                                            str(body.get("note", base.note)), _where(doc, f"formats.{fmt_name}"))


def _base_format(doc: YamlDoc, spec: ArchSpec, fmt_name: str, body: dict) -> FormatSpec:
    if fmt_name in spec.formats:           # inherited from the parent arch: overlay it
        return spec.formats[fmt_name]
    extends = body.get("extends")
    if extends is None:
        return FormatSpec(fmt_name, ())
    if extends not in spec.formats:
        raise InputError(_where(doc, f"formats.{fmt_name}.extends"), f"extends unknown format '{extends}'",
                         f"define it above; known: {', '.join(spec.formats) or 'none'}")
    return spec.formats[extends]


def _ignore(doc: YamlDoc, body: dict, prefix: str, inherited: tuple[str, ...]) -> tuple[str, ...]:
    value = body.get("ignore", [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InputError(_where(doc, prefix + "ignore"), "ignore must be a list of name patterns ('*' = any text)",
                         "write ignore: ['*._extra_state']")
    return tuple(dict.fromkeys(inherited + tuple(value)))
