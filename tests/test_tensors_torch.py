"""torch state-dict files: mmap + weights-only loading, sharded bins, nested dicts, refusals."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from workbench.errors import InputError  # noqa: E402
from workbench.tensors.base import TensorMeta  # noqa: E402
from workbench.tensors.torch_io import INDEX_FILE, TorchFileSource, tensor_to_numpy  # noqa: E402


def state(seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {
        "model.embed_tokens.weight": torch.randn(8, 4, generator=gen).bfloat16(),
        "model.layers.0.self_attn.q_proj.weight": torch.randn(4, 4, generator=gen),
        "model.layers.0.input_layernorm.weight": torch.randn(4, generator=gen).half(),
        "position_ids": torch.arange(5),
        "mask": torch.tensor([True, False]),
    }


def bits(tensor) -> bytes:
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    return tensor.contiguous().numpy().tobytes()


def test_reads_a_state_dict_bit_exact_as_views(tmp_path):
    sd = state()
    torch.save(sd, tmp_path / "pytorch_model.bin")
    source = TorchFileSource(tmp_path / "pytorch_model.bin")
    assert source.metas()["model.embed_tokens.weight"] == TensorMeta("model.embed_tokens.weight", (8, 4), "bf16")
    assert source.metas()["mask"].dtype == "bool" and source.metas()["position_ids"].dtype == "int64"
    for name, tensor in sd.items():
        array = source.read(name)
        assert array.tobytes() == bits(tensor)
        assert not array.flags.owndata                     # a view of the mapped storage, not a copy
    assert source.read("model.embed_tokens.weight").dtype == np.uint16


def test_sharded_bin_with_index(tmp_path):
    sd = state()
    names = list(sd)
    torch.save({n: sd[n] for n in names[:2]}, tmp_path / "pytorch_model-00001-of-00002.bin")
    torch.save({n: sd[n] for n in names[2:]}, tmp_path / "pytorch_model-00002-of-00002.bin")
    weight_map = {n: f"pytorch_model-0000{1 if i < 2 else 2}-of-00002.bin" for i, n in enumerate(names)}
    (tmp_path / INDEX_FILE).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    for path in (tmp_path, tmp_path / INDEX_FILE):
        source = TorchFileSource(path)
        assert list(source.metas()) == names
        assert all(source.read(n).tobytes() == bits(sd[n]) for n in names)



@pytest.mark.parametrize("index, words", [
    ('{"weight_map": ["a.bin"]}', "weight_map is a list"),
    ('{"weight_map": {"w": 3}}', "a weight_map file name is an integer"),
    ('{"weight_map": {"w": "../../etc/passwd"}}', "outside the index's folder"),
    ('[1, 2]', "the index is a list"),
    ('{"weight_map": {"w": "a.bin"', "invalid checkpoint index"),                   # truncated
    ('[' * 100_000 + ']' * 100_000, "nests 100000 levels"),                          # deep nesting
])
def test_a_hostile_bin_index_is_one_line(tmp_path, index, words):
    (tmp_path / INDEX_FILE).write_text(index)
    with pytest.raises(InputError, match=words) as caught:
        TorchFileSource(tmp_path / INDEX_FILE)
    assert str(tmp_path / INDEX_FILE) in str(caught.value) and "\n" not in str(caught.value)

def test_nested_dict_with_key_path_and_non_tensors(tmp_path):
    import argparse

    sd = state()
    torch.save({"args": argparse.Namespace(tp=2), "iteration": 3, "model": {"language_model": sd, "extra": None}},
               tmp_path / "x.pt")
    source = TorchFileSource(tmp_path / "x.pt", key_path="model", safe_globals=[argparse.Namespace])
    assert set(source.metas()) == {f"language_model.{n}" for n in sd}
    assert source.skipped == {"extra": "not a tensor (NoneType)"}
    deeper = TorchFileSource(tmp_path / "x.pt", key_path="model.language_model", safe_globals=[argparse.Namespace])
    assert deeper.read("mask").tobytes() == bits(sd["mask"])
    with pytest.raises(InputError, match=r"x\.pt \[model\.decoder\]: no key 'decoder' under model"):
        TorchFileSource(tmp_path / "x.pt", key_path="model.decoder", safe_globals=[argparse.Namespace])


def test_namespace_needs_the_allow_list(tmp_path):
    import argparse

    torch.save({"args": argparse.Namespace(tp=2), "w": torch.ones(2)}, tmp_path / "x.pt")
    with pytest.raises(InputError, match=r"x\.pt: refusing to unpickle global argparse\.Namespace: not on the allow-list"):
        TorchFileSource(tmp_path / "x.pt")


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {_Evil.marker}",))


def test_code_in_a_pickle_is_never_run(tmp_path):
    _Evil.marker = tmp_path / "pwned"
    torch.save({"w": torch.ones(2), "payload": _Evil()}, tmp_path / "evil.bin")
    with pytest.raises(InputError, match=r"evil\.bin: refusing to unpickle global (posix|os)\.system: not on the allow-list"):
        TorchFileSource(tmp_path / "evil.bin")
    assert not _Evil.marker.exists()


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_files_name_the_file(tmp_path, damage):
    path = tmp_path / "pytorch_model.bin"
    torch.save(state(), path)
    path.write_bytes(path.read_bytes()[:200] if damage == "truncate" else b"not a zip at all")
    with pytest.raises(InputError, match=r"pytorch_model\.bin: not a readable torch zip checkpoint"):
        TorchFileSource(path)


def test_tensor_to_numpy_keeps_bf16_bits():
    tensor = torch.tensor([1.0, -2.5, float("inf")], dtype=torch.bfloat16)
    array = tensor_to_numpy(tensor)
    assert array.dtype == np.uint16 and array.tolist() == [0x3F80, 0xC020, 0x7F80]
