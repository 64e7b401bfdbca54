"""Match keys: one stand-in per group of module paths that every name template matches alike.

A template matches a name exactly when their skeletons (the text without digits) agree and each digit run
of the name equals the template's literal run at that place (``linear_fc1``'s ``1``) or is an index
(``0`` or no leading zero) where the template has a placeholder: a placeholder never touches a digit
(:meth:`.templates.Template._parse`), so every run is whole on both sides. Two names that differ only in
index runs which no template spells literally therefore match the same templates. The key of a name
replaces each such run by one index that no template spells; runs a template spells and runs with a
leading zero stay. Detecting a dump's module format then tries each key once (a 200k-row dump has tens
of thousands of paths, one per layer, and a few dozen keys) instead of every path.
"""
from __future__ import annotations

import re
from typing import Iterable

_DIGITS = re.compile(r"[0-9]+")             # ASCII, as templates and skeletons read digits
_DIGITS_RUN = re.compile(r"([0-9]+)")       # the same, kept by split


def literal_runs(template_texts: Iterable[str]) -> frozenset[str]:
    """The digit runs spelled in the templates' text (placeholders ``{i}`` hold none)."""
    return frozenset(run for text in template_texts for run in _DIGITS.findall(text))


def stand_in(literals: frozenset[str]) -> str:
    """An index that no template spells."""
    number = 1
    while str(number) in literals:
        number += 1
    return str(number)


def match_keys(paths: list[str], literals: frozenset[str]) -> list[str]:
    """Each path's key: its index runs that no template spells replaced by one stand-in index. The paths are
    joined a line each and split at their digit runs once, and each distinct run is decided once (not a Python
    call per run of every path); paths holding a newline are substituted one by one."""
    return keys_and_runs(paths, literals)[0]


def keys_and_runs(paths: list[str], literals: frozenset[str]) -> tuple[list[str], list[str]]:
    """:func:`match_keys` and every digit run of the paths, in order (a path's key has as many runs as the path:
    its runs are the next that many)."""
    index = stand_in(literals)
    joined = "\n".join(paths)
    if not paths or joined.count("\n") != len(paths) - 1:
        return ([_DIGITS_RUN.sub(lambda found: _kept(found.group(), literals, index), path) for path in paths],
                [run for path in paths for run in _DIGITS.findall(path)])
    pieces = _DIGITS_RUN.split(joined)                  # text, run, text, run, ..., text
    runs = pieces[1::2]
    decided = {run: _kept(run, literals, index) for run in set(runs)}
    pieces[1::2] = map(decided.__getitem__, runs)
    return "".join(pieces).split("\n"), runs


def _kept(run: str, literals: frozenset[str], index: str) -> str:
    """A digit run as the key spells it: as it is when a template spells it or it starts with a zero and goes on."""
    return run if run in literals or (run[0] == "0" and len(run) > 1) else index
