"""Module entry names split by str methods (``workbench/dumps/module_names.py``) held to ``re`` on the YAML's usual
``module_pattern``: fuzzed names of dots, digits (Unicode ones too), passes, kinds and newlines; another pattern
goes to ``re``."""
from __future__ import annotations

import random
import re

from workbench.dumps.formats import load_dump_formats
from workbench.dumps.module_names import USUAL, module_groups, split_usual

PIECES = ["Module", "Cell", "module", "Modules", "", "decoder", "layers", "0", "12", "٣", "²", "Linear", "forward",
          "backward", "parameters_grad", "x\n", "\n", "é", " ", "a-b", "7\n"]


def _names(rng: random.Random, count: int) -> list[str]:
    names = ["Module.a.B.forward.0", "Cell.a.B.backward.12", "Module..B.forward.0", "Module...B.forward.0",
             "Module.a..forward.0", "Module.a.B.forward.", "Module.a.B.forward.0\n", "Module.a\n.B.forward.0",
             "Module.a.B\n.forward.0", "Module.a.B.forward.٣", "Module.a.B.forward.²", "Module", "Module.",
             "Cell.a.B.parameters_grad.3", "Module.a.B.forwards.0", "xModule.a.B.forward.0", "Module.a.B.C.forward.0"]
    for _ in range(count):
        if rng.random() < 0.5:                          # dots and pieces anywhere
            names.append(".".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8))))
            continue
        path = ".".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))    # near the usual form
        kind, cls = rng.choice(["Module", "Cell", "Cell", "Module", "Mod"]), rng.choice(["Linear", "B", "", "é", "x\n"])
        pass_ = rng.choice(["forward", "backward", "parameters_grad", "forward\n", "Forward"])
        index = rng.choice(["0", "17", "", "٣", "²", "3\n", "1a"])
        names.append(f"{kind}.{path}.{cls}.{pass_}.{index}")
    return names


def test_the_yaml_pattern_is_the_usual_one():
    pattern = load_dump_formats().msprobe["module_pattern"]
    assert pattern.pattern == USUAL and module_groups(pattern) is split_usual


def test_split_equals_re_on_fuzzed_names():
    pattern = re.compile(USUAL)
    for name in _names(random.Random(4), 20000):
        found = pattern.match(name)
        assert split_usual(name) == (found.group("cls", "path", "pass") if found else None), repr(name)


def test_another_pattern_is_matched_by_re():
    pattern = re.compile(r"^Module\.(?P<path>.+?)\.(?P<cls>[^.]+)\.(?P<pass>forward)\.(?P<index>\d+)$")
    groups = module_groups(pattern)
    assert groups is not split_usual
    assert groups("Module.a.b.C.forward.1") == ("C", "a.b", "forward") and groups("Cell.a.C.forward.1") is None
