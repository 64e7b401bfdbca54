"""The ``hf_config:`` block of a converter spec, and the ``config.json`` it writes.

Schema (in ``converters/<arch>.yaml``; an arch that ``extends`` another starts from its block,
and each key given replaces the inherited one; ``null`` removes it)::

    hf_config:
      model_type: llama                     # transformers' model_type
      architectures: [LlamaForCausalLM]     # the class AutoModelForCausalLM builds
      sizes:                                # HF key: size parameter of the spec (workbench/spec/model_params.py)
        hidden_size: hidden
        n_shared_experts: {quotient: [shared_ffn, moe_ffn]}     # a whole-number ratio of two parameters
      settings:                             # HF key: canonical key (checklists/keys.yaml) and the value used
        rope_theta: {from: model.rotary_base, default: 10000.0} #   when the config does not state it
        n_group: {default: 8}               # no canonical key: the default, always reported as assumed
      fixed: {hidden_act: silu}             # HF key: value, always

``config.json`` is then, in order of preference: the HF config given (``--config``) or carried by
the source folder, with sizes and dtype updated; or the block filled from a Megatron / MindFormers
config (given, or the args a Megatron checkpoint carries), defaults standing in for what it does
not state (listed as assumed); sizes always come from the plan. ``tie_word_embeddings`` follows
the weights: true exactly when the output head is the embedding (no head tensor written).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import InputError, location
from ..yamlio import YamlDoc

BLOCK_KEYS = {"model_type", "architectures", "sizes", "settings", "fixed"}
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}
SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class HfConfigSpec:
    """An architecture's ``hf_config:`` block: how a ``config.json`` is written and read for it."""

    model_type: str
    architectures: tuple[str, ...]
    sizes: dict[str, str | tuple[str, str]] = field(default_factory=dict)   # param, or (numerator, denominator)
    settings: dict[str, tuple[str | None, Any]] = field(default_factory=dict)   # (canonical key, default)
    fixed: dict[str, Any] = field(default_factory=dict)
    where: str = ""


# ----------------------------------------------------------------------------- the YAML block

def parse_block(doc: YamlDoc, parent: HfConfigSpec | None) -> HfConfigSpec | None:
    """The arch's block (validated, overlaid on the parent's), or the parent's when it has none."""
    raw = doc.data.get("hf_config") if isinstance(doc.data, dict) else None
    if raw is None:
        return parent
    where = _where(doc, "hf_config")
    if not isinstance(raw, dict):
        raise InputError(where, f"hf_config must be a mapping, found {type(raw).__name__}",
                         "write hf_config: {model_type: ..., architectures: [...], sizes: {...}}")
    unknown = sorted(set(raw) - BLOCK_KEYS)
    if unknown:
        raise InputError(_where(doc, f"hf_config.{unknown[0]}"), f"unknown hf_config key '{unknown[0]}'",
                         f"use one of {', '.join(sorted(BLOCK_KEYS))}")
    model_type = raw.get("model_type", parent.model_type if parent else None)
    if not isinstance(model_type, str) or not model_type:
        raise InputError(_where(doc, "hf_config.model_type"), f"model_type must be a name, found {model_type!r}",
                         "write model_type: llama (transformers' model_type)")
    architectures = raw.get("architectures", list(parent.architectures) if parent else None)
    if not isinstance(architectures, list) or not architectures or not all(isinstance(a, str) and a
                                                                          for a in architectures):
        raise InputError(_where(doc, "hf_config.architectures"), f"architectures must be a list of class names, "
                         f"found {architectures!r}", "write architectures: [LlamaForCausalLM]")
    return HfConfigSpec(model_type, tuple(architectures),
                        _overlay(doc, raw, "sizes", parent.sizes if parent else {}, _size),
                        _overlay(doc, raw, "settings", parent.settings if parent else {}, _setting),
                        _overlay(doc, raw, "fixed", parent.fixed if parent else {}, _fixed), where)


def _where(doc: YamlDoc, key: str) -> str:
    return location(doc.path, doc.lines.get(key), key)


def _overlay(doc: YamlDoc, raw: dict, section: str, inherited: dict, parse) -> dict:
    body = raw.get(section, {})
    if not isinstance(body, dict):
        raise InputError(_where(doc, f"hf_config.{section}"), f"{section} must be a mapping of HF key -> value",
                         f"write {section}: {{hf_key: ...}}")
    out = dict(inherited)
    for key, value in body.items():
        dotted = f"hf_config.{section}.{key}"
        if value is None:
            out.pop(key, None)
        else:
            out[str(key)] = parse(_where(doc, dotted), value)
    return out


