"""Names of dump rows: the call (invocation) a row belongs to and the parameter it holds; one name at a
time and a whole column at once (held equal in tests/test_compare_fast_matching.py).
"""
from __future__ import annotations

import re

_STEM = re.compile(r"^(?P<stem>.+?\.parameters_grad(?:\.\d+)?)(?:\.|$)|^(?P<io>.+?)\.(?:input|output|parameters)(?:\.|$)")


def call_stem(name: str) -> str:
    """The invocation a row belongs to: ``Functional.linear.0.forward.output.0`` → ``Functional.linear.0.forward``;
    a name without an io part (a MindSpore Dump kernel ``MatMul-op12``) is its own call."""
    found = _STEM.match(str(name))
    if not found:
        return str(name)
    return found.group("stem") or found.group("io")


# _STEM's two alternatives found by search: the leftmost place (after the first character) where each part
# matches is where the lazy ``.+?`` stops, provided no line break comes before it (``.`` stops there).
_GRAD_PART = re.compile(r"\.parameters_grad(?:\.\d+)?(?=\.|$)")
_IO_PART = re.compile(r"\.(?:input|output|parameters)(?=\.|$)")


def _stem_of(name: str) -> str:
    """:func:`call_stem` of a str: ``_STEM.match`` without its lazy scan over both alternatives (twice faster;
    ``tests/test_compare_fast_paths.py`` holds the two equal on fuzzed names)."""
    if "parameters_grad" in name:
        found = _GRAD_PART.search(name, 1)
        if found and "\n" not in name[:found.start()]:
            return name[:found.end()]
    found = _IO_PART.search(name, 1)
    if found and "\n" not in name[:found.start()]:
        return name[:found.start()]
    return name


# Every stem of a list at once: the names joined a line each and the io part (:data:`_IO_PART`, with whatever
# follows it) cut off each line by one substitution; ``(?:\.[^\n.]*)*$`` is ``(?=\.|$)`` and the rest of the line.
_IO_TAILS = re.compile(r"(?m)\.(?:input|output|parameters)(?:\.[^\n.]*)*$")


def stems_of(names: list) -> list[str]:
    """``[call_stem(name) for name in names]``: one substitution over the joined names when they are str without a
    line break; the names the joined text cannot decide alone (a gradient part, a stem cut to nothing because the
    io part starts the name, which :func:`_stem_of` does not cut) are redone one by one
    (``tests/test_compare_fast_paths.py`` holds it equal on fuzzed names)."""
    try:
        text = "\n".join(names)
    except TypeError:                         # a name that is not a str
        text = None
    if text is None or text.count("\n") != len(names) - 1:
        return [_stem_of(name) if type(name) is str else call_stem(cell_text(name)) for name in names]
    stems = _IO_TAILS.sub("", text).split("\n") if names else []
    if "parameters_grad" in text or "" in stems:
        for index in [i for i, (stem, name) in enumerate(zip(stems, names, strict=True))
                      if not stem or "parameters_grad" in name]:
            stems[index] = _stem_of(names[index])
    return stems


def param_name(name: str) -> str:
    """The parameter a ``parameter`` row holds: the last dotted piece of its name."""
    return str(name).rsplit(".", 1)[-1]


def cell_text(value) -> str:
    """``str`` of a table value as the table's own cells print (<NA> for a missing one)."""
    return "<NA>" if value is None else str(value)
