"""Read a bash launch script (MindSpeed-LLM or upstream Megatron style) into argv tokens.

Nothing in the script is executed. A small bash lexer keeps every character's script line
through quoting, ``\\``-newline continuations, ``${VAR}``/``${VAR:-default}``/``$((...))``
expansion, bash arrays (``ARGS=( ... )``, ``ARGS+=( ... )``, ``${ARGS[@]}``) and word
splitting, so a flag that reaches the training script through ``GPT_ARGS="..."`` still
points at the line inside that definition. What cannot be known statically (``$1``,
environment variables the script does not set, ``$(cmd)``) stays visible as a token whose
``unresolved`` names it. Assignments inside ``for``/``while``/``case``/functions/
subshells are not applied and are reported in ``notes``; an ``if`` whose condition the script's
constants decide is evaluated (:mod:`.shell_if`).

One deliberate departure from bash: a variable whose value is plain words separated by
spaces (``TOKENIZER_MODEL="your tokenizer path"``, the placeholders of example scripts) is
kept as one argument where bash would split it; a note says so.

Layout: :mod:`.shell_lexer` turns text into words, :mod:`.shell_expand` applies variables
and expansion, this module walks the commands and picks the launch command.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from workbench import input_files
from workbench.errors import InputError, location

from .shell_expand import Expander
from .shell_if import IfBlock, evaluate_test
from .shell_lexer import Lexer, is_assignment, plain_word
from .shell_text import Token

__all__ = ["LaunchCommand", "SCRIPT_LIMIT", "Token", "parse_launch_script"]

SCRIPT_LIMIT = 1024 * 1024
"""Largest launch script read (1 MiB): real ones are under 20 KiB, and every character is tracked."""


@dataclass
class LaunchCommand:
    path: Path
    line: int                      # line where the launch command starts
    launcher: str                  # "torchrun" | "python" | "deepspeed" | "python -m torch.distributed.launch" | ...
    launcher_args: list[Token]     # before the training script, e.g. --nproc_per_node 8
    script: str                    # e.g. "pretrain_gpt.py"
    script_args: list[Token]       # what reaches the training script: only these are Megatron args
    notes: list[str] = field(default_factory=list)


_SEPARATORS = {"nl", ";", ";;", "&", "&&", "||", "|", "|&", "(", ")"}
_WRAPPERS = {"nohup", "exec", "time", "env", "srun", "numactl", "taskset", "stdbuf", "nice", "command"}
_KEYWORDS = {"if", "then", "elif", "else", "fi", "for", "select", "while", "until", "do", "done",
             "case", "esac", "function", "{", "}", "!", None}
_DECLARE = {"export", "declare", "typeset", "local", "readonly"}
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?\Z")


def _basename(text: str) -> str:
    return text.rsplit("/", 1)[-1]


def _is_launcher(name: str) -> bool:
    return name in ("torchrun", "deepspeed") or bool(_PYTHON.fullmatch(name))


class _Shell(Expander):
    """Walks the token stream: applies top-level assignments, collects launch commands."""

    def __init__(self, path: Path, positional: Sequence[str], environ: Mapping[str, str] | None):
        super().__init__(path, positional, environ)
        self.pending_func = False
        self.separator: str | None = None
        self.launches: list[LaunchCommand] = []

    def run(self, tokens: list[tuple]) -> None:
        cmd: list[tuple] = []
        redirected = False
        for kind, val, line in tokens + [("nl", None, 0)]:
            if kind in ("word", "array"):
                cmd += [] if redirected else [(kind, val, line)]
            elif kind == "op" and val not in _SEPARATORS:
                redirected = True                    # > file, 2>&1, < in: the command's words end here
            elif val == "(" and [plain_word(w) for w in cmd][:-1] in ([], ["function"]) and cmd \
                    and plain_word(cmd[-1]) not in _KEYWORDS:
                self.pending_func, cmd = True, []    # name() { ... }
            else:
                self.separator = val                 # `if A || B`: A alone does not decide the condition
                self._command(cmd)
                if val == "(" and not cmd:
                    self.stack.append("subshell")
                elif val == ")" and self.stack and self.stack[-1] == "subshell":
                    self.stack.pop()
                cmd, redirected = [], False

    def _keywords(self, words: list[tuple]) -> list[tuple] | None:
        """Track the block keywords leading a command; the words after them, or None if done."""
        while words:
            kw = plain_word(words[0])
            if kw == "if":
                self.stack.append(IfBlock())
                self._if().condition(self._condition(words[1:]))
                return None
            if kw == "elif" and self._if() is not None:
                self._if().next_branch()
                self._if().condition(self._condition(words[1:]))
                return None
            if kw == "else" and self._if() is not None:
                self._if().otherwise()
            elif kw == "fi" and self._if() is not None:
                self._end_if(words[0][2])
            elif kw in ("while", "until"):
                self.stack.append(kw)
            elif kw in ("for", "select", "case"):
                self.stack.append(kw)
                return None
            elif kw in ("fi", "done", "esac", "}"):
                self.stack = self.stack[:-1]
            elif kw == "{":
                self.stack.append("function" if self.pending_func else "group")
                self.pending_func = False
            elif kw == "function":
                self.pending_func, words = True, words[1:]
            elif kw not in ("then", "do", "else", "elif", "!"):
                break
            words = words[1:]
        return words

    # -- if statements ------------------------------------------------------------------
    def _if(self):
        top = self.stack[-1] if self.stack else None
        return top.state if isinstance(top, IfBlock) else None

    def _condition(self, words: list[tuple]) -> bool | None:
        fields = [f for w in words if w[0] == "word" for f in self.fields(w)]
        if self.separator in ("&&", "||", "|", "|&") or any(f.unresolved() for f in fields):
            return None
        return evaluate_test([f.text for f in fields])

    def _end_if(self, line: int) -> None:
        state = self.stack.pop().state
        for word in state.common_assignments():
            self.note(line, f"{_assigned(word)} is set the same in every branch of an undecided `if`: applied")
            self.assign(word)

    def _block(self) -> str | None:
        for block in reversed(self.stack):
            if block == "group" or isinstance(block, IfBlock) and block.state.active is True:
                continue
            if isinstance(block, IfBlock):
                return "if" if block.state.active is None else "if (branch not taken)"
            return block
        return None

    def assign(self, word: tuple) -> None:
        undecided = next((b for b in reversed(self.stack) if b != "group" and not
                          (isinstance(b, IfBlock) and b.state.active is True)), None)
        if isinstance(undecided, IfBlock) and undecided.state.active is None:
            key = tuple(f.text for part in _assigned_words(word) for f in self.fields(part))
            undecided.state.branches[-1][_assigned(word)] = (key, word)
        super().assign(word)

    def _command(self, words: list[tuple]) -> None:
        words = self._keywords(words)
        if words is None:
            return
        n = next((k for k, w in enumerate(words) if not is_assignment(w)), len(words))
        if words and n == len(words):
            for w in words:
                self.assign(w)
            return
        words = words[n:]                            # VAR=x cmd: the assignment is for cmd only
        kw = plain_word(words[0]) if words else None
        if kw in _DECLARE:
            for w in words[1:]:
                if is_assignment(w):
                    self.assign(w)
        elif kw == "unset" and not self._block():
            for w in words[1:]:
                self.vars.pop(plain_word(w) or "", None)
        elif kw in ("source", "."):
            self.note(words[0][2], f"`{kw} ...` not followed: variables it sets stay unresolved")
        elif words and self._block() != "if (branch not taken)":
            self._launch(words)

    def _launch(self, words: list[tuple]) -> None:
        words = [w for w in words if w[0] == "word"]
        first = self.fields(words[0]) if words else []
        base = _basename(first[0].text) if first else ""
        if base not in _WRAPPERS and not _is_launcher(base):
            return
        toks = [f.token(w[2]) for w in words for f in self.fields(w)]
        j = next((k for k, t in enumerate(toks) if _is_launcher(_basename(t.text))), None)
        if j is None:
            return
        launcher, rest = _basename(toks[j].text), toks[j + 1:]
        s = next((k for k, t in enumerate(rest) if t.text.endswith(".py")), None)
        if s is None:
            return
        if _PYTHON.fullmatch(launcher):
            launcher = "python"
            m = next((k for k, t in enumerate(rest[:s]) if t.text == "-m"), None)
            if m is not None:                        # python [-u] -m torch.distributed.launch ...
                if m + 1 >= len(rest) or not rest[m + 1].text.startswith("torch.distributed."):
                    return
                launcher, rest, s = f"python -m {rest[m + 1].text}", rest[:m] + rest[m + 2:], s - 2
        self.launches.append(LaunchCommand(self.path, words[0][2], launcher, rest[:s],
                                           rest[s].text, rest[s + 1:], []))


def _assigned(word: tuple) -> str:
    """``NAME=`` / ``NAME+=`` of an assignment word or array assignment."""
    if word[0] == "array":
        return f"{word[1][0]}{'+=' if word[1][1] else '='}"
    text = word[1][0][2].text
    return text[:text.index("=") + 1]


def _assigned_words(word: tuple) -> list[tuple]:
    """The words whose expansion is the assigned value (the elements of an array assignment)."""
    return list(word[1][2]) if word[0] == "array" else [word]


def _rank(cmd: LaunchCommand) -> int:
    """Prefer a distributed launcher and a training script over helper python calls."""
    script = _basename(cmd.script).lower()
    return (cmd.launcher != "python") + any(k in script for k in ("train", "tune"))


def _script_text(path: Path, text: str | None) -> str:
    """The script's text: ``text`` when the caller already read it (a pipe is read once), else
    read through :mod:`workbench.input_files`; at most SCRIPT_LIMIT either way."""
    if text is None:
        text = input_files.read_text(path, limit=SCRIPT_LIMIT, what="launch script")
    elif len(text) > SCRIPT_LIMIT:
        raise InputError(str(path), f"launch script is {input_files.describe_size(len(text))}, more than the "
                         f"{input_files.describe_size(SCRIPT_LIMIT)} accepted", "pass the launch script itself")
    return text.replace("\r\n", "\n")


def _pick(shell: _Shell) -> LaunchCommand:
    """The best launch command, with notes about the others and the whole walk."""
    if not shell.launches:
        raise InputError(location(shell.path), "no launch command found: expected a line that runs a *.py "
                         "training script via torchrun, python, python -m torch.distributed.launch "
                         "or deepspeed", "pass the script that starts training (e.g. pretrain_gpt.py), "
                         "or give the training log or a checkpoint instead")
    best = max(shell.launches, key=lambda c: (_rank(c), -shell.launches.index(c)))
    for other in shell.launches:
        if other is not best:
            shell.note(other.line, f"another launch command ({other.launcher} {other.script}) ignored; "
                                   f"using line {best.line}")
    best.notes = [f"line {line}: {text}" for line, text in sorted(shell.notes)]
    return best


def parse_launch_script(path: Path | str, *, positional: Sequence[str] = (),
                        environ: Mapping[str, str] | None = None, text: str | None = None) -> LaunchCommand:
    """Find the training launch command in a bash script and return its argv with lines.

    ``positional`` gives values for ``$1``, ``$2``...; ``environ`` for variables the script
    reads from its environment. Both default to unknown (tokens marked ``unresolved``).
    ``text``: the script's content when the caller has read it already (else ``path`` is read).
    """
    path = Path(path)
    text = _script_text(path, text)
    shell = _Shell(path, positional, environ)
    shell.run(Lexer(text, path).tokens())
    return _pick(shell)
