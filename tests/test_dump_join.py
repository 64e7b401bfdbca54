"""construct.json and stack.json joined to dump.json's entry names by their bytes (``workbench/dumps/msprobe_join.py``,
``dumpconstruct`` and ``dumpscan_join`` in the dumpscan library): the join equal to a dict's lookups (a key's last
or first row, names with no key, UTF-8), hostile rows refused, the usual construct.json scanned and never decoded
by ``json``, the entries' parents and ops through the join equal to those through the dict, and whole reads with
repeated, null, escaped and missing parents and stack names equal on the compiled and the plain path."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from test_dump_read_fast import TENSOR, _both, _unit
from test_dump_stem_codes import _encoded, _formats, _many_names
from workbench.dumps import msprobe_join, msprobe_side
from workbench.dumps.api_stems import stem_codes
from workbench.dumps.msprobe_entries import entry_infos
from workbench.dumps.msprobe_join import Construct, entry_parents, join, number, scan_construct
from workbench.dumps.msprobe_lines import packed
from workbench.dumps.msprobe_side import _texts, load_construct, read_construct
from workbench.native import library

pytestmark = pytest.mark.skipif(library("dumpscan") is None,
                                reason="the dumpscan library is not built (python workbench/native/build.py)")


def _rows_of(text: str) -> tuple[bytes, np.ndarray]:
    return _encoded(text.split("|"))


@pytest.mark.parametrize("seed", [1, 2])
def test_join_equals_dict_lookups(seed):
    rng = random.Random(seed)
    pool = ["a", "b", "é", "a.1.forward", "", "ab", "ba", "x" * 40, "\u4e2d"]
    keys = [rng.choice(pool) + rng.choice(["", "1", "2"]) for _ in range(300)]
    names = [rng.choice(pool) + rng.choice(["", "1", "3"]) for _ in range(500)]
    key_text, key_rows = _encoded(keys)
    name_text, name_rows = _encoded(names)
    last = {key: row for row, key in enumerate(keys)}
    first = {key: row for row, key in reversed(list(enumerate(keys)))}
    assert join(name_text, name_rows, key_text, key_rows, last=True).tolist() == [last.get(n, -1) for n in names]
    assert join(name_text, name_rows, key_text, key_rows, last=False).tolist() == [first.get(n, -1) for n in names]
    assert join(name_text, name_rows[:0], key_text, key_rows, last=True).tolist() == []
    assert join(name_text, name_rows, key_text, key_rows[:0], last=True).tolist() == [-1] * len(names)


@pytest.mark.parametrize("seed", [3, 4])
def test_join_of_distinct_names_reads_the_keys_in_their_order(seed, monkeypatch):
    """Distinct names: their table, the keys read once (``dumpscan_join_names``), a key's last or first row as the
    dict gives it; a repeated name is answered by ``dumpscan_join`` instead."""
    rng = random.Random(seed)
    pool = ["a", "b", "é", "a.1.forward", "", "ab", "ba", "x" * 40, "\u4e2d"]
    keys = [rng.choice(pool) + rng.choice(["", "1", "2"]) for _ in range(300)]
    names = list(dict.fromkeys(rng.choice(pool) + str(rng.randint(0, 4)) for _ in range(80)))
    key_text, key_rows = _encoded(keys)
    name_text, name_rows = _encoded(names)
    last = {key: row for row, key in enumerate(keys)}
    first = {key: row for row, key in reversed(list(enumerate(keys)))}
    called = []
    scanner = library("dumpscan")

    class Counting:
        def __getattr__(self, name):
            called.append(name)
            return getattr(scanner, name)

    monkeypatch.setattr(msprobe_join, "library", lambda name: Counting())
    assert join(name_text, name_rows, key_text, key_rows, last=True).tolist() == [last.get(n, -1) for n in names]
    assert join(name_text, name_rows, key_text, key_rows, last=False).tolist() == [first.get(n, -1) for n in names]
    assert called == ["dumpscan_join_names"] * 2
    twice_text, twice = _encoded([*names, names[0]])
    assert join(twice_text, twice, key_text, key_rows, last=True).tolist() == [last.get(n, -1) for n in [*names, names[0]]]
    assert called[2:] == ["dumpscan_join_names", "dumpscan_join"]


def test_distinct_strings_numbered_in_order_of_first_appearance():
    rng = random.Random(4)
    strings = [rng.choice(["a", "b", "é", "", "ab", "a" * 30, "ba"]) for _ in range(400)]
    strings += strings[-3:] * 3                                   # runs of one string: the shortcut
    text, rows = _encoded(strings)
    code, first = number(text, rows)
    order = list(dict.fromkeys(strings))
    assert code.tolist() == [order.index(s) for s in strings]
    assert first.tolist() == [strings.index(s) for s in order]
    assert number(text, rows[:0])[0].size == 0
    assert number(text, np.array([[len(text), 1]], dtype=np.int64)) is None


def test_join_refuses_rows_outside_their_text():
    text, rows = _encoded(["a", "b"])
    for bad in ([[-1, 1]], [[0, len(text) + 1]], [[len(text), 1]], [[1, -1]]):
        bad = np.array(bad, dtype=np.int64)
        assert join(text, bad, text, rows, last=True) is None
        assert join(text, rows, text, bad, last=False) is None


@pytest.mark.parametrize("text, pairs", [
    ('{"a": "M.x", "b": null, "a": "M.y"}', [("a", "M.x"), ("b", None), ("a", "M.y")]),
    (' \n{ }\t', []), ('{"é": ""}', [("é", "")]),
])
def test_construct_scan_gives_every_member(text, pairs):
    raw = text.encode()
    found = scan_construct(raw)
    assert [(raw[a:a + b].decode(), None if d < 0 else raw[c:c + d].decode()) for a, b, c, d in found.tolist()] == pairs


@pytest.mark.parametrize("text", ['{"a\\u0041": "p"}', '{"a": "p\\n"}', '{"a": 3}', '{"a": ["p"]}', '{"a": {}}',
                                  '{"a": "p",}', '{"a": "p"} x', '["a"]', '{"a": nul}', '{"a": "p"', '', '\ufeff{}',
                                  '{"a": "p" "b": "q"}', '{"a" "p"}', '{"a": "\x01"}', '{"a": null, }'])
def test_construct_scan_leaves_anything_else_to_json(text):
    assert scan_construct(text.encode()) is None


def test_usual_construct_json_is_scanned_not_decoded(tmp_path, monkeypatch):
    path = tmp_path / "construct.json"
    data = {f"Tensor.add.{i}.forward": f"Module.layers.{i % 7}.L.forward.0" if i % 5 else None for i in range(3000)}
    path.write_text(json.dumps(data))
    assert isinstance(load_construct(path), Construct)
    monkeypatch.setattr(msprobe_side, "parse_json", lambda *_, **__: pytest.fail("decoded by json"))
    assert isinstance(load_construct(path), Construct)
    monkeypatch.undo()
    assert read_construct(path) == data


def test_construct_beyond_the_first_capacity(monkeypatch):
    from workbench.dumps import msprobe_join

    monkeypatch.setattr(msprobe_join, "START", 4)
    raw = json.dumps({f"n{i}": f"p{i % 3}" for i in range(100)}).encode()
    assert len(scan_construct(raw)) == 100


@pytest.mark.parametrize("api", [None, r"^(?P<kind>\w+)\.(?P<api>.+?)(?P<prim>)\.(?P<index>\d)\.(?P<pass>forward|backward)$"])
def test_entry_infos_through_the_join_equal_through_the_dict(api):
    rng = random.Random(3)
    names = [n for n in dict.fromkeys(_many_names(11)) if json.dumps(n, ensure_ascii=False) == f'"{n}"']  # no escape
    owners = ["Module.module.decoder.layers.3.MLP.forward.0", "Cell.network.model.Block.backward.2", "not.a.module",
              None, ""]
    members = [(name, rng.choice(owners)) for name in names if rng.random() < 0.8]
    members += [(name, rng.choice(owners)) for name, _ in rng.sample(members, 200)]      # repeated: the last wins
    construct_text = "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}"
                                     for k, v in members) + "}"
    raw = construct_text.encode()
    construct = Construct(raw, scan_construct(raw))
    parents = json.loads(construct_text)
    text, rows = packed(names, [len(n.encode()) for n in names])
    joined = entry_parents(text, rows, construct, _texts)
    fmt = _formats(api)
    stems = stem_codes(text, rows)
    through_join = entry_infos(names, None, fmt, stems, joined)
    through_dict = entry_infos(names, parents, fmt, stems)
    one_by_one = entry_infos(names, parents, fmt)
    for found in (through_join, through_dict):
        assert [list(c) for c in found[:3]] == [list(c) for c in one_by_one[:3]] and found[3] == one_by_one[3]


STACK = {"0": [["Functional.linear.0.forward", "Module.module.layers.0.Linear.forward.0"], ["File m.py, line 3"]],
         "1": [["Functional.linear.0.forward", "x"], []], "2": [[], ["y"]]}
DATA = {"Functional.linear.0.forward": {"input_args": [TENSOR], "output": [TENSOR]},
        "Tensor.add.0.forward": {"input_args": [TENSOR, TENSOR], "output": [TENSOR]},
        "Tensor.add.1.forward": {"input_args": [TENSOR], "output": [TENSOR]},
        "Module.module.layers.0.Linear.forward.0": {"input_args": [TENSOR], "output": [TENSOR]}}
CONSTRUCTS = [
    {"Functional.linear.0.forward": "Module.module.layers.0.Linear.forward.0", "Tensor.add.0.forward": None},
    '{"Tensor.add.0.forward": "Module.module.layers.0.Linear.forward.0", "Tensor.add.0.forward": "M.a.B.forward.0"}',
    '{"Tensor.add.1.forward": "Module.module.layers.\\u0030.Linear.forward.0"}',           # escaped: through json
    {"Tensor.add.1.forward": "Module.module.layers.0.Linear.forward.0", "other": "Module.x.Y.forward.0"},
    {"Tensor.add.1.forward": "Tensor.add.0.forward", "Functional.linear.0.forward": ""},
    {},
]


@pytest.mark.parametrize("construct", range(len(CONSTRUCTS)))
@pytest.mark.parametrize("stack", [STACK, {"0": [["Tensor.add.0.forward"], []], "0\\n": [["x"], []]}, None])
def test_reads_equal_on_both_paths(construct, stack, tmp_path, monkeypatch):
    text = CONSTRUCTS[construct]
    root = _unit(tmp_path / "rank0", DATA, construct=text if isinstance(text, str) else json.dumps(text),
                 stack=None if stack is None else json.dumps(stack))
    outcome, table = _both(root, monkeypatch)
    assert outcome == "table" and len(table) == 9
    if stack is STACK:
        assert table.set_index("name")["stack_id"].to_dict()["Functional.linear.0.forward.input.0"] == "0"


@pytest.mark.parametrize("units", [[(0, 0)], [(0, 0), (1, 0), (0, 0), (1, 2)], []])
def test_table_from_columns_equals_finish_of_row_dicts(units):
    """The order (a unit's position: the row's index when the table holds one (rank, step)) and the layers (once
    per distinct path, from the factorized codes) as ``finish`` makes them from one dict per row."""
    import pandas as pd

    from workbench.dumps.formats import load_dump_formats
    from workbench.dumps.rows import finish, table_from_columns

    fmt = load_dump_formats()
    rng = random.Random(len(units))
    paths = ["", "decoder.layers.3.mlp", "model.layers.12", "embedding", "decoder.layers.3.mlp", "layers.x"]
    rows = [{"name": f"n{i}", "rank": rank, "step": step, "module_path": rng.choice(paths), "slot": i % 3}
            for i, (rank, step) in enumerate(rng.choice(units) for _ in range(60 if units else 0))]
    columns = {key: [row[key] for row in rows] for key in ("name", "rank", "step", "module_path", "slot")}
    fast, plain = table_from_columns(columns, "A", fmt), finish([dict(r) for r in rows], "A", fmt)
    pd.testing.assert_frame_equal(fast, plain, check_exact=True)
    if len(units) == 1:
        assert fast["order"].tolist() == list(range(60))
