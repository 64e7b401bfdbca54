"""Typed conversion of raw values (strings from shell scripts, yaml scalars, log reprs) and the
declared value ranges (``min:``/``max:`` in ``checklists/keys.yaml`` and the framework yamls)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..input_files import expect_in_range

_DTYPES = {
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "single": "fp32",
    "fp64": "fp64", "float64": "fp64", "double": "fp64",
}
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", "none", ""}


def normalize_dtype(value: Any) -> str | None:
    """``torch.bfloat16`` / ``mstype.float16`` / ``"float32"`` → ``bf16`` / ``fp16`` / ``fp32``."""
    text = str(value).strip().strip("'\"").lower()
    text = text.rsplit(".", 1)[-1]
    return _DTYPES.get(text)


def convert(value: Any, kind: str, origin: str) -> Any:
    """Convert ``value`` to the registry type ``kind``; InputError naming ``origin`` on failure."""
    if kind == "any" or value is None:
        return value
    try:
        return _CONVERTERS[kind](value)
    except (TypeError, ValueError):
        raise InputError(origin, f"expected {_DESCRIPTIONS[kind]}, found {value!r}",
                         "correct the value") from None


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError
    if isinstance(value, int):
        return value
    number = float(value)
    if not number.is_integer():
        raise ValueError
    return int(number)


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError
    number = float(value)
    if not math.isfinite(number):  # nan / inf reach no framework's arithmetic as intended
        raise ValueError
    return number


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError


def _to_dtype(value: Any) -> str:
    dtype = normalize_dtype(value)
    if dtype is None:
        raise ValueError
    return dtype


def _to_str(value: Any) -> str:
    if isinstance(value, (dict, list)):
        raise TypeError
    return str(value)


_CONVERTERS = {"int": _to_int, "float": _to_float, "bool": _to_bool, "dtype": _to_dtype, "str": _to_str}
_DESCRIPTIONS = {"int": "an integer", "float": "a finite number", "bool": "true or false",
                 "dtype": "a dtype (float32, float16, bfloat16)", "str": "a string"}


def map_value(value: Any, value_map: dict) -> tuple[bool, Any]:
    """Look ``value`` up in a registry ``map`` tolerantly (``"True"`` finds ``true``)."""
    candidates = [value]
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE | {"true"}:
            candidates.append(True)
        if lowered in {"false"}:
            candidates.append(False)
        candidates.append(value.strip())
    else:
        candidates.append(str(value))
    for candidate in candidates:
        try:
            if candidate in value_map:
                return True, value_map[candidate]
        except TypeError:
            continue
    return False, None


@dataclass(frozen=True)
class Bounds:
    """A declared value range; ``None`` leaves that side open."""

    minimum: float | None = None
    maximum: float | None = None

    def check(self, value: Any, where: str, key: str) -> Any:
        """``value`` when it lies in range (None passes: absent), else one InputError naming ``where`` and ``key``."""
        if value is None or (self.minimum is None and self.maximum is None):
            return value
        return expect_in_range(value, where, key, minimum=self.minimum, maximum=self.maximum,
                               fix=f"use a value {self.describe()}")

    def describe(self) -> str:
        low = "" if self.minimum is None else f">= {self.minimum:g}"
        high = "" if self.maximum is None else f"<= {self.maximum:g}"
        return " and ".join(part for part in (low, high) if part)


def parse_bounds(entry: dict, kind: str, where: str) -> Bounds:
    """``min:``/``max:`` of a registry entry: numbers, on an int or float value, with min <= max."""
    found = {name: entry[name] for name in ("min", "max") if name in entry}
    if not found:
        return Bounds()
    if kind not in ("int", "float"):
        raise InputError(where, f"min/max on a value of type {kind}", "declare ranges on int or float values only")
    for name, bound in found.items():
        expect_in_range(bound, where, name, fix="write min:/max: as numbers")
    bounds = Bounds(found.get("min"), found.get("max"))
    if bounds.minimum is not None and bounds.maximum is not None and bounds.minimum > bounds.maximum:
        raise InputError(where, f"min {bounds.minimum} is above max {bounds.maximum}", "swap or fix them")
    return bounds


def checked(value: Any, kind: str, bounds: Bounds, origin: str, key: str) -> Any:
    """``convert`` then the range check: the one test every config value passes at load."""
    return bounds.check(convert(value, kind, origin), origin, key)
