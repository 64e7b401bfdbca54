"""Read the ``arguments`` block that Megatron-LM / MindSpeed-LLM print at start-up.

Megatron's ``megatron/training/arguments.py::_print_args`` writes (rank 0 only)::

    ------------------------ arguments ------------------------
      {name} {'.' * (48 - len(name))} {str(value)}        # sorted case-insensitively
    -------------------- end of arguments ---------------------

so a name of 48+ characters has no dots at all. In real logs every line may carry a prefix
(timestamps, ``[rank0]:``, ``[default0]:`` from ``torchrun --tee``), other ranks may write
lines in between, and the whole block may appear once per rank or per restart: the first
complete block wins. Values are ``str(value)``; they are read back with
``ast.literal_eval`` only (never evaluated), falling back to the raw text, so
``torch.bfloat16`` and ``AttnBackend.auto`` stay strings.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from workbench import input_files
from workbench.errors import InputError, location

_HEADER = re.compile(r"(?<!-)-{8,} arguments -{8,}")   # (?<!-): linear on long dash runs
_END = re.compile(r"(?<!-)-{8,} end of arguments -{8,}")
_RANK_TAG = re.compile(r"\[(?:rank|default)\d+\]")
_BODY = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*) (\.*)(?: (.*))?\Z")
_ANYWHERE = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*) (\.+)(?: (.*))?\Z")
_DOTS_WIDTH = 48                    # '.' * (48 - len(name)) in _print_args
_FLOATS = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def has_arguments_block(text_head: str) -> bool:
    """True when the text (e.g. the first ~200 KB of a file) contains the block's header."""
    return _HEADER.search(text_head) is not None


def parse_value(raw: str) -> object:
    """Read back ``str(value)``: Python literals via ``ast.literal_eval``, else the text."""
    text = raw.strip()
    if text in _FLOATS:
        return _FLOATS[text]
    if not text or len(text) > 100_000:
        return text
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    if isinstance(value, tuple) and not text.startswith("("):
        return text                 # "969,30,1" (--split) is a string, not a tuple
    return value


def _shape(text: str) -> str:
    """Digits folded, so "12:00:01 [rank0]:" and "12:00:02 [rank0]:" share one shape."""
    return re.sub(r"\d", "0", text)


def _arg_line(line: str, prefix: str) -> tuple[str, str] | None:
    """(name, raw value) from one body line, or None when it is not an argument line.

    The dots must fill the name to exactly 48 columns, as _print_args writes them: this
    keeps other processes' lines ("Loading checkpoint ...") out of the block."""
    m = _BODY.match(line, len(prefix)) if _shape(line[:len(prefix)]) == _shape(prefix) else None
    m = m or _ANYWHERE.search(line)
    if m and len(m.group(1)) + len(m.group(2)) == max(_DOTS_WIDTH, len(m.group(1))):
        return m.group(1), m.group(3) or ""
    return None


def _rank_tag(text: str) -> str | None:
    m = _RANK_TAG.search(text)
    return m.group(0) if m else None


def read_arguments_block(path: Path | str, *, text: str | None = None) -> dict[str, tuple[object, int]]:
    """Argument name -> (Python value, 1-based line) from the first complete block.

    ``text``: the log's content when the caller has read it already (a pipe is read once);
    else ``path`` is read through :mod:`workbench.input_files`."""
    path = Path(path)
    if text is None:
        text = input_files.read_text(path, what="log")
    start = None
    prefix, tag, args = "", None, {}
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if start is not None and tag and _rank_tag(line[:len(prefix) + 16]) not in (tag, None):
            continue        # another rank writing in between
        header = _HEADER.search(line)
        if header:          # (again): an unfinished earlier block is dropped
            start, prefix, args = number, line[:header.start()], {}
            tag = _rank_tag(prefix)
        elif start is None:
            continue
        elif _END.search(line):
            return args
        else:
            parsed = _arg_line(line, prefix)
            if parsed and parsed[0] not in args:
                args[parsed[0]] = (parse_value(parsed[1]), number)
    if start is None:
        raise InputError(location(path), "no Megatron arguments block found (expected a line "
                         "'------------------------ arguments ------------------------')",
                         "pass rank 0's log from the start of the run, or a launch script or checkpoint")
    raise InputError(location(path, start), "the arguments block starting here has no "
                     "'-------------------- end of arguments ---------------------' line",
                     "the log is cut short: pass a complete log of the run's start")
