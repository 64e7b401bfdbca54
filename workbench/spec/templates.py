"""Name templates: ``decoder.layers.{i}.mlp.experts.linear_fc1.weight{e}`` -> an anchored regex.

Placeholders are ``{i}`` (layer) and ``{e}`` (expert); each matches a decimal index without
leading zeros. No fuzzy matching: a name matches a template only if the whole name does.
Templates are bucketed by their *skeleton* (the text without digits and placeholders), so
resolving a name tries only the few templates of its skeleton, not all of them.

The anchored regex is compiled on a template's first match, not when the spec is loaded: a
conversion loads every architecture's spec to detect the model, yet matches names against only
the few templates whose skeleton its names have (the spec's validation is unchanged).

Logical keys may list several parts: ``layers.{i}.attn.[q,k,v]`` -> ``layers.{i}.attn.q``, ...
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Mapping

VARIABLES = ("i", "e")
_PIECES = re.compile(r"(\{[^{}]*\})")
_DIGITS = re.compile(r"\d+")
_NO_DIGITS = str.maketrans("", "", "0123456789")
_PARTS_KEY = re.compile(r"^(.*)\[([^\[\]]+)\]$")


class TemplateError(ValueError):
    """A template with an unknown placeholder, a stray brace or an ambiguous index position."""


@dataclass(frozen=True)
class Template:
    """A tensor-name template (``layers.{i}.attn.q``): anchored, with its index variables and skeleton."""

    text: str
    variables: tuple[str, ...] = field(default=(), compare=False)
    pattern: str = field(default="", compare=False, repr=False)       # the anchored regex's source
    skeleton: str = field(default="", compare=False, repr=False)

    @cached_property
    def regex(self) -> re.Pattern:
        """Compiled on first use (a frozen dataclass still has a ``__dict__`` for the cache)."""
        return re.compile(self.pattern)

    @staticmethod
    def parse(text: str) -> "Template":
        if isinstance(text, str) and text:
            return _parse_cached(text)            # a template is immutable: parse each text once
        raise TemplateError(f"{text!r} is not a tensor name template")

    @staticmethod
    def _parse(text: str) -> "Template":
        if not isinstance(text, str) or not text:
            raise TemplateError(f"{text!r} is not a tensor name template")
        pieces = _PIECES.split(text)
        variables, pattern, skeleton = [], [], []
        for index, piece in enumerate(pieces):
            if index % 2 == 0:
                if "{" in piece or "}" in piece:
                    raise TemplateError(f"stray brace in '{text}' (placeholders are {{i}} and {{e}})")
                pattern.append(re.escape(piece))
                skeleton.append(piece.translate(_NO_DIGITS))
                continue
            name = piece[1:-1]
            if name not in VARIABLES:
                raise TemplateError(f"unknown placeholder {piece} in '{text}' (use {{i}} for layers, {{e}} for experts)")
            if name in variables:
                raise TemplateError(f"placeholder {piece} appears twice in '{text}'")
            before, after = pieces[index - 1], pieces[index + 1] if index + 1 < len(pieces) else ""
            if (before[-1:].isdigit() or after[:1].isdigit()) or (not before and index > 1) or \
                    (not after and index + 2 < len(pieces)):
                raise TemplateError(f"placeholder {piece} in '{text}' touches a digit or another placeholder, "
                                    "so the index could not be read back unambiguously")
            variables.append(name)
            pattern.append(f"(?P<{name}>0|[1-9][0-9]*)")
        return Template(text, tuple(variables), "^" + "".join(pattern) + "$", "".join(skeleton))

    def match(self, name: str) -> dict[str, int] | None:
        """The indices of ``name`` (``{"i": 3}``) when the whole name matches, else None."""
        found = self.regex.match(name)
        if found is None:
            return None
        return {key: int(value) for key, value in found.groupdict().items()} if self.variables else {}

    def format(self, env: Mapping[str, int]) -> str:
        """The concrete name for these indices (placeholders are ``str.format`` fields)."""
        return self.text.format_map(env) if self.variables else self.text


@lru_cache(maxsize=1 << 16)              # a dump's module paths are asked once per format and per resolver
def skeleton_of(name: str) -> str:
    """A physical name's bucket key: the name without its digits (a template's: without digits
    and placeholders). Names of one template share it; the anchored regex then decides."""
    return name.translate(_NO_DIGITS)


def split_parts_key(key: str) -> tuple[str, ...]:
    """``layers.{i}.attn.[q,k,v]`` -> (``layers.{i}.attn.q``, ``layers.{i}.attn.k``, ``layers.{i}.attn.v``)."""
    found = _PARTS_KEY.match(key)
    if not found:
        return (key,)
    prefix, items = found.group(1), [item.strip() for item in found.group(2).split(",")]
    if not all(items) or len(set(items)) != len(items):
        raise TemplateError(f"'{key}' must list distinct part names inside [...], e.g. [q,k,v]")
    return tuple(prefix + item for item in items)


def glob_regex(pattern: str) -> re.Pattern:
    """An ``ignore:`` pattern: ``*`` matches any text, everything else literally (anchored)."""
    return re.compile("^" + ".*".join(re.escape(piece) for piece in pattern.split("*")) + "$")


@lru_cache(maxsize=16384)
def _parse_cached(text: str) -> Template:
    return Template._parse(text)
