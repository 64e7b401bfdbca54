"""Megatron torch_dist checkpoints: stacked layer (and expert) axes unstacked, chunks read on demand."""
from __future__ import annotations

import io
import itertools
import json
import os
import pickle

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")

from workbench.errors import InputError  # noqa: E402
from workbench.tensors.open import open_source  # noqa: E402
from workbench.tensors.torch_dist import TorchDistSource, unstack  # noqa: E402
from workbench.tensors.torch_io import tensor_to_numpy  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
L, E = 3, 2
QKV = "decoder.layers.self_attention.linear_qkv.weight"
FC1 = "decoder.layers.mlp.experts.experts.linear_fc1.weight"


def global_state(seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {
        "embedding.word_embeddings.weight": torch.randn(10, 4, generator=gen).bfloat16(),
        QKV: torch.randn(L, 8, 4, generator=gen),
        "decoder.layers.self_attention.linear_proj.weight": torch.randn(L, 4, 4, generator=gen),
        FC1: torch.randn(L, E, 6, 4, generator=gen),
        "decoder.final_layernorm.weight": torch.randn(4, generator=gen),
    }


def save_like_megatron(folder, state: dict, tensor_parallel: int = 2) -> None:
    """What Megatron's torch_dist strategy writes: one chunk per (layer, expert, TP shard), spread over
    one ``__R_0.distcp`` file per rank, plus ``.metadata`` / ``metadata.json`` (torch's own classes)."""
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import (
        ChunkStorageMetadata, Metadata, MetadataIndex, TensorProperties, TensorStorageMetadata)

    folder.mkdir(parents=True)
    files = [open(folder / f"__{rank}_0.distcp", "wb") for rank in range(tensor_parallel)]
    state_md, storage = {}, {}
    for key, full in state.items():
        stacked = 1 + (".experts.experts." in key) if key.startswith("decoder.layers.") else 0
        split_axis = stacked + (1 if key.endswith("linear_proj.weight") else 0)
        ranges = [[(i, 1) for i in range(full.shape[axis])] if axis < stacked else
                  [(r * full.shape[axis] // tensor_parallel, full.shape[axis] // tensor_parallel)
                   for r in range(tensor_parallel)] if axis == split_axis else [(0, full.shape[axis])]
                  for axis in range(full.dim())]
        chunks = []
        for region in itertools.product(*ranges):
            piece = full
            for axis, (start, length) in enumerate(region):
                piece = piece.narrow(axis, start, length)
            rank = len(chunks) % tensor_parallel
            buffer = io.BytesIO()
            torch.save(piece.clone(), buffer)
            offsets, sizes = torch.Size([s for s, _ in region]), torch.Size([n for _, n in region])
            storage[MetadataIndex(key, offsets)] = _StorageInfo(f"__{rank}_0.distcp", files[rank].tell(),
                                                                len(buffer.getvalue()))
            files[rank].write(buffer.getvalue())
            chunks.append(ChunkStorageMetadata(offsets, sizes))
        state_md[key] = TensorStorageMetadata(TensorProperties(dtype=full.dtype), full.size(), chunks)
    for handle in files:
        handle.close()
    with open(folder / ".metadata", "wb") as handle:
        pickle.dump(Metadata(state_dict_metadata=state_md, storage_data=storage), handle)
    (folder / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                                                      "common_backend": "torch", "common_backend_version": 1}))
    (folder.parent / "latest_checkpointed_iteration.txt").write_text(folder.name.removeprefix("iter_").lstrip("0")
                                                                     or "0")


def expected_tensors(state: dict) -> dict:
    out = {}
    for key, full in state.items():
        for name, prefix, _ in unstack(key, tuple(full.shape)):
            out[name] = full[prefix] if prefix else full
    return out


def same(array, tensor) -> bool:
    expected = tensor_to_numpy(tensor.contiguous())
    return array.shape == expected.shape and array.dtype == expected.dtype and array.tobytes() == expected.tobytes()


def test_unstack_names():
    assert [n for n, _, _ in unstack(QKV, (2, 8, 4))] == [f"decoder.layers.{i}.self_attention.linear_qkv.weight"
                                                          for i in range(2)]
    names = [(n, p) for n, p, _ in unstack(FC1, (1, 2, 6, 4))]
    assert names == [("decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight", (0, 0)),
                     ("decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight", (0, 1))]
    assert unstack("decoder.layers.mlp.experts.experts.3.linear_fc2.weight", (2, 4, 6))[1][0] == \
        "decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight"
    assert unstack("decoder.final_layernorm.weight", (4,)) == [("decoder.final_layernorm.weight", (), (4,))]


def test_megatron_layout_read_per_layer(tmp_path, monkeypatch):
    state = global_state()
    save_like_megatron(tmp_path / "iter_0000020", state)
    full = {key: torch.empty_like(value) for key, value in state.items()}
    dcp.load(full, storage_reader=dcp.FileSystemReader(str(tmp_path / "iter_0000020")), no_dist=True)
    assert all(torch.equal(full[k], state[k]) for k in state)                # a valid DCP checkpoint

    source = open_source(tmp_path)                                          # save root with the tracker
    assert isinstance(source, TorchDistSource)
    expected = expected_tensors(state)
    assert list(source.metas()) == list(expected) and len(expected) == 2 + L * 2 + L * E
    loads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(1) or real_load(*a, **k))
    layer = "decoder.layers.1.self_attention.linear_proj.weight"
    assert same(source.read(layer), expected[layer]) and len(loads) == 2     # only this layer's two TP chunks
    for name, tensor in expected.items():
        assert source.metas()[name].shape == tuple(tensor.shape)
        assert same(source.read(name), tensor), name


def test_reads_a_checkpoint_written_by_dcp_save(tmp_path):
    state = {**global_state(), "decoder.layers.self_attention.core_attention._extra_state": io.BytesIO(b"te"),
             "optimizer.state.exp_avg.decoder.final_layernorm.weight": torch.zeros(4)}
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(tmp_path)), no_dist=True)
    source = TorchDistSource(tmp_path)
    assert "optimizer.state.exp_avg.decoder.final_layernorm.weight" in source.skipped
    assert "decoder.layers.self_attention.core_attention._extra_state" in source.skipped
    for name, tensor in expected_tensors(global_state()).items():
        assert same(source.read(name), tensor), name


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {_Evil.marker}",))


def test_metadata_pickle_cannot_run_code(tmp_path):
    _Evil.marker = tmp_path / "pwned"
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / ".metadata").write_bytes(pickle.dumps(_Evil()))
    with pytest.raises(InputError, match=r"\.metadata: refusing to unpickle global posix.system: not on the allow-list"):
        TorchDistSource(tmp_path / "ckpt")
    assert not _Evil.marker.exists()


def test_missing_chunk_file_names_the_tensor(tmp_path):
    save_like_megatron(tmp_path / "iter_0000001", global_state())
    (tmp_path / "iter_0000001" / "__1_0.distcp").unlink()
    source = TorchDistSource(tmp_path / "iter_0000001")
    with pytest.raises(InputError, match=r"\[decoder.layers.0.self_attention.linear_qkv.weight\]: cannot read"):
        source.read("decoder.layers.0.self_attention.linear_qkv.weight")


def test_not_torch_dist(tmp_path):
    with pytest.raises(InputError, match="no .metadata"):
        TorchDistSource(tmp_path)
