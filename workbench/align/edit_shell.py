"""Edit a Megatron launch script in place, keeping its form: flags changed where they are written
(inside ``GPT_ARGS="..."`` strings and ``ARGS=( ... )`` arrays included), absent flags added next to
their group, dropped flags removed; every change commented ``# workbench: <why>``.

Flags are found by the project's own bash reader (:mod:`workbench.config.shell_script`): only the
arguments that reach the training script, at the line each was written on. Bash allows no comment
inside a quoted string or after a ``\\`` continuation, so a change there is commented on the lines
just above the statement that holds it; elsewhere (arrays, plain lines) at the end of the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, location
from .prepare_keys import REMOVE

_SAFE_VALUE = re.compile(r"[\w.+\-/:${}@%]+\Z")


@dataclass
class _Occurrence:
    flag: str
    line: int                       # 1-based
    operands: int                   # 1 when the flag takes a value, else 0
    value: str = ""                 # the value as the script resolves it


@dataclass
class ScriptEdit:
    """The script's lines and the changes asked for; ``text()`` renders the result."""

    path: Path
    lines: list[str]
    occurrences: dict[str, list[_Occurrence]]
    order: list[_Occurrence]
    states: list[tuple[bool, bool]]             # per line: (continues into the next line, in an array)
    replaced: dict[int, str | None] = field(default_factory=dict)   # None: the line is dropped
    after: dict[int, list[str]] = field(default_factory=dict)
    above: dict[int, list[str]] = field(default_factory=dict)
    trailing: dict[int, list[str]] = field(default_factory=dict)
    header: list[str] = field(default_factory=list)
    launcher: dict[str, list[_Occurrence]] = field(default_factory=dict)   # torchrun's own arguments

    # ----------------------------------------------------------------- queries
    def has(self, flag: str) -> bool:
        return bool(self.occurrences.get(flag))

    def set_launcher(self, flags: tuple[str, ...], value, why: str) -> bool:
        """Change a launcher argument (``--nproc_per_node``) where it is written; False when absent."""
        found = [o for flag in flags for o in self.launcher.get(flag, [])]
        for occurrence in found:
            if not _same(occurrence.value, value):
                self._rewrite(occurrence, f"{occurrence.flag} {_value_text(value, self.path, occurrence.flag)}", why)
        return bool(found)

    def holds(self, flag: str, value) -> bool:
        """Every occurrence of ``flag`` already carries ``value``."""
        found = self.occurrences.get(flag)
        return bool(found) and all(_same(o.value, value) for o in found)

    # ----------------------------------------------------------------- changes
    def set(self, flag: str, value, why: str, group: str | None = None) -> None:
        """Make ``flag`` carry ``value`` (True: a bare flag present; REMOVE: drop it)."""
        if value is REMOVE:
            for occurrence in self.occurrences.get(flag, []):
                self._rewrite(occurrence, "", why)
            self.occurrences.pop(flag, None)
            return
        text = flag if value is True else f"{flag} {_value_text(value, self.path, flag)}"
        found = self.occurrences.get(flag)
        if found:
            for occurrence in found:
                if occurrence.operands or value is not True:
                    self._rewrite(occurrence, text, why)
            return
        self._add(text, why, group)

    def add_header(self, lines: list[str]) -> None:
        self.header.extend(lines)

    def _rewrite(self, occurrence: _Occurrence, text: str, why: str) -> None:
        index = occurrence.line - 1
        line = self.replaced.get(index, self.lines[index]) or ""
        pattern = re.escape(occurrence.flag) + r"(?=[\s\"'\\]|$)"
        if occurrence.operands:
            pattern += r"(?:=\S+|[ \t]+(?:\"[^\"]*\"|'[^']*'|[^\s\"'\\]+))"
        elif text and "=" in line[line.find(occurrence.flag):][:len(occurrence.flag) + 1]:
            pattern = re.escape(occurrence.flag) + r"=\S+"
        new, count = re.subn(pattern, text, line)
        if not count:
            raise InputError(location(self.path, occurrence.line), f"cannot find {occurrence.flag} on this line to edit",
                             "write the flag and its value on one line")
        emptied = not new.strip(" \t\\")
        if emptied and self.lines[index].rstrip().endswith("\\") and not self.states[index][1]:
            new = None                       # a continued line that held only this flag: dropped whole
        elif emptied:
            new = re.match(r"[ \t]*", new).group(0)
        self.replaced[index] = new
        old = self.lines[index].strip().rstrip("\\").strip()
        self._comment(index, f"{occurrence.flag}: {why} (was: {old})")

    def _add(self, text: str, why: str, group: str | None) -> None:
        anchor = self._anchor(group)
        line = self.lines[anchor]
        indent = re.match(r"[ \t]*", line).group(0)
        continued = line.rstrip().endswith("\\")
        note = f"# workbench: added: {why}"
        if self.states[anchor][1] and not continued:          # inside an array: the comment fits on the line
            self.after.setdefault(anchor, []).append(f"{indent}{text}  {note}")
            return
        self.after.setdefault(anchor, []).append(f"{indent}{text}{' ' + chr(92) if continued else ''}")
        self._comment(anchor, why, added=text)

    def _anchor(self, group: str | None) -> int:
        """The line after which a new flag goes: its group's flag when present, else the last flag
        whose line continues into the next (inside a string, an array or a ``\\`` continuation)."""
        candidates = [o for o in self.order if self.states[o.line - 1][0]]
        if not candidates:
            raise InputError(str(self.path), "no multi-line argument list to add flags to",
                             "write the training arguments over several lines (a variable, an array or \\ lines)")
        for occurrence in candidates:
            if group and occurrence.flag == group:
                return occurrence.line - 1
        sizes: dict[int, int] = {}
        for occurrence in candidates:
            start = self._statement_start(occurrence.line - 1)
            sizes[start] = sizes.get(start, 0) + 1
        largest = max(sizes, key=sizes.get)                  # the main argument list
        return [o for o in candidates if self._statement_start(o.line - 1) == largest][-1].line - 1

    def _comment(self, index: int, why: str, added: str | None = None) -> None:
        note = f"# workbench: {'added ' + added + ': ' if added else ''}{why}"
        continues, in_array = self.states[index]
        line_text = self.replaced.get(index, self.lines[index]) or ""
        if added is None and in_array and not line_text.rstrip().endswith("\\") and not self._in_string(index):
            self.trailing.setdefault(index, []).append(note)
            return
        self.above.setdefault(self._statement_start(index), []).append(note)

    def _in_string(self, index: int) -> bool:
        return index > 0 and self.states[index - 1][0] and not self.states[index - 1][1]

    def _statement_start(self, index: int) -> int:
        while index > 0 and self.states[index - 1][0]:
            index -= 1
        return index

    def text(self) -> str:
        out = []
        if self.header:
            first = 1 if self.lines and self.lines[0].startswith("#!") else 0
            out.extend(self.lines[:first])
            out.extend(self.header)
        else:
            first = 0
        for index in range(first, len(self.lines)):
            indent = re.match(r"[ \t]*", self.lines[index]).group(0)
            out.extend(indent + note for note in self.above.get(index, []))
            line = self.replaced.get(index, self.lines[index])
            if line is None:
                continue
            notes = self.trailing.get(index)
            if notes and not line.strip():
                out.append(indent + " ".join(notes))
            else:
                out.append(f"{line}  {' '.join(notes)}" if notes else line)
            out.extend(self.after.get(index, []))
        return "\n".join(out) + "\n"


