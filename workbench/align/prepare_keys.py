"""Canonical key + value -> the setting to write on one side: keys.yaml inverted, in one place.

keys.yaml says where each canonical value is READ from (``megatron: {arg: ...}``, ``mindformers:
{path: ...}``, value maps, ``negate``, the ``flag:`` text of derived keys). ``setting_for`` walks the
same entries backwards: the Megatron flag (``--name`` or the special flags of
checklists/frameworks/megatron.yaml, e.g. ``--disable-bias-linear`` for ``add_bias_linear: false``)
or the MindFormers yaml path, and the raw value that reads back as the canonical one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ..config.registry import MISSING, SideSpec, load_framework, load_registry

REMOVE: Any = type("Remove", (), {"__repr__": lambda self: "REMOVE"})()
_MF_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}
_HARDWARE_NOTES = {"ascend": ("mindspeed", "npu", "ascend"), "gpu": ("gpu",)}
_FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*\Z")
_PATH = re.compile(r"[A-Za-z_][\w]*(\.[\w]+)*\Z")


@dataclass(frozen=True)
class Setting:
    """One edit: ``name`` is a Megatron flag (``--lr``) or a MindFormers dotted path; ``value`` the raw
    value (a Megatron store_true flag: True = present), or REMOVE."""

    side: str
    name: str
    value: Any
    key: str
    why: str


@dataclass
class Request:
    """A canonical setting asked for (``value`` None: remove it); ``reason`` why a side cannot take it."""

    key: str
    value: Any
    why: str
    reason: str = ""


class Unsettable(Exception):
    """The key cannot be set on that side (fixed by the implementation, or no single setting)."""


def setting_for(key: str, value: Any, side: str, generation: str, hardware: str,
                present: Callable[[str], bool], set_through: dict[str, dict[str, str]], why: str) -> list[Setting]:
    """The edits that make ``side`` read ``key`` as ``value``; [] when it already must (fixed equal)."""
    spec = load_registry()[key].side(side, generation)
    if spec is None:
        return []                                       # the side has no such setting: nothing reads it
    if spec.fixed is not MISSING:          # a path beside `fixed:` is for other model classes: not this one
        if spec.fixed == value:
            return []
        raise Unsettable(f"fixed by the implementation on the {side} side: {spec.why}")
    names = _source_names(key, spec, side, hardware, set_through)
    if value is None:
        return [Setting(side, _spelled(name, side), REMOVE, key, why) for name in names if present(name)]
    chosen = next((name for name in names if present(name)), names[0])
    raw = _raw_value(key, spec, chosen, value, side)
    if side == "megatron":
        return _megatron_settings(chosen, raw, key, why, present)
    return [Setting(side, chosen, raw, key, why)]


def _source_names(key: str, spec: SideSpec, side: str, hardware: str,
                  set_through: dict[str, dict[str, str]]) -> list[str]:
    through = set_through.get(key, {}).get(side)
    if through:
        return [through.lstrip("-").replace("-", "_") if side == "megatron" else through]
    if spec.sources:
        return [source.name for source in spec.sources]
    name = _from_flag_text(spec.flag, side, hardware, load_registry()[key].type)
    if name is None:
        raise Unsettable(f"derived on the {side} side ({spec.flag or 'no single setting'})")
    return [name]


def _from_flag_text(text: str, side: str, hardware: str, key_type: str) -> str | None:
    """The one setting a derived key's ``flag:`` text names: ``--train-iters``, or the alternative for this
    hardware in ``--deterministic-mode (GPU) / --npu-deterministic (MindSpeed)``. None when the text names
    several plain alternatives or a combination (``--bf16 / --fp16``, ``--group-query-attention
    --num-query-groups``), or a MindFormers dtype (derived from a switch such as fp32_residual_connection)."""
    if side == "mindformers" and key_type == "dtype":
        return None
    alternatives = []
    for part in text.split(" / "):
        bare = re.sub(r"\([^)]*\)", "", part).split()
        note = part[part.find("(") + 1:part.rfind(")")].lower() if "(" in part else ""
        alternatives.append((bare[0] if len(bare) == 1 else "", note))
    valid = _FLAG if side == "megatron" else _PATH
    wanted = _HARDWARE_NOTES.get(hardware, ())
    chosen = [name for name, note in alternatives if note and any(word in note for word in wanted)]
    if not chosen:
        chosen = [name for name, note in alternatives if not note]
    if len(chosen) != 1 or not valid.fullmatch(chosen[0]):
        return None
    return _arg_name(chosen[0]) if side == "megatron" else chosen[0]


def _arg_name(flag: str) -> str:
    """A flag as the dest-or-flag token used below: special flags keep their spelling."""
    return flag if flag in _special_flags() else flag[2:].replace("-", "_")


def _spelled(name: str, side: str) -> str:
    if side != "megatron" or name.startswith("--"):
        return name
    return "--" + name.replace("_", "-")


def _special_flags() -> dict[str, dict]:
    return load_framework("megatron").get("flags", {})


def _raw_value(key: str, spec: SideSpec, name: str, value: Any, side: str) -> Any:
    source = next((s for s in spec.sources if s.name == name), None)
    if source is not None and source.negate:
        value = not value
    value_map = (source.value_map if source is not None else None) or spec.value_map
    if value_map:
        raws = [raw for raw, mapped in value_map.items() if mapped == value and type(mapped) is type(value)]
        if not raws:
            raise Unsettable(f"no raw value of {name} reads as {value!r}")
        value = raws[0]
    if side == "mindformers" and load_registry()[key].type == "dtype":
        value = _MF_DTYPES.get(str(value), value)
    return value


def _megatron_settings(name: str, raw: Any, key: str, why: str, present: Callable[[str], bool]) -> list[Setting]:
    """A Megatron dest (or special flag) -> the flags to write: bools are flags present or absent."""
    specials = _special_flags()
    dest, bare = (specials[name]["dest"], specials[name]["value"]) if name in specials else (name, True)
    flags = {flag: entry["value"] for flag, entry in specials.items() if entry["dest"] == dest}
    if not isinstance(raw, bool) or not isinstance(bare, bool):     # a flag that takes a value
        return [Setting("megatron", next((f for f, v in flags.items() if v is None), "--" + dest.replace("_", "-")),
                        raw, key, why)]
    if not flags:                                  # a plain store_true flag: --name
        flags = {"--" + dest.replace("_", "-"): True}
    wanted = [flag for flag, stored in flags.items() if stored is raw]
    settings = [Setting("megatron", flag, REMOVE, key, why) for flag, stored in flags.items()
                if stored is not raw and present(flag)]
    if wanted:                                     # else the argparse default holds the value
        settings.append(Setting("megatron", wanted[0], True, key, why))
    return settings
