"""Checkpoint-side values a damaged or hand-edited checkpoint holds: tracker files, args types,
rank-file structure, a truncated MindSpore .ckpt given to --init; and sources as context managers."""
from __future__ import annotations

import argparse
import re

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.config.megatron_checkpoint import find_checkpoint_file
from workbench.errors import InputError
from workbench.reference.__main__ import main as reference_main
from workbench.reference.megatron_io import load_megatron_legacy_shards
from workbench.tensors import megatron_legacy, torch_dist
from workbench.tensors.base import SourceBase, TensorMeta
from workbench.tensors.megatron_files import TRACKER_FILE, read_tracker

# ----------------------------------------------------------------------------- the tracker file

TRACKERS = {
    "superscript two": ("²".encode(), r"expected an iteration number or 'release', found '²'"),
    "arabic-indic digits": ("١٢".encode(), r"expected an iteration number or 'release', found '١٢'"),
    "non-UTF-8": (b"\xff\xfe12", r"not UTF-8 text \(byte 0xff at offset 0\)"),
    "a path": (b"../../elsewhere", r"expected an iteration number or 'release', found '../../elsewhere'"),
    "megabytes": (b"1" * 100_000, r"more than 4096 bytes: not a tracker file"),
}
READERS = {
    "legacy tensors": megatron_legacy.iteration_dir,
    "torch_dist tensors": torch_dist.iteration_dir,
    "torch_dist detection": torch_dist.is_torch_dist,
    "reference loader": load_megatron_legacy_shards,
    "checkpoint args": find_checkpoint_file,
}


@pytest.mark.parametrize("content", list(TRACKERS))
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_refuses_a_bad_tracker_file_by_name(tmp_path, reader, content):
    raw, problem = TRACKERS[content]
    (tmp_path / TRACKER_FILE).write_bytes(raw)
    with pytest.raises(InputError) as caught:
        READERS[reader](tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / TRACKER_FILE}:1: ")
    assert re.search(problem, str(caught.value)), str(caught.value)
    assert len(str(caught.value)) < 600


def test_bad_tracker_through_the_cli(tmp_path, capsys):
    (tmp_path / TRACKER_FILE).write_bytes("²".encode())
    (tmp_path / "iter_0000002").mkdir()
    code = main(["convert", str(tmp_path), str(tmp_path / "out"), "--to", "hf"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{tmp_path / TRACKER_FILE}:1: expected an iteration number or 'release', found '²'" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("raw, folder", [(b"12\n", "iter_0000012"), (b" release \n", "release"), (b"0", "iter_0000000")])
def test_tracker_values_megatron_writes(tmp_path, raw, folder):
    (tmp_path / TRACKER_FILE).write_bytes(raw)
    assert read_tracker(tmp_path).folder == folder
    assert read_tracker(tmp_path / "absent") is None


# ----------------------------------------------------------------------------- rank files

def save_rank_file(root, args, model) -> None:
    torch = pytest.importorskip("torch")
    path = root / "iter_0000001" / "mp_rank_00" / "model_optim_rng.pt"
    path.parent.mkdir(parents=True)
    torch.save({"args": args, "iteration": 1, "model": model}, path)
    (root / TRACKER_FILE).write_text("1")


def good_args(**overrides) -> argparse.Namespace:
    base = dict(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, expert_model_parallel_size=1,
                swiglu=True, num_layers=1)
    return argparse.Namespace(**{**base, **overrides})


RANK_FILES = {
    "tp size a string": (dict(args=good_args(tensor_model_parallel_size="two")),
                         r"\[args\.tensor_model_parallel_size\]: expected an integer, found str 'two'"),
    "num_layers a float": (dict(args=good_args(num_layers=2.5)), r"\[args\.num_layers\]: expected an integer, found float"),
    "swiglu a string": (dict(args=good_args(swiglu="no")), r"\[args\.swiglu\]: expected true/false, found str 'no'"),
    "tp size a bool": (dict(args=good_args(tensor_model_parallel_size=True)),
                       r"\[args\.tensor_model_parallel_size\]: expected an integer, found bool"),
    "model a string": (dict(model="oops"), r"\[model\]: expected a state dict of tensors, found str"),
    "args a string": (dict(args="oops"), r"\[args\]: expected an argparse\.Namespace, found str"),
}


@pytest.mark.parametrize("case", list(RANK_FILES))
def test_wrong_types_in_rank_files_are_named(tmp_path, capsys, case):
    torch = pytest.importorskip("torch")
    fields, problem = RANK_FILES[case]
    fields = {"args": good_args(), "model": {"decoder.final_layernorm.weight": torch.ones(4)}, **fields}
    save_rank_file(tmp_path, fields["args"], fields["model"])
    code = main(["convert", str(tmp_path), str(tmp_path / "out"), "--to", "hf"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "mp_rank_00/model_optim_rng.pt" in err
    assert re.search(problem, err), err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- --init of the reference runner

def test_truncated_mindspore_ckpt_given_to_init(tmp_path, capsys):
    from workbench.tensors.mindspore_ckpt import MindSporeCkptWriter

    ckpt = tmp_path / "init.ckpt"
    metas = [TensorMeta("model.norm.weight", (64,), "fp32"), TensorMeta("model.tok_embeddings.weight", (128, 64), "fp32")]
    writer = MindSporeCkptWriter(ckpt, metas)
    for meta in metas:
        writer.write(meta.name, np.ones(meta.shape, dtype=np.float32))
    writer.finish()
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    out = tmp_path / "run"
    code = reference_main(["train", "--side", "mindformers", "--init", str(ckpt), "--steps", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{ckpt}" in err and "truncated" in err
    assert not out.exists()


# ----------------------------------------------------------------------------- sources are context managers

def test_every_source_is_a_context_manager():
    from workbench.tensors.megatron_legacy import MegatronLegacySource
    from workbench.tensors.mindspore_ckpt_read import MindSporeCkptSource
    from workbench.tensors.safetensors_io import SafetensorsSource
    from workbench.tensors.torch_dist import TorchDistSource
    from workbench.tensors.torch_io import TorchFileSource

    for source in (MegatronLegacySource, MindSporeCkptSource, SafetensorsSource, TorchDistSource, TorchFileSource):
        assert issubclass(source, SourceBase), source


def test_with_closes_the_source(tmp_path):
    torch = pytest.importorskip("torch")
    from workbench.tensors.open import open_source

    torch.save({"w": torch.arange(4.0)}, tmp_path / "pytorch_model.bin")
    with open_source(tmp_path / "pytorch_model.bin") as source:
        assert source.read("w").tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(InputError, match="w"):          # closed: the mapped tensors were released
        source.read("w")
