"""What a conversion does before its first byte is copied stays small: a rename-only conversion never
imports numpy (its import alone costs more than a tenth of a second on the benchmark machine), the
pickle-based readers, hashlib (it loads OpenSSL), the capture layouts, the config resolver and derivations nor the
reference configs (sizes need only keys.yaml's aliases), and the shortcuts that make
that possible give the same answers as the numpy code they stand in for."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_convert_safety import hf_llama
from workbench import input_files
from workbench.input_files import json_depth
from workbench.tensors.base import ITEM_SIZE, STORAGE, STORAGE_TYPE_NAMES
from workbench.tensors.step_store import NUMPY_NAMES

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import sys
from workbench.cli.main import main
code = main(sys.argv[1:])
print(code, sorted(name for name in ("numpy", "torch", "mindspore", "pickle", "zipfile", "hashlib",
                                     "workbench.replay.layout", "workbench.config.resolver",
                                     "workbench.config.derive", "workbench.reference.config") if name in sys.modules))
"""


def run_cli(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("suffix", [".safetensors", ".ckpt"])
def test_a_rename_only_conversion_imports_no_numpy_nor_pickle(tmp_path, suffix):
    source = hf_llama(tmp_path / "hf")
    assert run_cli("convert", str(source), str(tmp_path / f"out{suffix}"), "--to", "mindformers") == "0 []"
    # a conversion that computes tensors does need them: the probe sees the difference
    cast = run_cli("convert", str(source), str(tmp_path / f"cast{suffix}"), "--to", "mindformers", "--dtype", "bf16")
    assert cast.startswith("0 [") and "'numpy'" in cast and "'pickle'" in cast


TEXTS = ['{}', '[]', '[[[', ']]][[', '{"a": "[[[[", "b": [1, [2, {"c": []}]]}', '"unterminated [[ {',
         '{"a": "x\\\\"}, [[[', '{"a": "x\\"[[[["}', '[["a]", "b["], "\\\\\\"", {"k": "}}"}]',
         json.dumps({"x": [[[[{"y": "[]"}]]]], "z": "\\\"{"}), '"a" "b" [ "c', '[' * 40 + ']' * 39, '']


@pytest.mark.parametrize("text", TEXTS)
def test_json_depth_of_a_small_text_equals_the_numpy_count(monkeypatch, text):
    small = json_depth(text)
    monkeypatch.setattr(input_files, "_FEW_MARKS", -1)          # force the compiled count (where built) ...
    assert small == json_depth(text)
    monkeypatch.setenv("WORKBENCH_NATIVE", "0")                 # ... and the numpy count on the same text
    assert small == json_depth(text)


def test_storage_types_and_sizes_are_numpys():
    assert list(STORAGE) == list(STORAGE_TYPE_NAMES) and "fp32" in STORAGE and "fp8" not in STORAGE
    assert {name: np.dtype(STORAGE[name]).itemsize for name in STORAGE} == ITEM_SIZE
    assert STORAGE["bf16"] is np.uint16 and STORAGE["bool"] is np.bool_ and STORAGE.get("fp8") is None
    assert NUMPY_NAMES == {str(np.dtype(STORAGE[name])): name for name in STORAGE if name != "bf16"}


def subcommand_help(parser, name: str) -> str:
    action = next(a for a in parser._actions if a.dest == "command")      # argparse keeps subparsers here
    return action.choices[name].format_help()


@pytest.mark.parametrize("name", ["convert", "optim-check", "weights"])
def test_a_named_subcommand_builds_only_its_own_parser_with_the_same_help(name):
    from workbench.cli.main import _named_command, build_parser

    assert _named_command([name, "x"]) == _named_command(["--debug", name]) == name.replace("-", "_")
    alone = build_parser(_named_command([name]))
    assert list(next(a for a in alone._actions if a.dest == "command").choices) == [name]
    assert subcommand_help(alone, name) == subcommand_help(build_parser(), name)


@pytest.mark.parametrize("argv", [["optim_check"], ["conv"], ["--debug", "nothing"]])
def test_an_unknown_command_is_refused_by_the_whole_parser(argv, capsys):
    from workbench.cli.main import _named_command, main

    assert _named_command(argv) is None
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "invalid choice" in err and "'checklist'" in err and "'optim-check'" in err


def test_version_and_help_need_no_command():
    from workbench.cli.main import _named_command

    assert _named_command(["--version"]) is _named_command(["-h"]) is _named_command([]) is None


def test_only_the_process_entry_point_skips_the_final_collection(tmp_path):
    import gc

    from workbench.cli.main import main

    source = hf_llama(tmp_path / "hf")
    before = gc.get_freeze_count()
    assert main(["convert", str(source), str(tmp_path / "a.ckpt"), "--to", "mindformers"]) == 0
    assert gc.get_freeze_count() == before                   # a library call (tests, notebooks) keeps its GC
    probe = ("import gc, sys\nfrom workbench.cli.main import main\ncode = main()\n"
             "print(code, gc.get_freeze_count() > 0)")
    done = subprocess.run([sys.executable, "-c", probe, "convert", str(source), str(tmp_path / "b.ckpt"), "--to",
                           "mindformers"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["0", "True"], done.stderr
    assert (tmp_path / "a.ckpt").read_bytes() == (tmp_path / "b.ckpt").read_bytes()
