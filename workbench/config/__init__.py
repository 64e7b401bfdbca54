"""Config readers: Megatron and MindFormers inputs → one canonical TrainingConfig each."""
from __future__ import annotations

from pathlib import Path

from .canonical import CanonicalValue, RawConfig, RawValue, TrainingConfig
from .resolve import resolve

__all__ = ["CanonicalValue", "RawConfig", "RawValue", "TrainingConfig", "read_config", "resolve"]


def read_config(path: Path | str, framework: str) -> RawConfig:
    """Read one side's raw config (the form is auto-detected)."""
    if framework == "megatron":
        from .megatron import read_megatron

        return read_megatron(path)
    from .mindformers import read_mindformers

    return read_mindformers(path)
