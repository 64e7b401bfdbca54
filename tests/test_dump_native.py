"""The compiled dump.json scanner (workbench/native/dumpscan.c) against the pure-Python reader: on every dump
both give the same table, or the same one-line error (``WORKBENCH_NATIVE=0`` selects the Python path).

Real dumps: the msprobe dumps of the reference models (tests/dump_pairs.py, generated once per session) and
the fixtures under ../shared/fixtures/dumps; generated ones in the benchmark's shape; hostile ones built
here (truncated at every 97th byte, deep nesting, extreme numbers, escapes, non-UTF-8, repeated keys,
wrong types) and a random fuzz of byte mutations."""
from __future__ import annotations

import json
import random
from pathlib import Path

import dump_pairs
from dump_tables import benchmark_module
import numpy as np
import pandas as pd
import pytest
from workbench_testing import fixtures_dir

from workbench.dumps import msprobe_native, msprobe_scan
from workbench.dumps.formats import load_dump_formats
from workbench.dumps.readers_msprobe import read_dump_json, read_msprobe
from workbench.dumps.rows import table_from_columns
from workbench.errors import InputError
from workbench.native import library

pytestmark = pytest.mark.skipif(library("dumpscan") is None,
                                reason="the dumpscan library is not built (python workbench/native/build.py)")
_COLUMNS = msprobe_native._columns
TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.5, "Min": -0.5, "Mean": 0.25,
          "Norm": 2.0, "requires_grad": False}


def _outcome(read, monkeypatch, native: bool):
    """("table", DataFrame) or ("error", the one-line message) of ``read()`` on one path."""
    monkeypatch.setenv("WORKBENCH_NATIVE", "1" if native else "0")
    try:
        return "table", read()
    except InputError as error:
        return "error", str(error)


def _same(read, monkeypatch, *, expect_native: bool | None = None):
    """Both paths agree; returns the outcome. ``expect_native``: whether the scanner must have handled it."""
    seen = []
    monkeypatch.setattr(msprobe_native, "_columns", lambda *a: seen.append(1) or _COLUMNS(*a))
    fast = _outcome(read, monkeypatch, True)
    used = bool(seen)
    exact = _outcome(read, monkeypatch, False)
    assert fast[0] == exact[0], (fast, exact)
    if fast[0] == "error":
        assert fast[1] == exact[1]
    else:
        _equal_tables(fast[1], exact[1])
    if expect_native is not None:
        assert used == expect_native
    return fast


def _equal_tables(a, b) -> None:
    if isinstance(a, dict):
        fmt = load_dump_formats()
        a, b = table_from_columns(a, "A", fmt), table_from_columns(b, "A", fmt)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    for column in ("max", "min", "mean", "l2norm"):               # -0.0 and 0.0 compare equal: signs too
        assert np.array_equal(np.signbit(a[column].to_numpy()), np.signbit(b[column].to_numpy()))


