"""Bounds checked on a YAML event stream before anything builds a tree from it.

PyYAML's composers recurse once per nesting level (5,000 levels: ``RecursionError``; 200,000:
the C composer overflows the C stack and the process dies), and aliases are expanded by
every consumer that walks the data: ten nested aliases of ten ("billion laughs") expand to
10^9 nodes. The event stream (``yaml.parse``) is produced by an iterative parser, so one
pass over it can measure, with no recursion and no expansion:

* the nesting depth, counting what an alias brings along (an alias of a 3-deep node opened
  at depth 5 reaches depth 8);
* the number of nodes once every alias is expanded (an alias counts its anchor's subtree
  each time it is used);
* aliases that refer to a node still open around them (recursive aliases), to an anchor not
  yet defined, and anchors defined twice.

Anything beyond :data:`DEPTH_LIMIT` or :data:`NODE_BUDGET` is refused with the file and
line where the limit was crossed, before the composer sees the text.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import InputError, location

DEPTH_LIMIT = 100
"""Deepest nesting of mappings and sequences accepted (aliases included); configs nest < 10."""

NODE_BUDGET = 1_000_000
"""Most nodes a document may hold once every alias is expanded; configs hold thousands."""

_FIX_DEPTH = "flatten the YAML: configs nest fewer than 10 levels"
_FIX_BUDGET = "a config holds thousands of nodes, not millions: remove the repeated aliases"


@dataclass
class _Anchor:
    line: int                       # where it was defined
    size: int | None = None         # expanded nodes; None while its collection is still open
    height: int = 0                 # nesting levels it brings along (a scalar: 0)


@dataclass
class _Open:
    anchor: str | None
    start: int                      # expanded-node count when the collection opened
    height: int = 0                 # tallest child so far


def check_events(text: str, path: Path | str, loader: type) -> None:
    """Refuse ``text`` when its nesting, expansion or aliases are out of bounds (see module doc).

    One pass over the events, most frequent first (scalars), with the limits compared inline: this
    runs before every YAML file is composed, so its per-event cost is the price of the safety.
    """
    anchors: dict[str, _Anchor] = {}
    stack: list[_Open] = []
    count = 0
    scalar, alias, end = yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionEndEvent
    opening, document = yaml.CollectionStartEvent, yaml.DocumentStartEvent
    for event in yaml.parse(text, Loader=loader):
        kind = type(event)
        if kind is scalar:
            count += 1
            if event.anchor is not None:
                _define(anchors, event.anchor, path, event.start_mark.line + 1, size=1)
            if count > NODE_BUDGET or len(stack) > DEPTH_LIMIT:
                _check(len(stack), count, path, event.start_mark.line + 1, "")
            continue                                     # height 0: the open collection's height stays
        if kind is end or issubclass(kind, end):
            closed = stack.pop()
            height = closed.height + 1
            if closed.anchor is not None:
                anchors[closed.anchor].size, anchors[closed.anchor].height = count - closed.start, height
        elif issubclass(kind, opening):
            _define(anchors, event.anchor, path, event.start_mark.line + 1, size=None)
            stack.append(_Open(event.anchor, count))
            count += 1
            if count > NODE_BUDGET or len(stack) > DEPTH_LIMIT:
                _check(len(stack), count, path, event.start_mark.line + 1, "")
            continue
        elif kind is alias:
            line = event.start_mark.line + 1
            anchor = _resolve(anchors, event.anchor, path, line)
            count, height = count + anchor.size, anchor.height
            _check(len(stack) + height, count, path, line, f"alias *{event.anchor}")
        else:
            if issubclass(kind, document):
                anchors = {}                             # anchors do not cross documents
            continue
        if stack and stack[-1].height < height:
            stack[-1].height = height


def _define(anchors: dict[str, _Anchor], name: str | None, path: Path | str, line: int, size: int | None) -> None:
    if name is None:
        return
    if name in anchors:
        raise InputError(location(path, line), f"anchor &{name} is defined twice (first on line "
                         f"{anchors[name].line})", "give each anchor its own name")
    anchors[name] = _Anchor(line, size)


def _resolve(anchors: dict[str, _Anchor], name: str, path: Path | str, line: int) -> _Anchor:
    anchor = anchors.get(name)
    if anchor is None:
        raise InputError(location(path, line), f"alias *{name} refers to no anchor defined before it",
                         f"define &{name} above this line")
    if anchor.size is None:
        raise InputError(location(path, line), f"alias *{name} is recursive: it refers to the node "
                         f"opened on line {anchor.line} that contains it", "an alias must refer to a finished node")
    return anchor


def _check(depth: int, count: int, path: Path | str, line: int, what: str) -> None:
    if depth > DEPTH_LIMIT:
        through = f" through {what}" if what else ""
        raise InputError(location(path, line), f"YAML nests {depth} levels deep here{through}, more than the "
                         f"{DEPTH_LIMIT} accepted", _FIX_DEPTH)
    if count > NODE_BUDGET:
        grows = f"{what} expands the YAML to" if what else "the YAML reaches"
        raise InputError(location(path, line), f"{grows} more than {NODE_BUDGET:,} nodes (aliases counted "
                         "each time they are used)", _FIX_BUDGET)
