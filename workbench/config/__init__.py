"""Config readers: Megatron and MindFormers inputs → one canonical TrainingConfig each.

The package imports its parts when they are first asked for: a command that needs only the size vocabulary
(``workbench convert`` reading a ``config.json``) does not build the resolver and its dataclasses.
"""
from __future__ import annotations

import importlib
from pathlib import Path

__all__ = ["CanonicalValue", "RawConfig", "RawValue", "TrainingConfig", "read_config", "resolve"]

_LAZY = {"CanonicalValue": "canonical", "RawConfig": "canonical", "RawValue": "canonical",
         "TrainingConfig": "canonical", "resolve": "resolver"}


def __getattr__(name: str):
    """``resolve`` and the canonical types, imported on first use (PEP 562)."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
    globals()[name] = value
    return value


def read_config(path: Path | str, framework: str):
    """Read one side's raw config (the form is auto-detected): a :class:`RawConfig`."""
    if framework == "megatron":
        from .megatron import read_megatron

        return read_megatron(path)
    from .mindformers import read_mindformers

    return read_mindformers(path)
