"""The decoder layer of module paths (:meth:`.formats.DumpFormats.layer` of each), for the reader's distinct
paths at once: the compiled ``dumpscan_layers`` (``workbench/native/dumplayers.h``) where the YAML's
``layer_pattern`` has the form ``(?:^|\\.)WORD\\.(\\d+)(?:\\.|$)`` and the paths are ASCII without newlines (there
``\\d`` is 0-9 and ``$`` the end), else one ``re.search`` per path. 19k paths: one search each took ~23 ms of a
side's read. ``tests/test_dump_layers.py`` holds both to the same numbers."""
from __future__ import annotations

import ctypes
import re

from ..native import library
from .formats import DumpFormats

_FORM = re.compile(r"\(\?:\^\|\\\.\)([A-Za-z_][A-Za-z0-9_]*)\\\.\(\\d\+\)\(\?:\\\.\|\$\)")
_INT64_P = ctypes.POINTER(ctypes.c_int64)
TOO_LONG = -2                                       # more digits than the C side reads: Python reads that path


def layer_numbers(paths: list[str], fmt: DumpFormats) -> list[int | None]:
    """``fmt.layer(path)`` for each path ("" has none)."""
    found = _compiled(paths, fmt)
    if found is None:
        return [fmt.layer(path) if path else None for path in paths]
    return [None if n == -1 else fmt.layer(path) if n == TOO_LONG else n
            for n, path in zip(found.tolist(), paths, strict=True)]


def layer_word(pattern: re.Pattern) -> str | None:
    """WORD of a pattern of the compiled form, else None (other flags too: case, multiline, verbose...)."""
    found = _FORM.fullmatch(pattern.pattern) if isinstance(pattern.pattern, str) else None
    return found.group(1) if found and pattern.flags == re.UNICODE else None


def _compiled(paths: list[str], fmt: DumpFormats):
    import numpy as np

    from .msprobe_lines import packed

    scanner, word = library("dumpscan"), layer_word(fmt.layer_pattern)
    if scanner is None or word is None or not paths:
        return None
    try:
        joined = "\n".join(paths)
    except TypeError:
        return None                                 # not all str (None: no path): one by one
    if not joined.isascii() or joined.count("\n") != len(paths) - 1:
        return None                                 # non-ASCII or a newline in a path
    text, spans = packed(paths, np.fromiter(map(len, paths), np.int64, len(paths)))
    out = np.empty(len(paths), np.int64)
    word_bytes = word.encode("ascii")
    scanner.dumpscan_layers.restype = ctypes.c_int64
    code = scanner.dumpscan_layers(ctypes.c_char_p(text), ctypes.c_int64(len(text)), spans.ctypes.data_as(_INT64_P),
                                   ctypes.c_int64(len(paths)), ctypes.c_char_p(word_bytes),
                                   ctypes.c_int64(len(word_bytes)), out.ctypes.data_as(_INT64_P))
    return out if code == 0 else None