def _dump(folder: Path, data, text: str | bytes | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dump.json"
    body = text if text is not None else json.dumps({"task": "statistics", "level": "mix", "data": data}, indent=1)
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    return path


def _read(path: Path):
    return lambda: read_dump_json(path)


# --- real and generated dumps -------------------------------------------------------------------------------

@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_real_fixture_dumps_read_natively_and_identically(framework, monkeypatch):
    for path in sorted(fixtures_dir("dumps", f"msprobe_{framework}").rglob("dump.full.json")):
        assert _same(_read(path), monkeypatch, expect_native=True)[0] == "table"


@pytest.mark.parametrize("task,level,backward", [("statistics", "mix", False), ("statistics", "mix", True),
                                                  ("statistics", "L0", False), ("tensor", "L1", False)])
def test_reference_model_dumps_identical(task, level, backward, tmp_path_factory, monkeypatch):
    pairs = dump_pairs.msprobe_pairs(dump_pairs.session_folder(tmp_path_factory), task=task, level=level,
                                     backward=backward, faults=())
    pair = pairs["clean"]
    for root in (pair.torch, pair.mindspore):
        kind, table = _same(lambda root=root: read_msprobe(root), monkeypatch)
        assert kind == "table" and len(table) > 0


@pytest.mark.parametrize("framework", ["pytorch", "mindspore"])
def test_benchmark_dumps_identical(framework, tmp_path, monkeypatch):
    folder = tmp_path / "step0" / "rank0"
    benchmark_module().write_dump(folder, framework, 3000, 7)
    kind, table = _same(lambda: read_msprobe(tmp_path), monkeypatch, expect_native=True)
    assert len(table) >= 3000 and table["stack_id"].ne("").all() and table["module_path"].ne("").any()


def test_every_member_shape_identical(tmp_path, monkeypatch):
    """Lists with nulls and nested lists, keyword and parameter mappings, backward entries, scalars, md5 and
    tensor-task fields, members in an order other than forward_keys'."""
    scalar = {"type": "int", "value": 3}
    md5 = dict(TENSOR, md5="0a1b2c3d", data_name="x.pt")
    data = {
        "Functional.linear.0.forward": {"output": [TENSOR], "input_kwargs": {"bias": TENSOR, "dim": scalar},
                                        "input_args": [TENSOR, None, [TENSOR, scalar, None], scalar]},
        "Module.layers.0.Linear.forward.0": {"input_args": [md5], "parameters": {"weight": TENSOR, "bias": None}},
        "Functional.linear.0.backward": {"input": [TENSOR], "output": [None, TENSOR], "input_args": [TENSOR]},
        "Tensor.add.1.forward": {"input_args": None, "output": [dict(TENSOR, dtype="Float16", shape=[])]},
        "Distributed.all_reduce.0.forward": {},
    }
    kind, table = _same(_read(_dump(tmp_path, data)), monkeypatch, expect_native=True)
    assert "Functional.linear.0.forward.input.2.0" in set(table["name"])
    assert "Functional.linear.0.forward.input.bias" in set(table["name"])


# --- hostile dumps: both paths give the same table or the same one-line error ---------------------------------

def test_truncated_at_every_97th_byte(tmp_path, monkeypatch):
    source = sorted(fixtures_dir("dumps", "msprobe_pytorch").rglob("dump.full.json"))[0].read_bytes()
    for cut in range(0, len(source), 97):
        path = _dump(tmp_path / str(cut), None, source[:cut])
        kind, message = _same(_read(path), monkeypatch, expect_native=False)
        assert kind == "error" and str(path) in message and "\n" not in message


def test_deep_nesting(tmp_path, monkeypatch):
    deep = '{"data": {"Tensor.add.0.forward": {"output": [' + "[" * 100_000 + "]" * 100_000 + "]}}}"
    kind, message = _same(_read(_dump(tmp_path / "a", None, deep)), monkeypatch, expect_native=False)
    assert kind == "error" and "nests" in message
    skipped = '{"extra": ' + "[" * 100_000 + "]" * 100_000 + ', "data": {}}'      # deep outside data
    assert _same(_read(_dump(tmp_path / "b", None, skipped)), monkeypatch)[0] == "error"


@pytest.mark.parametrize("value", ["1e999", "-1e999", "-0", "-0.0", "0.0", "1e-400", "4.9e-324", "2.2250738585072011e-308",
                                   "NaN", "Infinity", "-Infinity", "123456789012345678", "1234567890123456789012",
                                   "0.1000000000000000055511151231257827", "9007199254740993", "true", "false",
                                   "null", '"nan"', '"1.5"', "[1]", "{}"])
def test_extreme_numbers(value, tmp_path, monkeypatch):
    text = json.dumps({"data": {"Tensor.add.0.forward": {"output": [dict(TENSOR, Max=0.0, nan_count=1)]}}})
    text = text.replace('"Max": 0.0', f'"Max": {value}')
    _same(_read(_dump(tmp_path, None, text)), monkeypatch)


def test_numbers_bit_equal_to_json(tmp_path, monkeypatch):
    rng = random.Random(5)
    spellings = [repr(rng.uniform(-1e6, 1e6)) for _ in range(300)] + [f"{rng.random():.25e}" for _ in range(300)]
    spellings += [f"{rng.randint(-10**17, 10**17)}" for _ in range(100)] + [f"{rng.random()}E{rng.randint(-300, 300)}"
                                                                            for _ in range(300)]
    records = ", ".join('{"type": "torch.Tensor", "dtype": "float32", "shape": [1], "Max": %s}' % s for s in spellings)
    path = _dump(tmp_path, None, '{"data": {"Tensor.add.0.forward": {"output": [%s]}}}' % records)
    kind, table = _same(_read(path), monkeypatch, expect_native=True)
    expected = np.array([float(json.loads(s)) for s in spellings])
    assert np.array_equal(np.asarray(table["max"], dtype=np.float64).view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize("text", [
    '{"data": {"Tensor.\\u0061dd.0.forward": {"output": [RECORD]}}}',                  # escape in a name
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "torch.float\\u00332", '
    '"shape": [1]}]}}}',                                                                  # escape in a dtype
    '{"data": {"Tensor.add.0.forward": {"out\\u0070ut": [RECORD]}}}',                    # escape in a member
    '{"d\\u0061ta": {"Tensor.add.0.forward": {"output": [RECORD]}}}',                    # escape in "data"
    '{"data": {"Tensor.add.0.forward": {"output": [RECORD]}, "Tensor.add.0.forward": {"output": []}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [RECORD], "output": [RECORD, RECORD]}}}',
    '{"data": {"Tensor.add.0.forward": {"input_kwargs": {"x": RECORD, "x": null}}}}',
    '{"data": {}, "data": {"Tensor.add.0.forward": {"output": [RECORD]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "type": "int", "dtype": "x"}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "float32", "Max": 1, "Max": 2}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": 5}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "float32", "shape": "x"}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "float32", "shape": [-1]}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "float32", "shape": [1.0]}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "float32", "Max": "abc"}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "float32", "nan_count": -1}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "float32", "nan_count": 2.0}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "float32", "md5": 12}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": "torch.Tensor", "shape": [1]}]}}}',     # no dtype
    '{"data": {"Tensor.add.0.forward": {"output": [{"type": null}]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [{"dtype": "float32"}]}}}',                    # no type
    '{"data": {"Tensor.add.0.forward": {"output": [3]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": RECORD}}}',
    '{"data": {"Tensor.add.0.forward": [RECORD]}}',
    '{"data": []}', '{"data": {}}', '{}', '[]', '', '{"data": {}} x', '{"data": {},}', "{'data': {}}",
    '{"data": {"Module.a.Linear.parameters_grad.0": {"weight": [RECORD]}}}',
    '{"data": {"Tensor.add.0.forward": {"output": [RECORD]}}, "x": "\t"}',                   # control character
    '{"data": {"Tensor.add.0.forward": {"output": [RECORD]}}, "x": 01}',
])
def test_irregular_documents_agree(text, tmp_path, monkeypatch):
    text = text.replace("RECORD", json.dumps(TENSOR))
    _same(_read(_dump(tmp_path, None, text)), monkeypatch)


def test_non_utf8_in_a_name(tmp_path, monkeypatch):
    text = json.dumps({"data": {"Tensor.add.0.forward": {"output": [TENSOR]}}}).encode()
    path = _dump(tmp_path / "a", None, text.replace(b"Tensor.add", b"Tensor.\xff\xfe"))
    kind, message = _same(_read(path), monkeypatch)
    assert kind == "error" and "not UTF-8" in message
    utf8 = _dump(tmp_path / "b", None, text.replace(b"Tensor.add", "Tensor.äddé".encode()))
    kind, table = _same(_read(utf8), monkeypatch, expect_native=True)
    assert table["name"][0].startswith("Tensor.äddé")


def test_the_scan_reads_a_memory_map_and_the_python_reader_bytes(tmp_path, monkeypatch):
    """The native path scans the file's pages mapped (native.scanned_bytes); where it gives up, the Python
    reader gets the same bytes as a bytes object (what json, decode and the errors take)."""
    from workbench.dumps import readers_msprobe
    from workbench import input_files

    mapped_bytes = input_files.mapped_bytes

    kinds, given = [], []
    monkeypatch.setattr(input_files, "mapped_bytes", lambda *a, **k: kinds.append(type(mapped_bytes(*a, **k)))
                        or mapped_bytes(*a, **k))
    monkeypatch.setattr(readers_msprobe, "decode_utf8", lambda raw, where: given.append(type(raw)) or raw.decode())
    text = json.dumps({"data": {"Tensor.add.0.forward": {"output": [TENSOR]}}}).encode()
    irregular = text.replace(b'"Tensor.add', b'"Tensor.\\u0061dd')         # an escape: the Python reader
    for folder, body, native in (("a", text, True), ("b", irregular, False)):
        path = _dump(tmp_path / folder, None, body)
        kinds.clear(), given.clear()
        assert _outcome(_read(path), monkeypatch, True)[0] == "table"
        assert len(kinds) == 1 and not issubclass(kinds[0], bytes) and given == ([] if native else [bytes])
        _same(_read(path), monkeypatch, expect_native=native)


def test_random_byte_mutations(tmp_path, monkeypatch):
    source = sorted(fixtures_dir("dumps", "msprobe_pytorch").rglob("dump.full.json"))[-1].read_bytes()
    rng = random.Random(11)
    alphabet = b'{}[]",:.-+0123456789eEtruefalsnNIy \n\\ux\xff'
    outcomes = set()
    for trial in range(1500):
        data = bytearray(source)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            choice = rng.random()
            if choice < 0.5:
                data[at] = rng.choice(alphabet)
            elif choice < 0.75:
                del data[at]
            else:
                data.insert(at, rng.choice(alphabet))
        path = _dump(tmp_path / str(trial % 4), None, bytes(data))
        outcomes.add(_same(_read(path), monkeypatch)[0])
    assert outcomes == {"table", "error"}


def test_capacity_follows_content_not_bracket_counts(tmp_path, monkeypatch):
    """5M opening brackets: the scanner's arrays are sized by what the bytes can hold, at most START entries and
    rows (np.empty: ~46 MB of address space with the shipped fields, of which only what the scan writes is ever
    touched), not by the brackets (hundreds of MB); the Python path then gives the nesting error."""
    import tracemalloc

    path = _dump(tmp_path, None, b'{"data": {"a": {"output": [' + b"{" * 5_000_000)
    monkeypatch.setenv("WORKBENCH_NATIVE", "1")
    raw = path.read_bytes()
    layout = msprobe_scan.Layout(load_dump_formats())
    tracemalloc.start()
    try:
        assert msprobe_scan.scan(library("dumpscan"), raw, layout) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
    assert _same(_read(path), monkeypatch, expect_native=False)[0] == "error"


def test_many_records_grow_the_capacity(tmp_path, monkeypatch):
    monkeypatch.setattr(msprobe_scan, "START", 4)                 # every capacity fills several times
    data = {f"Tensor.add.{i}.forward": {"input_args": [TENSOR, dict(TENSOR, shape=[i])], "output": [TENSOR]}
            for i in range(50)}
    kind, table = _same(_read(_dump(tmp_path, data)), monkeypatch, expect_native=True)
    assert len(table["name"]) == 150
