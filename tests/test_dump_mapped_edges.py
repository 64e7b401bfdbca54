"""Mapped dump files (input_files.mapped_bytes) end exactly where the file ends: a map has no terminating NUL after
its last byte, and when the size is a multiple of the page size the next byte is not mapped at all. Files of
exactly one page, cut inside a number, a string or a literal, must give the one-line error, never a read past the
map (a crash, not an exception)."""
from __future__ import annotations

import mmap
from pathlib import Path

import pytest

from workbench.dumps.readers_msprobe import read_msprobe
from workbench.errors import InputError

PAGE = mmap.PAGESIZE
HEAD = ('{"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": null, "data": '
        '{"Functional.linear.0.forward": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", '
        '"shape": [2, 3], "Max": 1.5, "Min": -1.5, "Mean": 0.1, "Norm": ')
WHOLE = HEAD + '2.0}], "input_kwargs": {}, "output": []}}}'


def _page_sized(text: str) -> str:
    """``text`` padded with spaces after its first ``{`` to exactly one page."""
    cut = text.index("{") + 1
    padded = text[:cut] + " " * (PAGE - len(text)) + text[cut:]
    assert len(padded.encode()) == PAGE
    return padded


def _dump(folder: Path, dump: str, side: str = "{}") -> Path:
    rank = folder / "step0" / "rank0"
    rank.mkdir(parents=True)
    (rank / "dump.json").write_text(dump)
    for name in ("construct.json", "stack.json"):
        (rank / name).write_text(side)
    return folder


@pytest.mark.parametrize("tail", ["1234567", "1.5e", '"tor', "nul", "-"])
def test_a_page_sized_dump_cut_inside_a_token_is_an_error(tmp_path, tail):
    root = _dump(tmp_path / "dump", _page_sized(HEAD + tail))
    with pytest.raises(InputError, match="dump.json"):
        read_msprobe(root, "A")


@pytest.mark.parametrize("name", ["construct.json", "stack.json"])
@pytest.mark.parametrize("tail", ['"Functional.linear.0.forward": nul', '"Functional.linear.0.forward": "Mod',
                                  '"Functional.linear.0.forw'])
def test_page_sized_side_files_cut_inside_a_value_are_errors(tmp_path, name, tail):
    root = _dump(tmp_path / "dump", WHOLE)
    (root / "step0" / "rank0" / name).write_text(_page_sized("{" + tail))
    with pytest.raises(InputError, match=name):
        read_msprobe(root, "A")
