"""input_files: every way an input path or its bytes can be wrong gives one InputError line."""
from __future__ import annotations

import os

import pytest

from workbench.errors import InputError
from workbench.input_files import (expect, expect_count, input_stat, json_depth, mapped_bytes, parse_json,
                                   read_bytes, read_json, read_text)


def test_missing_folder_loop_and_broken_link_are_named(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    broken = tmp_path / "broken"
    broken.symlink_to(tmp_path / "nowhere")
    cases = {tmp_path / "absent": "file not found", tmp_path: "is a folder",
             loop: "loops", broken: "broken symlink"}
    for path, words in cases.items():
        with pytest.raises(InputError) as caught:
            read_bytes(path)
        assert words in str(caught.value) and str(path) in str(caught.value)


def _pipe_writing(tmp_path, text: str):
    """A FIFO under ``tmp_path`` and the pid of a forked process that writes ``text`` into it once (reap it)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the writer side of the pipe
        with open(fifo, "w") as handle:
            handle.write(text)
        os._exit(0)
    return fifo, pid


def test_fifo_is_read_once_but_refused_where_a_regular_file_is_needed(tmp_path):
    fifo, pid = _pipe_writing(tmp_path, "a: 1\n")
    assert read_text(fifo) == "a: 1\n"
    os.waitpid(pid, 0)
    with pytest.raises(InputError, match="pipe"):
        input_stat(fifo, regular=True)


def test_size_limit_is_checked_before_reading(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(10_000)  # sparse: nothing is allocated, and nothing must be read
    with pytest.raises(InputError, match="more than the 1.0 KiB"):
        read_bytes(big, limit=1024)


def test_mapped_bytes_are_read_bytes_and_its_errors(tmp_path):
    data = "{\"a\": \"ü\"}\n".encode() + bytes(range(256)) * 40          # non-UTF-8 too: the map is bytes
    path = tmp_path / "dump.json"
    path.write_bytes(data)
    mapped = mapped_bytes(path)
    assert not isinstance(mapped, bytes) and len(mapped) == len(data) and mapped[:] == data
    assert mapped[3:5] == data[3:5] and isinstance(mapped[3:5], bytes)
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert mapped_bytes(empty) == b""                                   # nothing to map: read_bytes
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for bad, words in ((tmp_path / "absent", "file not found"), (tmp_path, "is a folder"), (loop, "loops")):
        with pytest.raises(InputError, match=words):
            mapped_bytes(bad)
    with pytest.raises(InputError, match="more than the 1.0 KiB"):
        mapped_bytes(path, limit=1024)                                  # checked before anything is mapped
    os.chmod(path, 0)
    if not os.access(path, os.R_OK):                                    # root reads anything
        with pytest.raises(InputError, match="permission"):
            mapped_bytes(path)


def test_mapped_bytes_of_a_pipe_are_read_once(tmp_path):
    fifo, pid = _pipe_writing(tmp_path, "a: 1\n")
    assert mapped_bytes(fifo) == b"a: 1\n"
    os.waitpid(pid, 0)


def test_non_utf8_names_the_line_and_byte(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"a: 1\nb: \xff\n")
    with pytest.raises(InputError) as caught:
        read_text(path)
    assert f"{path}:2" in str(caught.value) and "0xff" in str(caught.value)


def test_deep_json_is_refused_without_recursing(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="nests 100000 levels"):
        read_json(path)
    assert json_depth('{"a": "[[[[", "b": [1]}') == 2  # brackets inside strings do not count


def test_truncated_json_names_line_and_column():
    with pytest.raises(InputError, match=r"x.json:1:\d+: invalid JSON"):
        parse_json('{"a": [1, 2', "x.json")


def test_expect_rejects_wrong_types_and_bools_as_ints():
    assert expect(3, int, "f", "k") == 3
    assert expect(3, float, "f", "k") == 3          # an integer is a number
    with pytest.raises(InputError, match="k is a list"):
        expect([1], dict, "f", "k")
    with pytest.raises(InputError, match="true/false"):
        expect(True, int, "f", "k")
    with pytest.raises(InputError, match="expected an integer at least 1"):
        expect_count(0, "f", "heads", minimum=1)
    with pytest.raises(InputError, match="heads is a string"):
        expect_count("two", "f", "heads")
