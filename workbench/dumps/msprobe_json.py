"""The entries of an msprobe ``dump.json``'s ``data`` mapping, decoded one at a time.

A 200k-row dump.json is 67 MB; ``json.loads`` of the whole document builds every entry's dicts at once
(hundreds of MB). Here the C scanner of the standard ``json`` module decodes one entry at a time, so only
the text and the current entry are in memory. Anything irregular (not an object, no ``data`` object or two,
a repeated entry name, a syntax error) is :class:`Irregular`: the caller then decodes the whole document
with :func:`workbench.input_files.parse_json`, so errors and results are exactly those of ``json.loads``
(same messages with line and column, the last value of a repeated name).
"""
from __future__ import annotations

import json
from json.decoder import WHITESPACE, scanstring
from typing import Iterator

_SCAN = json.JSONDecoder().scan_once
_SPACE = WHITESPACE.match
DATA_FOUND = object()          # yielded once, when the ``data`` object starts (its entries follow)


class Irregular(Exception):
    """The streaming path cannot decide: decode the whole document instead."""


def data_entries(text: str, key: str = "data") -> Iterator:
    """:data:`DATA_FOUND`, then (name, body) of the top-level object's ``key`` object, in file order.
    Raises :class:`Irregular` (possibly after some entries) where ``json.loads`` would decide otherwise."""
    index = _SPACE(text, 0).end()
    if not text.startswith("{", index):
        raise Irregular
    index, found, first = index + 1, False, True
    while True:
        index = _SPACE(text, index).end()
        if first and text.startswith("}", index):
            index += 1
            break
        name, index = _key(text, index)
        if name == key:
            if found or not text.startswith("{", index):
                raise Irregular                              # a second one wins in json.loads; a non-object
            found = True
            yield DATA_FOUND
            index = yield from _members(text, index + 1)
        else:
            index = _value(text, index)[1]
        index, first = _SPACE(text, index).end(), False
        if text.startswith(",", index):
            index += 1
        elif text.startswith("}", index):
            index += 1
            break
        else:
            raise Irregular
    if not found or _SPACE(text, index).end() != len(text):
        raise Irregular


def _members(text: str, index: int):
    """(name, value) of an object whose ``{`` is just before ``index``; returns the index after its ``}``."""
    seen: set[str] = set()
    index = _SPACE(text, index).end()
    if text.startswith("}", index):
        return index + 1
    while True:
        name, index = _key(text, index)
        if name in seen:
            raise Irregular
        seen.add(name)
        value, index = _value(text, index)
        yield name, value
        index = _SPACE(text, index).end()
        if text.startswith(",", index):
            index = _SPACE(text, index + 1).end()
        elif text.startswith("}", index):
            return index + 1
        else:
            raise Irregular


def _key(text: str, index: int) -> tuple[str, int]:
    """A member's name and the index of its value (after ``:`` and spaces)."""
    if not text.startswith('"', index):
        raise Irregular
    try:
        name, index = scanstring(text, index + 1)
    except ValueError:
        raise Irregular from None
    index = _SPACE(text, index).end()
    if not text.startswith(":", index):
        raise Irregular
    return name, _SPACE(text, index + 1).end()


def _value(text: str, index: int):
    try:
        return _SCAN(text, index)
    except (StopIteration, ValueError, RecursionError):
        raise Irregular from None
