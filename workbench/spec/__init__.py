"""Converter specs (``converters/*.yaml``): logical tensor names, formats, named invertible transforms.

    arch = load_arch(detect_arch(names))                      # or load_arch("llama")
    fmt = detect_format(names, arch)                          # "hf", "megatron", "mindformers", ...
    params = infer_params(metas, fmt, arch, params_from_config("config.json"))
    plan = build_plan(metas, fmt, "mindformers", arch, params, target_dtype="bf16")
    for step in plan.steps:
        sink.write(step.target.name, materialize(step, source.read))

numpy only (no torch / mindspore); plans read headers, never tensors.
"""
from __future__ import annotations

import importlib

# Each public name is imported from its module on first use (PEP 562): `workbench compare` needs only the module
# views (spec.modules), and importing the package used to import the planner, detection and inference too
# (~100 M instructions, ~20 ms, in the serial part of every comparison).
_HOME = {
    "ArchSpec": "arch",
    "FormatSpec": "arch",
    "LogicalTensor": "arch",
    "Rule": "arch",
    "hf_params": "config_params",
    "params_from_config": "config_params",
    "params_of": "config_params",
    "read_model_config": "config_params",
    "FormatFit": "detect",
    "detect_arch": "detect",
    "detect_format": "detect",
    "format_fits": "detect",
    "formats_for": "detect",
    "infer_params": "infer",
    "available_archs": "loader",
    "load_arch": "loader",
    "PARAMS": "model_params",
    "ModelParams": "model_params",
    "PartRef": "plan",
    "Plan": "plan",
    "Step": "plan",
    "build_plan": "plan",
    "expected_metas": "plan",
    "materialize": "plan",
    "Match": "resolve",
    "Resolution": "resolve",
    "missing": "resolve",
    "resolve_names": "resolve",
    "TRANSFORM_NAMES": "transforms",
}


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = ["ArchSpec", "FormatFit", "FormatSpec", "LogicalTensor", "Match", "ModelParams", "PARAMS", "PartRef",
           "Plan", "Resolution", "Rule", "Step", "TRANSFORM_NAMES", "available_archs", "build_plan", "detect_arch",
           "detect_format", "expected_metas", "format_fits", "formats_for", "hf_params", "infer_params", "load_arch", "materialize",
           "missing", "params_from_config", "params_of", "read_model_config", "resolve_names"]
