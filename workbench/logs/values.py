"""Printed numbers to floats, the same way for every format.

Forms seen in the logs: ``1.000000E-05``, ``3.210``, ``nan``, ``inf``, ``  0`` (Megatron), ``1e-05``,
``[1.508834]`` (a float32 array of one), ``None`` (no clipping), ``False``/``True`` (overflow),
``1752ms``, ``0.001T`` (units), ``[10.633/10.700]`` (MindFormers non-sink: current / mean).
``number`` returns ``None`` for anything else (``[1 31049]``, a typo of the public docs): the
reader says so in its notes and never crashes. Absurd magnitudes (``1e999``) become ``inf``.
"""
from __future__ import annotations

import math

import numpy as np

MAX_TOKEN = 64                  # characters of one printed number; longer is not a number
WORDS = {"none": math.nan, "nan": math.nan, "false": 0.0, "true": 1.0, "inf": math.inf, "-inf": -math.inf}


def number(text: str, unit: str = "") -> float | None:
    """The value of one printed field (see the module doc); ``None`` when it is not a number."""
    token = text.strip()
    if unit and token.endswith(unit):
        token = token[:-len(unit)].strip()
    if len(token) > MAX_TOKEN or not token:
        return None
    if token.startswith("[") and token.endswith("]"):
        inner = token[1:-1].strip()
        token = inner.split("/", 1)[0].strip() if "/" in inner else inner
        if " " in token:
            return None
    lowered = token.lower()
    if lowered in WORDS:
        return WORDS[lowered]
    try:
        return float(token)
    except ValueError:
        return None


def mean_part(text: str) -> float | None:
    """The second number of ``[current/mean]`` (MindFormers non-sink loss), else ``None``."""
    token = text.strip()
    if token.startswith("[") and token.endswith("]") and "/" in token:
        return number(token[1:-1].split("/", 1)[1])
    return None


def parse_joined(data: bytes, count: int) -> np.ndarray | None:
    """``count`` numbers separated by whitespace or NUL bytes: by ``fastnum`` when they are printed in
    its layouts (bit for bit what ``float`` gives), else by numpy's C parser; ``None`` when the text
    holds anything else (the caller then goes value by value with ``floats``)."""
    import warnings

    from .fastnum import token_floats

    fast = token_floats(data, count)                      # NUL is a blank there too
    if fast is not None:
        return fast
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            values = np.fromstring(data.replace(b"\x00", b" "), dtype=np.float64, sep=" ")
        except (DeprecationWarning, ValueError):
            return None
    return values if values.size == count else None


def floats(raw: list[bytes]) -> tuple[np.ndarray, list[int]]:
    """A column of printed numbers (bytes) as float64 in one numpy call; positions that are not
    numbers come back as nan and are listed. Each value is read on its own: what numpy reads (the
    column's usual case), else what ``number`` reads, so that a value never depends on its neighbours."""
    if not raw:
        return np.empty(0, dtype=np.float64), []
    try:
        return np.array(raw, dtype=np.bytes_).astype(np.float64), []
    except ValueError:
        values, bad = np.empty(len(raw), dtype=np.float64), []
        for index, item in enumerate(raw):
            try:
                value = np.array([item], dtype=np.bytes_).astype(np.float64)[0]
            except ValueError:
                value = number(item.decode("utf-8", errors="replace"))
            if value is None:
                bad.append(index)
                value = math.nan
            values[index] = value
        return values, bad
