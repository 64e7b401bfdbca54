"""API entry names read once per stem (``workbench/dumps/api_stems.py``): which ``api_pattern`` spellings allow it,
and the entry names' ops and passes through the stems equal to those of the per-entry reader
(``entry_info``, one match per name) on fuzzed names with many indices per stem, under the shipped pattern, other
patterns that allow stems, and patterns that must be matched name by name (look-aheads that read the index, an
alternation, flags)."""
from __future__ import annotations

import dataclasses
import random
import re

import pytest

from workbench.dumps.api_stems import TAIL, by_stem, stem
from workbench.dumps.formats import load_dump_formats
from workbench.dumps.readers_msprobe import entry_info, entry_infos

SHIPPED = load_dump_formats().msprobe["api_pattern"].pattern
PRIM = r"(?:\.(?P<prim>[A-Z][A-Za-z0-9]*))?"
STEMMED = [SHIPPED, r"^(?P<kind>[A-Za-z]+)\.(?P<api>.+?)(?P<prim>)" + TAIL,
           r"^(?P<kind>x|[a-z]+)\.(?P<api>[^(?=]+?)" + PRIM + TAIL,
           r"^(?P<kind>\w+)\.(?P<api>(?:\d+\.)*\w*)\b" + PRIM + TAIL]
PER_NAME = [r"^(?P<kind>[A-Za-z]+)\.(?P<api>.+?)" + PRIM + r"(?=.*\.1[0-9]\.)" + TAIL,   # reads the index: 10-19
            r"^(?P<kind>[A-Za-z]+)\.(?P<api>.+?)" + PRIM + r"(?!.*\.2\.)" + TAIL,
            r"(?i)^(?P<kind>[A-Za-z]+)\.(?P<api>.+?)" + PRIM + TAIL,
            r"^(?P<kind>[A-Za-z]+)\.(?P<api>.+?)" + PRIM + r"\.(?P<index>\d)\.(?P<pass>forward|backward)$",  # one digit
            r"^(?P<kind>[A-Za-z]+)(\.)?(?P<api>.+?)" + PRIM + r"(?(2)|z)" + TAIL]
ALTERNATION = r"^(?P<kind>Q)(?P<api>)(?P<prim>)|(?P<x>[A-Za-z]+)\.(?P<y>.+?)" + TAIL   # one side has no tail


def test_which_patterns_allow_stems():
    assert by_stem(re.compile(SHIPPED))
    assert all(by_stem(re.compile(p)) for p in STEMMED)
    assert not any(by_stem(re.compile(p)) for p in [*PER_NAME, ALTERNATION])


def test_stem_of_a_name():
    assert stem("Tensor.pow.12.forward") == ("Tensor.pow", "forward")
    assert stem(".3.backward") == ("", "backward")
    for name in ("pow.forward", "a.b.forward", "a..forward", "a.1.forward\n", "a.1.Forward", "a.\u0661.forward",
                 "a.1.forwardx", "forward", ""):
        assert stem(name) is None, name


def _names(rng: random.Random, count: int) -> list[str]:
    """Few stems with many indices each (so the stems are reused), and names of other forms."""
    heads = ["Tensor.pow", "Torch.matmul", "Primitive.matmul.MatMul", "Functional.linear", "Mint.a.B2", "x.1.2",
             "Q", "Tensor.__add__", "Jit.é.Z", "a-b.c", "Functional.1", "Tensor", "Primitive.x.Y.1"]
    names = []
    for _ in range(count):
        head = rng.choice(heads)
        tail = rng.choice(["forward", "backward", "parameters_grad", "Forward", "forward\n"])
        index = rng.choice([str(rng.randint(0, 30)), "0" * rng.randint(1, 3), "\u0661", "", "1a"])
        names.append(f"{head}.{index}.{tail}" if rng.random() < 0.9 else f"Module.m.{head}.L.{tail}.{index}")
    return list(dict.fromkeys(names))


@pytest.mark.parametrize("pattern", [*STEMMED, *PER_NAME])
def test_entry_infos_through_stems_equal_per_entry(pattern):
    base = load_dump_formats()
    fmt = dataclasses.replace(base, msprobe={**base.msprobe, "api_pattern": re.compile(pattern)})
    rng = random.Random(hash(pattern) & 0xFFFF)
    names = _names(rng, 3000)
    parents = {name: "Module.module.decoder.layers.3.MLP.forward.0" for name in names if rng.random() < 0.5}
    ops, modules, passes, _ = entry_infos(names, parents, fmt)
    expected = [entry_info(name, parents, fmt, {}) for name in names]
    assert (ops, modules, passes) == ([e[0] for e in expected], [e[1] for e in expected], [e[2] for e in expected])
