"""open_source / open_sink: format detection, and streaming one format into another end to end."""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.tensors.base import TensorMeta
from workbench.tensors.mindspore_ckpt import MindSporeCkptWriter
from workbench.tensors.mindspore_ckpt_read import MindSporeCkptSource
from workbench.tensors.open import open_sink, open_source
from workbench.tensors.safetensors_io import SafetensorsSource
from workbench.tensors.safetensors_write import SafetensorsSink

ARRAYS = {"a.weight": np.arange(12, dtype=np.float32).reshape(3, 4), "b.bias": np.array([1, 2, 3], np.uint16)}
METAS = [TensorMeta("a.weight", (3, 4), "fp32"), TensorMeta("b.bias", (3,), "bf16")]


def fill(sink):
    for meta in METAS:
        sink.write(meta.name, ARRAYS[meta.name])
    return sink.finish()


def contents(source) -> dict:
    return {name: np.asarray(source.read(name)).tobytes() for name in source.metas()}


EXPECTED = {name: array.tobytes() for name, array in ARRAYS.items()}


# ----------------------------------------------------------------------------- sinks

@pytest.mark.parametrize("name, kind", [("x.ckpt", MindSporeCkptWriter), ("x.safetensors", SafetensorsSink)])
def test_open_sink_by_suffix(tmp_path, name, kind):
    sink = open_sink(tmp_path / name, METAS)
    assert isinstance(sink, kind)
    fill(sink)
    assert contents(open_source(tmp_path / name)) == EXPECTED


def test_open_sink_folder_is_sharded_safetensors(tmp_path):
    files = fill(open_sink(tmp_path / "hf", METAS, shard_bytes=16))
    assert [f.name for f in files] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                       "model.safetensors.index.json"]
    assert isinstance(open_source(tmp_path / "hf"), SafetensorsSource)
    assert contents(open_source(tmp_path / "hf")) == EXPECTED
    fill(open_sink(tmp_path / "one", METAS))                       # default shard size: one shard + index
    assert sorted(os.listdir(tmp_path / "one")) == ["model-00001-of-00001.safetensors", "model.safetensors.index.json"]


def test_open_sink_refuses_unknown_formats(tmp_path):
    with pytest.raises(InputError, match="cannot tell the output format from '.npz'"):
        open_sink(tmp_path / "x.npz", METAS)
    with pytest.raises(InputError, match="unknown output format 'onnx'"):
        open_sink(tmp_path / "x", METAS, fmt="onnx")
    with pytest.raises(InputError, match="does not exist"):
        open_sink(tmp_path / "missing" / "x.ckpt", METAS)


# ----------------------------------------------------------------------------- sources

def test_detects_torch_files(tmp_path):
    torch = pytest.importorskip("torch")
    state = {"a.weight": torch.from_numpy(ARRAYS["a.weight"]),
             "b.bias": torch.from_numpy(ARRAYS["b.bias"].view(np.int16)).view(torch.bfloat16)}
    (tmp_path / "hf").mkdir()
    torch.save(state, tmp_path / "hf" / "pytorch_model.bin")
    torch.save({"model": state, "epoch": 3}, tmp_path / "wrapped.pt")
    torch.save({"state_dict": state, "args": argparse.Namespace(x=1)}, tmp_path / "lightning.pth")
    for path in (tmp_path / "hf", tmp_path / "hf" / "pytorch_model.bin", tmp_path / "wrapped.pt",
                 tmp_path / "lightning.pth"):
        assert contents(open_source(path)) == EXPECTED, path


def test_detects_megatron_legacy_in_every_spelling(tmp_path):
    pytest.importorskip("torch")
    from workbench.reference.config import ModelConfig, PrecisionConfig
    from workbench.reference.megatron_io import save_megatron_legacy
    from workbench.reference.torch_model import build_model
    from workbench.tensors.megatron_legacy import MegatronLegacySource

    model = ModelConfig()
    save_megatron_legacy(build_model(model, PrecisionConfig(), 0).state_dict(), model, tmp_path / "tp", iteration=2,
                         tensor_parallel=2)
    files = save_megatron_legacy(build_model(model, PrecisionConfig(), 0).state_dict(), model, tmp_path / "one")
    for path in (tmp_path / "tp", tmp_path / "tp" / "iter_0000002", files[0]):
        assert isinstance(open_source(path), MegatronLegacySource), path
    renamed = files[0].with_name("rank0.pt")
    files[0].rename(renamed)
    assert isinstance(open_source(renamed), MegatronLegacySource)


def test_detects_ckpt_in_a_folder(tmp_path):
    fill(MindSporeCkptWriter(tmp_path / "rank_0.ckpt", METAS))
    assert isinstance(open_source(tmp_path), MindSporeCkptSource)
    fill(MindSporeCkptWriter(tmp_path / "rank_1.ckpt", METAS))
    with pytest.raises(InputError, match="2 .ckpt files: ambiguous"):
        open_source(tmp_path)


def test_unknown_inputs(tmp_path):
    with pytest.raises(InputError, match="not found"):
        open_source(tmp_path / "nothing.safetensors")
    with pytest.raises(InputError, match="no checkpoint found in this folder"):
        open_source(tmp_path)
    (tmp_path / "weights.npz").write_bytes(b"PK")
    with pytest.raises(InputError, match="unknown checkpoint type '.npz'"):
        open_source(tmp_path / "weights.npz")


# ----------------------------------------------------------------------------- end to end

def test_megatron_tp_pp_streams_into_a_mindspore_ckpt(tmp_path):
    torch = pytest.importorskip("torch")
    ms = pytest.importorskip("mindspore")
    from workbench.reference.config import ModelConfig, PrecisionConfig
    from workbench.reference.megatron_io import save_megatron_legacy
    from workbench.reference.torch_model import build_model

    model = ModelConfig(num_layers=4, qkv_bias=True)
    state = {k: v.to(torch.bfloat16) for k, v in build_model(model, PrecisionConfig(), 0).state_dict().items()}
    save_megatron_legacy(state, model, tmp_path / "meg", tensor_parallel=2, pipeline_parallel=2)
    source = open_source(tmp_path / "meg")
    metas = list(source.metas().values())
    for target in (tmp_path / "out.ckpt", tmp_path / "out_hf"):
        sink = open_sink(target, metas, shard_bytes=20_000)
        for meta in metas:
            sink.write(meta.name, source.read(meta.name))
        sink.finish()
    loaded = ms.load_checkpoint(str(tmp_path / "out.ckpt"))
    from safetensors.torch import load_file

    shards = {}
    index = json.loads((tmp_path / "out_hf" / "model.safetensors.index.json").read_text())
    for shard in set(index["weight_map"].values()):
        shards.update(load_file(str(tmp_path / "out_hf" / shard)))
    for name, tensor in state.items():
        bits = tensor.view(torch.int16).numpy().view(np.uint16)
        assert np.array_equal(loaded[name].asnumpy().view(np.uint16), bits), name
        assert torch.equal(shards[name].view(torch.int16), tensor.view(torch.int16)), name
