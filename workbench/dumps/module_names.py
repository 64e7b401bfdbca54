"""The groups of a module (or cell) entry name, ``Module.{path}.{Class}.{pass}.{index}``, as the YAML's
``module_pattern`` gives them: by str methods where the pattern is the usual one (:data:`USUAL`), else by ``re``.

A name the usual pattern matches is ``Module.`` or ``Cell.``, a path of one character or more without a newline,
then three dot-free pieces: the class (one character or more), the pass and the index (decimal digits: ``\\d``
of a str pattern is the characters ``str.isdecimal`` accepts). So its last three dots split it, and a name
without a newline either splits so or does not match; ``$`` also matches before a final newline, so a name
holding one goes to ``re``. On 19k module names of a 200k-row dump, ``match`` and ``group`` took 12.7 ms, the
split 8 ms (``tests/test_dump_module_names.py`` holds both to the same groups on fuzzed names)."""
from __future__ import annotations

import re

USUAL = r"^(?:Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<pass>forward|backward|parameters_grad)\.(?P<index>\d+)$"
PASSES = frozenset(("forward", "backward", "parameters_grad"))


def module_groups(pattern: re.Pattern):
    """A function of a name: ``(cls, path, pass)`` where ``pattern`` matches it, else None."""
    if pattern.pattern == USUAL and pattern.flags == re.UNICODE:
        return split_usual
    match = pattern.match

    def groups(name: str):
        found = match(name)
        return found.group("cls", "path", "pass") if found else None

    return groups


def split_usual(name: str):
    """:data:`USUAL`'s ``(cls, path, pass)`` of ``name``, or None where it does not match."""
    kind, _, rest = name.partition(".")
    if kind != "Module" and kind != "Cell":
        return None
    if "\n" in rest:
        return _by_re(name)
    pieces = rest.rsplit(".", 3)
    if len(pieces) == 4 and pieces[0] and pieces[1] and pieces[2] in PASSES and pieces[3].isdecimal():
        return pieces[1], pieces[0], pieces[2]
    return None


def _by_re(name: str):
    found = _usual().match(name)
    return found.group("cls", "path", "pass") if found else None


def _usual() -> re.Pattern:
    return re.compile(USUAL)                 # re caches compiled patterns
