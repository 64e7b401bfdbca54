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

from .arch import ArchSpec, FormatSpec, LogicalTensor, Rule
from .config_params import hf_params, params_from_config, params_of, read_model_config
from .detect import FormatFit, detect_arch, detect_format, format_fits, formats_for
from .infer import infer_params
from .loader import available_archs, load_arch
from .model_params import PARAMS, ModelParams
from .plan import PartRef, Plan, Step, build_plan, expected_metas, materialize
from .resolve import Match, Resolution, missing, resolve_names
from .transforms import TRANSFORM_NAMES

__all__ = ["ArchSpec", "FormatFit", "FormatSpec", "LogicalTensor", "Match", "ModelParams", "PARAMS", "PartRef",
           "Plan", "Resolution", "Rule", "Step", "TRANSFORM_NAMES", "available_archs", "build_plan", "detect_arch",
           "detect_format", "expected_metas", "format_fits", "formats_for", "hf_params", "infer_params", "load_arch", "materialize",
           "missing", "params_from_config", "params_of", "read_model_config", "resolve_names"]