def _size(where: str, value: Any) -> str | tuple[str, str]:
    from .model_params import PARAM_NAMES

    names = value.get("quotient") if isinstance(value, dict) and set(value) == {"quotient"} else [value]
    if not (isinstance(names, list) and len(names) in (1, 2) and all(n in PARAM_NAMES for n in names)):
        raise InputError(where, f"expected a size parameter or {{quotient: [a, b]}}, found {value!r}",
                         f"use parameters of workbench/spec/model_params.py: {', '.join(sorted(PARAM_NAMES))}")
    return names[0] if len(names) == 1 else (names[0], names[1])


def _setting(where: str, value: Any) -> tuple[str, Any]:
    from ..config.registry import load_registry

    if not isinstance(value, dict) or "default" not in value or not set(value) <= {"from", "default"}:
        raise InputError(where, f"expected {{from: canonical key, default: value}}, found {value!r}",
                         "write e.g. {from: model.rotary_base, default: 10000.0}")
    source = value.get("from")
    if source is not None and source not in load_registry().keys:
        raise InputError(where, f"'{source}' is not a canonical key", "name a key of checklists/keys.yaml")
    return source, _fixed(where, value["default"])


def _fixed(where: str, value: Any) -> Any:
    if not isinstance(value, SCALARS) and not (isinstance(value, list) and all(isinstance(v, SCALARS) for v in value)):
        raise InputError(where, f"expected a scalar or a list of scalars, found {value!r}", "write a plain value")
    return value


def check_sizes(block: HfConfigSpec, params: tuple[str, ...]) -> None:
    """Every size names a parameter the arch uses (called once the arch's params are final)."""
    for key, ref in block.sizes.items():
        names = ref if isinstance(ref, tuple) else (ref,)
        unused = [name for name in names if name not in params]
        if unused:
            raise InputError(f"{block.where} [sizes.{key}]", f"{key} uses {', '.join(unused)}, which this arch "
                             f"does not have (its parameters: {', '.join(params)})",
                             f"map {key} to one of them, or remove it with {key}: null")


# ----------------------------------------------------------------------------- config.json

@dataclass
class HfConfigResult:
    """A ``config.json`` built for a conversion, and the values it had to assume."""

    config: dict
    assumed: list[str] = field(default_factory=list)      # "rope_theta=10000.0" where no config stated it


def build_config(block: HfConfigSpec | None, params, *, hf_base: dict | None, stated: Mapping[str, Any] | None,
                 dtype: str, tied: bool, arch_name: str) -> HfConfigResult:
    """``config.json`` for these sizes: from an HF config (``hf_base``) or the arch's block, whose
    settings take the values a training config states (``stated``: canonical key -> value)."""
    if hf_base is not None:
        config = dict(hf_base)
        if block is not None:
            config.setdefault("model_type", block.model_type)
            config.setdefault("architectures", list(block.architectures))
            config.update(_sizes(block, params, config))
        elif "vocab_size" in config:
            config["vocab_size"] = params.vocab
        result = HfConfigResult(config)
    elif block is None:
        raise InputError(f"converters/{arch_name}.yaml", "has no hf_config block, and no HF config.json was given",
                         "pass --config with the model's HF config.json, or add an hf_config block to the spec")
    else:
        result = _from_block(block, params, stated or {})
    result.config.pop("dtype", None)
    result.config.update(tie_word_embeddings=tied, torch_dtype=TORCH_DTYPES.get(dtype, "float32"))
    return result


def _from_block(block: HfConfigSpec, params, stated: Mapping[str, Any]) -> HfConfigResult:
    config: dict[str, Any] = {"architectures": list(block.architectures), "model_type": block.model_type}
    config.update(block.fixed)
    assumed = []
    for key, (canonical_key, default) in block.settings.items():
        value = stated.get(canonical_key) if canonical_key else None
        if value is None:
            value = default
            assumed.append(f"{key}={default!r}")
        config[key] = value
    config.update(_sizes(block, params, config))
    return HfConfigResult(config, assumed)


def _sizes(block: HfConfigSpec, params, config: dict) -> dict[str, int]:
    env = params.env()
    out = {}
    for key, ref in block.sizes.items():
        if isinstance(ref, str):
            out[key] = env[ref]
            continue
        numerator, denominator = env[ref[0]], env[ref[1]]
        if not denominator or numerator % denominator:
            raise InputError(f"{block.where} [sizes.{key}]", f"{ref[0]}={numerator} is not a whole multiple of "
                             f"{ref[1]}={denominator}", f"pass an HF config.json (--config) that states {key}")
        out[key] = numerator // denominator
    return out
