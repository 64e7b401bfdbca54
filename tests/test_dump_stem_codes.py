"""Entry names numbered by their API stem in one compiled pass (``api_stems.stem_codes``, ``dumpstems.h``) and
read once per stem and per parent (``msprobe_entries._by_stems``): the numbering equal to ``stem`` name by name
(UTF-8 heads, non-ASCII digits, other forms), hostile spans refused, which module patterns cannot match a name of
the stem form (``ends_in_digits``), and the ops, module paths and passes equal to the one-by-one loop under the
shipped patterns, other API patterns, module patterns that must be tried on every name, and construct.json parents
of every type (unhashable ones included)."""
from __future__ import annotations

import ctypes
import dataclasses
import random
import re

import numpy as np
import pytest

from test_dump_api_stems import PER_NAME, STEMMED, _names
from test_dump_read_fast import _fuzzed_names
from workbench.dumps.api_stems import ends_in_digits, stem, stem_codes
from workbench.dumps.formats import load_dump_formats
from workbench.dumps.msprobe_entries import entry_info, entry_infos
from workbench.native import library

native = pytest.mark.skipif(library("dumpscan") is None,
                            reason="the dumpscan library is not built (python workbench/native/build.py)")
MODULE = load_dump_formats().msprobe["module_pattern"].pattern
OWNERS = ["Module.module.decoder.layers.3.MLP.forward.0", "Cell.network.model.Block.backward.2", "not.a.module",
          None, 7, 7.0, True, float("nan"), ""]


def _encoded(names: list[str]) -> tuple[bytes, np.ndarray]:
    """The names as one byte string with a filler between them, and their (offset, length) rows."""
    pieces, spans, at = [], [], 0
    for name in names:
        data = name.encode("utf-8")
        spans.append((at + 2, len(data)))
        pieces.append(b'.,' + data)
        at += 2 + len(data)
    return b"".join(pieces), np.array(spans, dtype=np.int64).reshape(-1, 2)


def _numbered(names: list[str]) -> tuple[list[int], list[int]]:
    """What stem_codes gives, in Python: each name's stem numbered in order of first appearance, or -1."""
    number: dict = {}
    first, code = [], []
    for row, name in enumerate(names):
        key = stem(name)
        if key is not None and key not in number:
            number[key] = len(first)
            first.append(row)
        code.append(-1 if key is None else number[key])
    return code, first


def _many_names(seed: int) -> list[str]:
    rng = random.Random(seed)
    extra = ["a.1.forward", "a.01.forward", ".0.backward", "é.٣.forward", "é.3.forward", "x.1a.forward", "1.forward",
             "a..forward", "a.1.forward.", "a.1.forwardd", "a.1.Backward", "Tensor.pow.7.backward", ""]
    return [*_names(rng, 2000), *_fuzzed_names(rng, 2000), *extra, *extra]


@native
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stem_codes_equal_stem_name_by_name(seed):
    names = _many_names(seed)
    raw, spans = _encoded(names)
    code, first = stem_codes(raw, spans)
    expected = _numbered(names)
    assert (code.tolist(), first.tolist()) == expected
    assert len(first) > 20 and (code < 0).sum() > 100


@native
def test_stem_codes_refuse_hostile_spans():
    raw, spans = _encoded(["a.1.forward", "b.2.backward"])
    for bad in ([[-1, 3]], [[0, len(raw) + 1]], [[len(raw), 1]], [[2, -4]]):
        assert stem_codes(raw, np.array(bad, dtype=np.int64)) is None
    code, first = stem_codes(raw, spans[:0])
    assert code.size == 0 and first.size == 0
    call = library("dumpscan").dumpscan_stems
    call.restype = ctypes.c_int64
    out = np.zeros(8, np.int64)
    pointer = out.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
    for slots in (3, 2):                     # not a power of two; fewer than twice the names
        assert call(raw, ctypes.c_int64(len(raw)), spans.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                    ctypes.c_int64(2), pointer, pointer, pointer, ctypes.c_int64(slots)) == -1


def test_which_module_patterns_cannot_match_a_stem_name():
    assert ends_in_digits(re.compile(MODULE))
    assert ends_in_digits(re.compile(r"^(?:Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<pass>\w+)\.(?P<index>\d+)$"))
    for pattern in (MODULE.replace("(?P<index>", "(?P<i>"), "(?i)" + MODULE, MODULE[:-1] + r"(?:\.forward)?$",
                    r"^(?P<path>x)|(?P<cls>.+)\.(?P<pass>y)\.(?P<index>\d+)$", MODULE[:-1] + r"\Z",
                    r"^(?P<path>.+)\\.(?P<index>\d+)$", r"^(?P<path>.+)(?P<index>\d+)$", r"^(?P<path>.+)\.(?P<index>\d+)"):
        assert not ends_in_digits(re.compile(pattern)), pattern
    stem_form = [name for name in _many_names(4) if stem(name) is not None] + ["Module.a.B.forward.1.forward"]
    assert not any(re.compile(MODULE).match(name) for name in stem_form)


def _formats(api: str | None = None, module: str | None = None):
    base = load_dump_formats()
    m = dict(base.msprobe)
    if api is not None:
        m["api_pattern"] = re.compile(api)
    if module is not None:
        m["module_pattern"] = re.compile(module)
    return dataclasses.replace(base, msprobe=m)


def _check_equal(names: list[str], parents: dict, fmt) -> None:
    raw, spans = _encoded(names)
    stems = stem_codes(raw, spans) if library("dumpscan") is not None else _as_arrays(*_numbered(names))
    ops, modules, passes, grad = entry_infos(names, parents, fmt, stems)
    expected = [entry_info(name, parents, fmt, {}) for name in names]
    assert list(ops) == [e[0] for e in expected]
    assert list(modules) == [e[1] for e in expected]
    assert list(passes) == [e[2] for e in expected]
    assert grad == any(e[3] for e in expected)


def _as_arrays(code: list[int], first: list[int]):
    return np.array(code, dtype=np.int64), np.array(first, dtype=np.int64)


@pytest.mark.parametrize("api", [None, *STEMMED, *PER_NAME])
def test_entry_infos_by_stems_equal_one_by_one(api):
    rng = random.Random(7)
    names = list(dict.fromkeys(_many_names(5)))
    parents = {name: rng.choice(OWNERS) for name in names if rng.random() < 0.7}
    _check_equal(names, parents, _formats(api))


@pytest.mark.parametrize("module", [MODULE, r"^(?:Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<pass>forward|backward|parameters_grad)(?:\.(?P<index>\d+))?$",
                                    r"^(?P<path>.+?)\.(?P<cls>[a-z]+)\.(?P<pass>forward|backward)$"])
def test_entry_infos_by_stems_with_other_module_patterns(module):
    rng = random.Random(8)
    names = list(dict.fromkeys(_many_names(6)))
    parents = {name: rng.choice(OWNERS[:3]) for name in names if rng.random() < 0.7}
    _check_equal(names, parents, _formats(module=module))


def test_entry_infos_with_unhashable_parents_and_no_names():
    rng = random.Random(9)
    names = list(dict.fromkeys(_many_names(7)))
    parents = {name: rng.choice([*OWNERS, ["x"], {"a": 1}]) for name in names}
    _check_equal(names, parents, _formats())
    _check_equal([], {}, _formats())
