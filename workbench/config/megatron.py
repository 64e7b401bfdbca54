"""Read a Megatron-LM / MindSpeed-LLM config in any of its five forms into a RawConfig.

Forms (auto-detected from content, then suffix): the start-up ``arguments`` block of a
training log; a launch shell script; a ``--yaml-cfg`` YAML; a flat YAML or JSON of
arguments; the ``args`` inside a checkpoint (file or directory).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from .. import input_files
from ..errors import InputError
from ..yamlio import YamlDoc, parse_yaml, read_text
from .canonical import RawConfig, RawValue
from .registry import load_framework

_HEAD_BYTES = 200_000
_YAML_CFG_SECTIONS = ("language_model", "model_parallel")


def read_megatron(path: Path | str) -> RawConfig:
    path = Path(path)
    if path.is_dir() or path.suffix in (".pt", ".pth"):
        if not path.is_dir():
            input_files.input_stat(path)             # missing, broken link, loop: named precisely
        return _from_checkpoint(path)
    text = read_text(path)                           # read ONCE: a pipe (<(cat x)) cannot be read again
    from .megatron_log import has_arguments_block

    if has_arguments_block(text[:_HEAD_BYTES]):
        return _from_log(path, text)
    if path.suffix in (".sh", ".bash") or text.startswith("#!") or re.search(r"\b(torchrun|pretrain_\w+\.py)\b", text):
        if path.suffix not in (".yaml", ".yml", ".json"):
            return _from_shell(path, text)
    if path.suffix == ".json":
        return _from_flat(path, input_files.parse_json(text, str(path), what="JSON of arguments"), {}, "json")
    if path.suffix in (".yaml", ".yml"):
        return _from_yaml(parse_yaml(text, path))
    raise InputError(str(path), f"not a Megatron config (detected {_describe(text)}): expected a launch script, "
                     "a training log with the 'arguments' block, a --yaml-cfg YAML, a flat YAML/JSON of arguments "
                     "or a checkpoint", "pass one of those as the first argument")


def _describe(text: str) -> str:
    lines = text.splitlines()
    if not text.strip():
        return "an empty file"
    if "iteration" in text and "lm loss" in text:
        return f"a training log of {len(lines)} lines without the start-up 'arguments' block"
    return f"a text file of {len(lines)} lines with no training-script launch and no 'arguments' block"


# ------------------------------------------------------------------------- argv → args
def _flag_dest(flag: str, table: dict) -> tuple[str, Any]:
    special = table.get(flag)
    if special:
        return special["dest"], special["value"]
    return flag[2:].replace("-", "_"), True


def argv_to_args(tokens: list, path: Path) -> tuple[dict[str, RawValue], list[str]]:
    """Turn script argument tokens into ``dest → RawValue``; repeated flags: last wins, noted."""
    framework = load_framework("megatron")
    table, multi = framework.get("flags", {}), set(framework.get("multi_value", []))
    values: dict[str, RawValue] = {}
    lines: dict[str, int] = {}
    notes: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.text.startswith("--"):
            notes.append(f"line {token.line}: stray argument {token.text!r} ignored")
            continue
        flag, _, inline = token.text.partition("=")
        operands = [] if not inline else [token]
        while not inline and index < len(tokens) and not tokens[index].text.startswith("--"):
            operands.append(tokens[index])
            index += 1
        dest, bare_value = _flag_dest(flag, table)
        origin = f"{flag} ({path.name}:{token.line})"
        if dest in values:
            notes.append(f"{flag} given more than once (lines {lines[dest]} and {token.line}): the last wins")
        values[dest], lines[dest] = _operand_value(operands, inline, bare_value, dest in multi, origin, notes), token.line
    return values, notes


def _operand_value(operands: list, inline: str, bare_value: Any, multi: bool, origin: str,
                   notes: list[str]) -> RawValue:
    if not operands:
        return RawValue(bare_value, origin)
    unresolved = next((op.unresolved for op in operands if op.unresolved), None)
    texts = [inline] if inline else [op.text for op in operands]
    if multi:
        return RawValue(texts, origin, unresolved)
    if len(texts) > 1:
        notes.append(f"{origin}: extra values {texts[1:]} ignored")
    return RawValue(texts[0], origin, unresolved)


# ------------------------------------------------------------------------- forms
def _from_shell(path: Path, text: str) -> RawConfig:
    from .shell_script import parse_launch_script

    command = parse_launch_script(path, text=text)
    values, notes = argv_to_args(command.script_args, path)
    launcher_values, _ = argv_to_args(command.launcher_args, path)
    raw = RawConfig("megatron", "shell", path, values, launcher_values, list(command.notes) + notes)
    _record_environment(raw, text)
    return raw


def _record_environment(raw: RawConfig, text: str) -> None:
    names = load_framework("megatron").get("ascend_indicators", {}).get("environment", [])
    for number, line in enumerate(text.splitlines(), 1):
        for name in names:
            if re.match(rf"\s*(export\s+)?{name}=", line):
                raw.launcher.setdefault(f"env.{name}", RawValue(True, f"{name} ({raw.path.name}:{number})"))


def _from_log(path: Path, text: str) -> RawConfig:
    from .megatron_log import read_arguments_block

    block = read_arguments_block(path, text=text)
    values = {name: RawValue(value, f"{name} ({path.name}:{line})") for name, (value, line) in block.items()}
    return RawConfig("megatron", "log", path, values)


def _from_checkpoint(path: Path) -> RawConfig:
    from .megatron_checkpoint import find_checkpoint_file, read_checkpoint_args

    file = find_checkpoint_file(path)
    args = read_checkpoint_args(file)
    values = {name: RawValue(value, f"args.{name} ({file.name})") for name, value in args.items()}
    return RawConfig("megatron", "checkpoint", file, values)


def _from_yaml(doc: YamlDoc) -> RawConfig:
    data = doc.data
    if not isinstance(data, dict):
        raise InputError(str(doc.path), f"expected a mapping of arguments, found {type(data).__name__}",
                         "pass a --yaml-cfg file or a flat YAML of Megatron arguments")
    signature = load_framework("mindformers").get("signature", [])
    if any(doc.has(key) for key in signature):
        raise InputError(str(doc.path), "this is a MindFormers config (it has " +
                         next(key for key in signature if doc.has(key)) + "), not a Megatron one",
                         "pass it as the second argument: workbench checklist MEGATRON MINDFORMERS")
    if any(isinstance(data.get(section), dict) for section in _YAML_CFG_SECTIONS):
        return _from_yaml_cfg(doc)
    return _from_flat(doc.path, data, doc.lines, "flat-yaml")


def _from_flat(path: Path, data: Any, lines: Mapping[str, int], form: str) -> RawConfig:
    if not isinstance(data, dict):
        raise InputError(str(path), f"expected a mapping of arguments, found {type(data).__name__}",
                         "write the arguments as name: value")
    table = load_framework("megatron").get("flags", {})
    values, notes = {}, []
    for key, value in data.items():
        if isinstance(value, dict):
            notes.append(f"{key}: nested mapping not interpreted")
            continue
        name, value = _flat_entry(str(key), value, table)
        line = lines.get(str(key))
        values[name] = RawValue(value, f"{key} ({path.name}:{line})" if line else f"{key} ({path.name})")
    return RawConfig("megatron", form, path, values, notes=notes)


def _flat_entry(key: str, value: Any, table: dict) -> tuple[str, Any]:
    """``--disable-bias-linear: true`` means the flag: apply the flag table like on a command line."""
    flag = "--" + key.lstrip("-").replace("_", "-")
    special = table.get(flag)
    if special is None:
        return key.lstrip("-").replace("-", "_"), value
    if isinstance(value, bool) and isinstance(special["value"], bool):
        return special["dest"], special["value"] if value else not special["value"]
    return special["dest"], value


def _from_yaml_cfg(doc: YamlDoc) -> RawConfig:
    aliases = load_framework("megatron").get("yaml_cfg_aliases", {})
    raw = _from_flat(doc.path, {k: v for k, v in doc.data.items() if k not in _YAML_CFG_SECTIONS}, doc.lines, "yaml-cfg")
    for section in _YAML_CFG_SECTIONS:
        for key, value in (doc.data.get(section) or {}).items():
            raw.values[aliases.get(key, key)] = RawValue(value, doc.where(f"{section}.{key}"))
    # yaml_arguments.py builds the MLP from language_model.activation_func (+ gated_linear_unit),
    # whatever a top-level `swiglu:` says.
    activation = raw.lookup("activation_func")
    if activation is not None:
        gated = bool(raw.values.get("gated_linear_unit", RawValue(False, "")).value)
        name = str(activation.value).lower()
        raw.values["swiglu"] = RawValue(name == "swiglu" or (gated and name == "silu"), activation.origin)
        raw.values["squared_relu"] = RawValue(name in ("squaredrelu", "squared_relu"), activation.origin)
    return raw
