"""The fast pieces of reading an msprobe dump held equal to the plain ones: entry names through one loop
(``entry_infos``) against the per-entry ``entry_info`` on fuzzed names; stack.json's comprehension against the
loop it replaced; the side files (construct.json, stack.json) read while the scan runs, with their errors raised
where the plain reader raises them; array columns (nullable ``Int64`` from values and a mask) against
``pd.array`` of the lists; dumps of several ranks and steps."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.dumps import msprobe_scan
from workbench.dumps.formats import load_dump_formats
from workbench.dumps.msprobe_arrays import by_id, counts, distinct, integers
from workbench.dumps.msprobe_side import read_construct, read_stacks
from workbench.dumps.readers_msprobe import entry_info, entry_infos, read_msprobe
from workbench.errors import InputError
from workbench.native import library

TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.5, "Min": -0.5, "Mean": 0.25,
          "Norm": 2.0}
native = pytest.mark.skipif(library("dumpscan") is None,
                            reason="the dumpscan library is not built (python workbench/native/build.py)")


def _fuzzed_names(rng: random.Random, count: int) -> list[str]:
    kinds = ["Module", "Cell", "Functional", "Tensor", "Torch", "Primitive", "Jit", "Mint", "x", ""]
    pieces = ["module", "network", "_backbone", "decoder", "layers", "0", "12", "attn", "Linear", "MatMul",
              "__add__", "forward", "backward", "parameters_grad", "", "a-b", "é", "9x", "Q"]
    names = []
    for _ in range(count):
        parts = [rng.choice(kinds)] + [rng.choice(pieces) for _ in range(rng.randint(0, 7))]
        if rng.random() < 0.6:
            parts += [str(rng.randint(0, 30)), rng.choice(["forward", "backward"])] if rng.random() < 0.5 else \
                [rng.choice(["forward", "backward", "parameters_grad"]), str(rng.randint(0, 30))]
        names.append(".".join(parts))
    return list(dict.fromkeys(names))


def test_entry_infos_equal_per_entry_on_fuzzed_names():
    fmt = load_dump_formats()
    rng = random.Random(11)
    names = _fuzzed_names(rng, 4000)
    owners = ["Module.module.decoder.layers.3.MLP.forward.0", "Cell.network.model.Block.backward.2", "not.a.module",
              None, 7, ["x"], ""]
    parents = {name: rng.choice(owners) for name in names if rng.random() < 0.7}
    ops, modules, passes, grad = entry_infos(names, parents, fmt)
    expected = [entry_info(name, parents, fmt, {}) for name in names]
    assert ops == [e[0] for e in expected]
    assert modules == [e[1] for e in expected]
    assert passes == [e[2] for e in expected]
    assert grad == any(e[3] for e in expected)
    assert grad and any(m == "decoder.layers.3" for m in modules)       # wrappers dropped, gradients seen


def _stacks_by_loop(data: dict) -> dict[str, str]:
    """The loop ``_stacks`` replaced: the first key naming a name wins; another form names its own key."""
    found: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], list):
            for name in value[0]:
                if isinstance(name, str):
                    found.setdefault(name, str(key))
        else:
            found.setdefault(str(key), str(key))
    return found


def test_stacks_equal_the_loop_on_every_form(tmp_path):
    data = {
        "0": [["a", "b"], ["File x, line 1"]],
        "1": [["b", "c", 3, None, ["d"]], []],            # b already named by 0; non-strings skipped
        "a": ["line only"],                               # the older form: {name: [lines]}
        "2": [["a"], ["again"]],
        "3": [["e"], ["x"], ["three members"]],           # not [names, lines]: names its own key
        "4": {"names": ["f"]},
        "5": [None, ["x"]],
        "c": [["g"], []],
        "6": [[], []],
        "7": "text",
    }
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(data))
    assert read_stacks(path) == _stacks_by_loop(data)
    assert read_stacks(path)["b"] == "0" and read_stacks(path)["a"] == "0" and read_stacks(path)["3"] == "3"


def _unit(folder: Path, data: dict, construct: str | bytes | None = None, stack: str | bytes | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "mix", "data": data}))
    for name, text in (("construct.json", construct), ("stack.json", stack)):
        if text is not None:
            (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def _outcome(root: Path, monkeypatch, native_: bool):
    monkeypatch.setenv("WORKBENCH_NATIVE", "1" if native_ else "0")
    try:
        return "table", read_msprobe(root)
    except InputError as error:
        return "error", str(error)


def _both(root: Path, monkeypatch):
    fast, plain = _outcome(root, monkeypatch, True), _outcome(root, monkeypatch, False)
    assert fast[0] == plain[0]
    if fast[0] == "error":
        assert fast[1] == plain[1] and "\n" not in fast[1]
    else:
        pd.testing.assert_frame_equal(fast[1], plain[1], check_exact=True)
    return fast


DATA = {"Functional.linear.0.forward": {"input_args": [TENSOR], "output": [TENSOR]},
        "Module.module.layers.0.Linear.forward.0": {"input_args": [TENSOR], "output": [TENSOR]}}
CONSTRUCT = json.dumps({"Functional.linear.0.forward": "Module.module.layers.0.Linear.forward.0"})
STACK = json.dumps({"0": [["Functional.linear.0.forward"], ["File m.py, line 3"]]})
HOSTILE = {                                           # each class of bad side file, by what it breaks
    "truncated": CONSTRUCT[:-7].encode(),
    "non_utf8": b'{"a": "\xff\xfe"}',
    "wrong_type": b'["Functional.linear.0.forward"]',
    "deep": b"[" * 50_000 + b"]" * 50_000,
}


@pytest.mark.parametrize("which", ["construct.json", "stack.json"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_side_files_give_one_error_on_both_paths(which, kind, tmp_path, monkeypatch):
    side = {"construct": HOSTILE[kind] if which == "construct.json" else CONSTRUCT,
            "stack": HOSTILE[kind] if which == "stack.json" else STACK}
    root = _unit(tmp_path / "step0" / "rank0", DATA, **side)
    outcome, message = _both(root, monkeypatch)
    assert outcome == "error" and which in message


def test_absurd_side_file_size_is_refused_before_reading(tmp_path, monkeypatch):
    from workbench.input_files import TEXT_LIMIT

    root = _unit(tmp_path / "rank0", DATA, construct=CONSTRUCT)
    with open(root / "stack.json", "wb") as handle:            # sparse: nothing written, size claimed
        handle.truncate(TEXT_LIMIT + 1)
    outcome, message = _both(root, monkeypatch)
    assert outcome == "error" and "stack.json" in message and "more than" in message


def test_side_file_errors_come_after_the_dump_json_error(tmp_path, monkeypatch):
    """construct.json is read while the scan runs, but its error is raised only where the plain reader reads
    it: a dump.json that is not UTF-8 is named first; construct.json's error comes before stack.json's."""
    root = _unit(tmp_path / "rank0", DATA, construct=b"{", stack=b"{")
    raw = (root / "dump.json").read_bytes()
    (root / "dump.json").write_bytes(raw.replace(b"linear", b"lin\xffar", 1))
    outcome, message = _both(root, monkeypatch)
    assert outcome == "error" and "dump.json" in message and "UTF-8" in message
    (root / "dump.json").write_bytes(raw)
    outcome, message = _both(root, monkeypatch)
    assert outcome == "error" and "construct.json" in message


def test_several_ranks_and_steps_keep_column_types(tmp_path, monkeypatch):
    big = dict(TENSOR, shape=[2 ** 40, 2 ** 40])                         # numel beyond int64: one-line error
    for step in (0, 1):
        for rank in (0, 1):
            data = dict(DATA, **{f"Tensor.add.{rank}.forward": {"output": [dict(TENSOR, nan_count=rank)]}})
            if step == 1 and rank == 1:
                data["Tensor.mul.0.forward"] = {"output": [dict(TENSOR, shape=None), dict(TENSOR, shape=[])]}
            _unit(tmp_path / f"step{step}" / f"rank{rank}", data, construct=CONSTRUCT, stack=STACK)
    outcome, table = _both(tmp_path, monkeypatch)
    assert outcome == "table" and str(table["nan_count"].dtype) == "Int64" and table["numel"].isna().sum() == 1
    assert table.loc[table["module_path"] == "layers.0", "layer"].eq(0).all()
    _unit(tmp_path / "step1" / "rank1", {"Tensor.mul.0.forward": {"output": [big]}})
    outcome, message = _both(tmp_path, monkeypatch)
    assert outcome == "error" and "rank1" in message and "64-bit" in message and "Tensor.mul.0.forward" in message


def test_array_columns_equal_pandas_of_lists():
    ids = np.array([3, -1, 3, 0, 5, 0, -1], np.int64)
    value = {3: 12, -1: None, 0: 0, 5: 2 ** 62}
    assert integers(ids, value.get).equals(pd.array([value[i] for i in ids.tolist()], dtype="Int64"))
    assert by_id(ids, lambda i: f"s{i}").tolist() == [f"s{i}" for i in ids.tolist()]
    raw = np.array([0, -1, 7, 2 ** 52], np.int64)
    assert counts(raw).equals(pd.array([0, None, 7, 2 ** 52], dtype="Int64"))
    empty = np.zeros(0, np.int64)
    assert len(integers(empty, value.get)) == 0 and len(by_id(empty, str)) == 0 and len(counts(empty)) == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distinct_ids_are_numpys_unique(seed):
    """Distinct ids by hashing: what ``np.unique(ids, return_inverse=True)`` gives (ascending, the flat inverse),
    for few and many distinct ids, negative ones, extremes, a strided column of a scan's rows and none; and the
    values are asked for in ascending order."""
    rng = np.random.default_rng(seed)
    cases = [rng.integers(-1, 4, 5000), rng.integers(-2**63, 2**63 - 1, 5000, dtype=np.int64, endpoint=True),
             rng.integers(0, 300, (4000, 5))[:, 2], np.zeros(0, np.int64), np.full(9, 7, np.int64),
             np.asarray([2**63 - 1, -2**63, 0, -1, 2**63 - 1], np.int64)]
    for ids in cases:
        ascending, inverse = distinct(ids)
        expected, expected_inverse = np.unique(ids, return_inverse=True)
        assert ascending.tolist() == expected.tolist() and inverse.tolist() == expected_inverse.reshape(-1).tolist()
        asked: list[int] = []
        by_id(ids, asked.append)
        assert asked == sorted(set(ids.tolist()))


@native
def test_a_failing_scan_thread_raises_in_the_reader(tmp_path, monkeypatch):
    """An error in the scan's thread (here a MemoryError, which no file can be made to raise on demand: the
    scan is replaced for that reason) reaches the reader, after the side files were read."""
    root = _unit(tmp_path / "rank0", DATA, construct=CONSTRUCT, stack=STACK)

    def scan(*_):
        raise MemoryError("no room")

    monkeypatch.setattr(msprobe_scan, "scan", scan)
    monkeypatch.setenv("WORKBENCH_NATIVE", "1")
    with pytest.raises(MemoryError, match="no room"):
        read_msprobe(root)


def _side_outcome(read, path: Path, monkeypatch, native_: bool):
    monkeypatch.setenv("WORKBENCH_NATIVE", "1" if native_ else "0")
    try:
        return "value", read(path)
    except InputError as error:
        return "error", str(error)


SIDE_TEXTS = {
    read_construct: [
        '{"a": "M.x", "b": null, "c": "M.x"}', '{}', ' { "a" : "p" } \n', '{"a": "p", "a": "q"}',
        '{"a\\u0041": "p"}', '{"a": "p\\n"}', '{"a": 3}', '{"a": ["p"]}', '{"a": "p",}', '{"a": "p"} x',
        '["a"]', '"a"', '{"a": nul}', '{"a": "é"}', b'{"a": "\xff"}', '{"a": "p"', '',
    ],
    read_stacks: [
        STACK, '{"0": [["a", "b"], ["l1", "l\\n2"]], "1": [["b"], []]}', '{"0": [[], []]}', '{}',
        '{"0": [["a"], ["x"]], "0": [["b"], ["y"]]}', '{"0": [["a"], ["x"]], "1": [["a"], ["y"]]}',
        '{"a": ["line only"]}', '{"0": [["a", 3], ["x"]]}', '{"0": [["a"], ["x"], ["z"]]}',
        '{"0": [["a\\u0041"], ["x"]]}', '{"0": [["a"], [["deeper"]]]}', '{"0": [["a"], "x"]}',
        '{"0": [["a"], ["x"]]} ,', '{"0": [["a"] ["x"]]}', b'{"0": [["\xc3\xa9"], ["x"]]}', b'{"0": [["\xc3"], []]}',
    ],
}


@native
@pytest.mark.parametrize("read", [read_construct, read_stacks], ids=["construct", "stack"])
def test_side_files_equal_on_both_paths(read, tmp_path, monkeypatch):
    """Every form, regular or not, gives the same mapping or the same one-line error with and without the
    compiled scanner; random byte mutations of a regular file too."""
    rng = random.Random(5)
    base = (CONSTRUCT if read is read_construct else STACK).encode()
    mutated = []
    for _ in range(300):
        data = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            data[at:at + 1] = bytes([rng.choice(b'{}[]",:\\ anlu0\xff')]) if rng.random() < 0.7 else b""
        mutated.append(bytes(data))
    outcomes = set()
    for index, text in enumerate([*SIDE_TEXTS[read], *mutated]):
        path = tmp_path / f"{index}.json"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        fast, plain = _side_outcome(read, path, monkeypatch, True), _side_outcome(read, path, monkeypatch, False)
        assert fast == plain, text
        assert type(fast[1]) is not dict or all(type(k) is str for k in fast[1])
        outcomes.add(fast[0])
    assert outcomes == {"value", "error"}


@native
def test_regular_stack_json_is_scanned_not_decoded(tmp_path, monkeypatch):
    """The usual stack.json never reaches ``json`` (its decoder is replaced by one that fails, to see which path
    ran), and gives the mapping of the json path: the first id naming a row."""
    from workbench.dumps import msprobe_side

    stack = tmp_path / "stack.json"
    stack.write_text(json.dumps({str(i): [[f"n{i}", f"n{i + 1}"], [f"File \"x\", line {i}\n"]] for i in range(500)}))
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    expected = read_stacks(stack)
    monkeypatch.setenv("WORKBENCH_NATIVE", "1")
    monkeypatch.setattr(msprobe_side, "parse_json", lambda *_, **__: pytest.fail("decoded by json"))
    assert read_stacks(stack) == expected
    assert expected["n1"] == "0" and expected["n500"] == "499" and len(expected) == 501


@native
def test_stack_json_beyond_the_first_capacity(tmp_path, monkeypatch):
    """More ids and names than the scanner's first arrays hold (START): the scan is repeated with larger ones
    and gives json's mapping."""
    count = msprobe_scan.START + 5
    stack = tmp_path / "stack.json"
    stack.write_text("{" + ",".join(f'"{i}":[["n{i}"],[]]' for i in range(count)) + "}")
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")
    expected = read_stacks(stack)
    monkeypatch.setenv("WORKBENCH_NATIVE", "1")
    from workbench.dumps import msprobe_side

    assert msprobe_side._scan(stack.read_bytes()) is not None
    assert read_stacks(stack) == expected and len(expected) == count
