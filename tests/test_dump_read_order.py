"""The compiled reader's short cuts held to the general code they skip: rows kept in the scan's order only where a
sort would give that order (``msprobe_native._ordered`` against ``np.lexsort``), module paths numbered per entry
(``msprobe_arrays.spread_codes``) giving the table a plain spread gives, entry names' repeats found by hashing
their bytes as a set of the strs finds them, the table taking the readers' arrays without aliasing two columns,
a memory map's ASCII check eight bytes at a time, and the side files read once when two threads ask."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.dumps import msprobe_native
from workbench.dumps.formats import load_dump_formats
from workbench.dumps.msprobe_arrays import spread_codes
from workbench.dumps.msprobe_lines import as_list
from workbench.dumps.rows import table_from_columns
from workbench.native import library

native = pytest.mark.skipif(library("dumpscan") is None,
                            reason="the dumpscan library is not built (python workbench/native/build.py)")


def _lexsorted(rows, stats, entry_of, rank_of_key, keep):
    picked = np.lexsort((np.arange(len(rows)), rank_of_key, entry_of))
    picked = picked[keep[picked]]
    return rows[picked], stats[picked]


@pytest.mark.parametrize("seed", range(6))
def test_rows_in_order_are_what_the_sort_gives(seed):
    rng = np.random.default_rng(seed)
    for size in (0, 1, 2, 7, 300):
        entry_of = np.sort(rng.integers(0, max(size // 3, 1), size))
        rank_of_key = rng.integers(-1, 4, size)
        if seed % 2:                                          # in the wanted order: ranks ascending per entry
            rank_of_key = rank_of_key[np.lexsort((rank_of_key, entry_of))]
        keep = rng.random(size) < (1.0 if seed % 3 == 0 else 0.8)
        rows = rng.integers(0, 1000, (size, 5))
        stats = rng.random((size, 4))
        got, expected = msprobe_native._ordered(rows, stats, entry_of, rank_of_key, keep), \
            _lexsorted(rows, stats, entry_of, rank_of_key, keep)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    ordered = np.arange(6)
    rows, stats = np.zeros((6, 2), np.int64), np.zeros((6, 1))
    got = msprobe_native._ordered(rows, stats, ordered, np.zeros(6, np.int64), np.ones(6, bool))
    assert got[0] is rows and got[1] is stats                 # the usual dump: no sort, no copy


def test_spread_codes_are_the_spread_values():
    values = ["a.b", "", "a.b", "c", "unused", "é"]
    index = np.array([0, 1, 2, 2, 3, 5, 0], np.int64)
    spread = spread_codes(values, index)
    assert isinstance(spread, pd.Categorical) and list(spread.categories) == ["a.b", "", "c", "é"]
    assert np.asarray(spread, dtype=object).tolist() == [values[i] for i in index.tolist()]
    assert len(spread_codes(values, np.zeros(0, np.int64))) == 0
    mixed = spread_codes(["a", None, "a"], np.array([1, 0, 2]))           # not all str: a plain spread
    assert isinstance(mixed, np.ndarray) and mixed.tolist() == [None, "a", "a"]


def test_table_of_numbered_module_paths_equals_the_plain_one():
    fmt = load_dump_formats()
    modules = ["decoder.layers.3.mlp", "", "model.layers.12", "decoder.layers.3.mlp"]
    index = np.array([0, 1, 2, 3, 3, 1, 0], np.int64)

    def columns(module_path):
        size = len(index)
        return {"name": [f"n{i}" for i in range(size)], "module_path": module_path,
                "op": np.array(["x"] * size, dtype=object), "slot": np.zeros(size, np.int64), "max": np.arange(size, dtype=np.float64)}

    plain = table_from_columns(columns(np.asarray(modules, dtype=object)[index]), "A", fmt)
    numbered = table_from_columns(columns(spread_codes(modules, index)), "A", fmt)
    pd.testing.assert_frame_equal(plain, numbered, check_exact=True)
    assert numbered["layer"].tolist() == [3, pd.NA, 12, 3, 3, pd.NA, 3]


def test_table_copies_an_array_given_for_two_columns():
    fmt = load_dump_formats()
    shared = np.array(["a", "b"], dtype=object)
    table = table_from_columns({"name": shared, "op": shared, "slot": np.zeros(2, np.int64)}, "A", fmt)
    table.loc[0, "name"] = "changed"
    assert table["op"].tolist() == ["a", "b"]


@native
def test_repeated_entry_names_found_by_their_bytes(monkeypatch):
    raw = b'{"data": {"a.1": {}, "\xc3\xa9": {}, "a.1": {}, "a.12": {}}}'
    spans = np.array([[11, 3, 0], [22, 2, 0], [32, 3, 0], [43, 4, 0]], np.int64)
    assert msprobe_native._entry_names(raw, spans)[0] is None
    assert as_list(msprobe_native._entry_names(raw, spans[[0, 1, 3]])[0]) == ["a.1", "é", "a.12"]
    monkeypatch.setattr(msprobe_native, "number", lambda text, spans: None)     # the set of strs decides
    assert msprobe_native._entry_names(raw, spans)[0] is None
    assert as_list(msprobe_native._entry_names(raw, spans[[0, 1, 3]])[0]) == ["a.1", "é", "a.12"]


def test_a_maps_ascii_check_is_bytes_isascii(tmp_path):
    """Eight bytes at a time OR-ed, then the tail: a high byte at every place of maps of 1 to 19 bytes."""
    import mmap

    for size in range(1, 20):
        for place in [None, *range(size)]:
            data = bytearray(b"a" * size)
            if place is not None:
                data[place] = 0x80 + place
            path = tmp_path / "m"
            path.write_bytes(bytes(data))
            with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                assert msprobe_native._ascii_map(mapped) == bytes(data).isascii(), (size, place)


def test_side_files_asked_by_two_threads_are_read_once(tmp_path, monkeypatch):
    """A scan started ahead loads the side files in its thread while the reader may ask for them: one reads each
    file, the other waits for it (both got the same objects)."""
    import threading
    import time

    from workbench.dumps import msprobe_side
    from workbench.dumps.msprobe_entries import entry_infos

    (tmp_path / "construct.json").write_text('{"Tensor.add.0.forward": "Module.a.A.forward.0"}')
    (tmp_path / "stack.json").write_text('{"0": [["Tensor.add.0.forward"], ["a.py:1"]]}')
    reads = []
    slow = msprobe_side.load_construct

    def counted(path):
        reads.append(path)
        time.sleep(0.05)                                      # the other thread asks meanwhile
        return slow(path)

    monkeypatch.setattr(msprobe_side, "load_construct", counted)
    beside = msprobe_side.Beside(tmp_path, load_dump_formats(), entry_infos)
    threads = [threading.Thread(target=beside.load) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reads) == 1 and beside.parents() == {"Tensor.add.0.forward": "Module.a.A.forward.0"}
    assert beside.stacks() == {"Tensor.add.0.forward": "0"}