def _same(text: str, value) -> bool:
    try:
        return float(text) == float(value)
    except (TypeError, ValueError):
        return text == str(value)


def _value_text(value, path: Path, flag: str) -> str:
    text = repr(value) if isinstance(value, float) else str(value)
    if not _SAFE_VALUE.fullmatch(text):
        raise InputError(str(path), f"cannot write {flag} {text!r} into a launch script safely",
                         "use a value without spaces or quotes")
    return text


def line_states(lines: list[str]) -> list[tuple[bool, bool]]:
    """Per line: does it continue into the next (open quote, open array, trailing ``\\``), is it in an array."""
    quote, depth, states = "", 0, []
    for line in lines:
        index, escaped = 0, False
        while index < len(line):
            char = line[index]
            if escaped:
                escaped = False
            elif char == "\\" and quote != "'":
                escaped = True
            elif quote:
                if char == quote:
                    quote = ""
            elif char in "\"'":
                quote = char
            elif char == "#" and (index == 0 or line[index - 1] in " \t"):
                break
            elif char == "(":
                depth += 1
            elif char == ")":
                depth = max(depth - 1, 0)
            index += 1
        backslash = line.rstrip("\n").endswith("\\") and not quote == "'"
        states.append((bool(quote) or depth > 0 or backslash, depth > 0 and not quote))
    return states


def open_script(path: Path, text: str) -> ScriptEdit:
    """Parse ``text`` with the project's bash reader and index every flag reaching the training script."""
    from ..config.shell_script import parse_launch_script

    command = parse_launch_script(path, text=text)
    occurrences, order = _index(command.script_args)
    launcher, _ = _index(command.launcher_args)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return ScriptEdit(path, lines, occurrences, order, line_states(lines), launcher=launcher)


def _index(tokens: list) -> tuple[dict[str, list[_Occurrence]], list[_Occurrence]]:
    """Every ``--flag`` among ``tokens``, with the line it is written on and its value."""
    occurrences: dict[str, list[_Occurrence]] = {}
    order = []
    for position, token in enumerate(tokens):
        if not token.text.startswith("--"):
            continue
        flag = token.text.split("=", 1)[0]
        operands = 1 if "=" in token.text else 0
        following = position + 1
        while following < len(tokens) and not tokens[following].text.startswith("--"):
            operands += 1                   # written on the flag's line, or through a variable written there
            following += 1
        value = token.text.split("=", 1)[1] if "=" in token.text else \
            tokens[position + 1].text if operands else ""
        occurrence = _Occurrence(flag, token.line, min(operands, 1), value)
        occurrences.setdefault(flag, []).append(occurrence)
        order.append(occurrence)
    return occurrences, order
