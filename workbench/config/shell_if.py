"""Bash ``if`` statements decided by the script's own constants (nothing is executed).

``DTYPE="fp8"; if [ "$DTYPE" = "fp8" ]; then ARGS+=(--fp8-format hybrid); fi`` is evaluated: the branch
that runs is applied, the others are skipped with a note. A condition that depends on the environment
or on ``$1`` stays undecided: its assignments are not applied, except a variable every branch (with an
``else``) sets to the same value, which is decided either way. Only ``[ ... ]``, ``[[ ... ]]`` and
``test ...`` with string, integer and ``-n``/``-z`` tests are evaluated.
"""
from __future__ import annotations

from dataclasses import dataclass, field

_INT_OPS = {"-eq": lambda a, b: a == b, "-ne": lambda a, b: a != b, "-lt": lambda a, b: a < b,
            "-le": lambda a, b: a <= b, "-gt": lambda a, b: a > b, "-ge": lambda a, b: a >= b}


class IfBlock(str):
    """The stack entry of an ``if``: a str (``"if"``) carrying the state of the branch being read."""

    state: IfState

    def __new__(cls) -> IfBlock:
        block = super().__new__(cls, "if")
        block.state = IfState()
        return block


@dataclass
class IfState:
    decided: bool = True                 # every condition read so far was decided
    taken: bool = False                  # an earlier branch runs
    active: bool | None = None           # the current branch runs (None: undecided)
    branches: list[dict] = field(default_factory=lambda: [{}])  # undecided: per branch, name -> (key, word)
    has_else: bool = False

    def condition(self, result: bool | None) -> None:
        """``if`` / ``elif`` COND."""
        if self.taken:
            self.active = False
        elif result is None or not self.decided:
            self.decided, self.active = False, None
        else:
            self.active, self.taken = result, result

    def next_branch(self) -> None:
        self.taken = self.taken or self.active is True
        self.branches.append({})

    def otherwise(self) -> None:
        """``else``."""
        self.next_branch()
        self.has_else = True
        self.active = False if self.taken else (True if self.decided else None)

    def common_assignments(self) -> list[tuple]:
        """Undecided if/else: the words every branch assigns identically, in first-branch order."""
        if self.decided or not self.has_else:
            return []
        first, others = self.branches[0], self.branches[1:]
        return [word for name, (key, word) in first.items()
                if all(name in other and other[name][0] == key for other in others)]


def evaluate_test(texts: list[str]) -> bool | None:
    """The result of a ``[ ... ]`` / ``[[ ... ]]`` / ``test ...`` command on expanded words, or None."""
    if texts[:1] == ["test"]:
        body = texts[1:]
    elif texts[:1] == ["["] and texts[-1:] == ["]"] or texts[:1] == ["[["] and texts[-1:] == ["]]"]:
        body = texts[1:-1]
    else:
        return None
    negate = body[:1] == ["!"]
    body = body[1:] if negate else body
    result = _test(body, double=texts[0] == "[[")
    return None if result is None else result != negate


def _test(body: list[str], double: bool) -> bool | None:
    if len(body) == 1:
        return body[0] != ""
    if len(body) == 2 and body[0] in ("-n", "-z"):
        return (body[1] != "") == (body[0] == "-n")
    if len(body) != 3:
        return None
    left, op, right = body
    if op in ("=", "==", "!="):
        if double and any(ch in right for ch in "*?["):
            return None                                  # a glob pattern in [[ ]]: not evaluated
        return (left == right) == (op != "!=")
    if op in _INT_OPS:
        try:
            return _INT_OPS[op](int(left), int(right))
        except ValueError:
            return None
    return None
