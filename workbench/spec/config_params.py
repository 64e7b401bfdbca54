"""Size parameters from a model config: HF ``config.json``, a Megatron config, a MindFormers yaml.

HF configs are read directly (their keys are the sizes) and their values checked where they are
read: a size must be a positive integer (``null`` means "not stated", as in transformers), every
number finite. Megatron and MindFormers configs go through :func:`workbench.config.read_config` +
``resolve`` (canonical keys such as ``model.num_attention_heads``), so every form those readers
accept works here too. :func:`read_model_config` is the one dispatch; the HF-folder writer reads
the same object for ``config.json`` (``workbench/spec/hf_config.py``). Which key is which parameter
is declared once, as the keys' ``aliases:`` in ``checklists/keys.yaml`` (workbench/config/vocabulary.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import vocabulary
from ..errors import InputError
from ..input_files import expect, expect_count, read_json

# HF sizes that may be 0 (all others must be positive)
_HF_ZERO_OK = {"first_k_dense_replace", "n_shared_experts"}
_HF_MAX_DEPTH = 32                    # config.json nests 2-3 levels (text_config, rope_scaling)


@dataclass
class ModelConfigFile:
    """One model config as read: an HF ``config.json`` (``hf``) or a Megatron / MindFormers config
    (``raw`` + ``canonical``)."""

    path: Path
    hf: dict | None = None
    raw: Any = None
    canonical: Any = None


def params_from_config(path: Path | str, framework: str | None = None) -> dict[str, int]:
    """Spec parameters a config states (only those it states); ``framework`` forces the reader."""
    return params_of(read_model_config(path, framework))


def params_of(config: ModelConfigFile) -> dict[str, int]:
    """The spec parameters a config read by :func:`read_model_config` states."""
    if config.hf is not None:
        return hf_params(config.hf, str(config.path))
    return _canonical_params(config.raw, config.canonical)


def read_model_config(path: Path | str, framework: str | None = None) -> ModelConfigFile:
    """Read a model config once; ``framework`` ``hf`` / ``megatron`` / ``mindformers`` forces the reader."""
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file() and framework in (None, "hf"):
        path = path / "config.json"
    if framework == "hf" or (framework is None and path.suffix == ".json"):
        data = read_hf_config(path)
        if framework == "hf" or "model_type" in data or "num_hidden_layers" in data:
            return ModelConfigFile(path, hf=data)
    if framework is not None:
        return _canonical(path, framework)
    if path.suffix not in (".yaml", ".yml"):
        return _canonical(path, "megatron")
    try:                                  # a yaml is a MindFormers config or a Megatron --yaml-cfg / flat args
        return _canonical(path, "mindformers")
    except InputError as mindformers_error:
        try:
            return _canonical(path, "megatron")
        except InputError:
            raise mindformers_error from None


def read_hf_config(path: Path) -> dict:
    """An HF ``config.json``: a JSON object whose sizes are positive integers and numbers finite."""
    data = read_json(path, what="JSON config")
    if not isinstance(data, dict):
        raise InputError(str(path), f"expected a JSON object, found {type(data).__name__}", "pass the model's config.json")
    check_hf_values(data, str(path))
    return data


def check_hf_values(config: dict, where: str) -> None:
    """Sizes (keys this module reads) positive integers or null; every number finite, at any depth."""
    text = config.get("text_config")
    if text is not None:
        expect(text, dict, where, "text_config", "text_config must be a JSON object")
    for scope, prefix in ((config, ""), (text or {}, "text_config.")):
        for key in (*vocabulary.hf_names(), "n_shared_experts"):
            if scope.get(key) is not None:
                expect_count(scope[key], where, prefix + key, minimum=0 if key in _HF_ZERO_OK else 1,
                             fix=f"{prefix + key} must be a positive integer (or null when not used)")
    _check_finite(config, where, "", 0)


def _check_finite(value: Any, where: str, key: str, depth: int) -> None:
    if depth > _HF_MAX_DEPTH:
        raise InputError(where, f"{key} nests deeper than {_HF_MAX_DEPTH} levels", "pass the model's config.json")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(where, f"{key} is {value}, expected a finite number", f"write a finite value for {key}")
    if isinstance(value, dict):
        for child, item in value.items():
            _check_finite(item, where, f"{key}.{child}" if key else str(child), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, where, f"{key}.{index}", depth + 1)


def hf_params(config: dict[str, Any], where: str = "config.json") -> dict[str, int]:
    """HF config.json keys -> spec parameters (Mixtral's intermediate_size is the expert size)."""
    check_hf_values(config, where)
    config = {**config, **(config.get("text_config") or {})}
    out = spec_from_canonical(vocabulary.hf_to_canonical(config))
    if out.get("num_experts") and config.get("n_shared_experts") and "moe_ffn" in out:
        out["shared_ffn"] = config["n_shared_experts"] * out["moe_ffn"]
    if "num_heads" in out:
        out.setdefault("num_kv_heads", out["num_heads"])
        if "hidden" in out and "head_dim" not in out and "kv_lora_rank" not in out:
            out["head_dim"] = out["hidden"] // out["num_heads"]
    return out


def spec_from_canonical(values: dict[str, Any], stated=None) -> dict[str, int]:
    """Canonical values -> spec parameters (the keys' spec aliases), with the one size rule that is
    not a name: a MoE model's expert size defaults to the dense FFN size (Megatron's
    --moe-ffn-hidden-size default, keys.yaml moe.expert_ffn_size; HF Mixtral's intermediate_size)."""
    out = vocabulary.spec_params(values, stated)
    if out.get("num_experts") and "moe_ffn" not in out and "ffn" in out:
        out["moe_ffn"] = out["ffn"]
    return out


def canonical_params(path: Path, framework: str) -> dict[str, int]:
    """Megatron / MindFormers config -> spec parameters, via the canonical config readers."""
    config = _canonical(Path(path), framework)
    return _canonical_params(config.raw, config.canonical)


def _canonical(path: Path, framework: str) -> ModelConfigFile:
    from ..config import read_config, resolve

    raw = read_config(path, framework)
    return ModelConfigFile(path, raw=raw, canonical=resolve(raw))


def _canonical_params(raw: Any, config: Any) -> dict[str, int]:
    return spec_from_canonical(vocabulary.known_values(config), vocabulary.stated_in(config, raw))
