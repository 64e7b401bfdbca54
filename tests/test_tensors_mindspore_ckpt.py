"""MindSpore .ckpt written and read by hand, checked against mindspore.save/load_checkpoint."""
from __future__ import annotations

import os

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.tensors import mindspore_ckpt, mindspore_ckpt_read
from workbench.tensors.base import TensorMeta, bf16_bits_to_fp32, fp32_to_bf16_bits
from workbench.tensors.mindspore_ckpt import MindSporeCkptWriter, varint
from workbench.tensors.mindspore_ckpt_read import MindSporeCkptSource


def sample(seed: int = 0) -> dict[str, tuple[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((6, 4)).astype(np.float32)
    return {
        "model.layers.0.attention.wq.weight": ("fp32", rng.standard_normal((8, 4)).astype(np.float32)),
        "model.layers.0.attention_norm.weight": ("fp16", rng.standard_normal((4,)).astype(np.float16)),
        "model.tok_embeddings.embedding_weight": ("bf16", fp32_to_bf16_bits(values)),
        "raw_bits": ("bf16", rng.integers(0, 2 ** 16, (3, 3), dtype=np.uint16)),
        "step": ("int32", np.array([7, 8], dtype=np.int32)),
        "global_step": ("int64", np.array(12, dtype=np.int64)),
        "flags": ("bool", np.array([True, False, True])),
        "d": ("fp64", rng.standard_normal((2,))),
    }


def write(path, tensors):
    writer = MindSporeCkptWriter(path, [TensorMeta(n, a.shape, d) for n, (d, a) in tensors.items()])
    for name, (_, array) in tensors.items():
        writer.write(name, array)
    return writer.finish()


def same_bits(a, b) -> bool:
    return a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def test_varint_matches_protobuf_encoding():
    assert varint(0) == b"\x00" and varint(1) == b"\x01" and varint(300) == b"\xac\x02"
    assert varint(2 ** 40) == bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x20])


def test_round_trip(tmp_path):
    tensors = sample()
    assert write(tmp_path / "x.ckpt", tensors) == [tmp_path / "x.ckpt"]
    source = MindSporeCkptSource(tmp_path / "x.ckpt")
    assert list(source.metas()) == list(tensors)
    for name, (dtype, array) in tensors.items():
        assert source.metas()[name] == TensorMeta(name, array.shape, dtype)
        assert same_bits(source.read(name), array)
    assert isinstance(source.read("model.layers.0.attention.wq.weight"), np.memmap)


def test_written_file_loads_with_mindspore_bit_exact(tmp_path):
    ms = pytest.importorskip("mindspore")
    tensors = sample()
    write(tmp_path / "x.ckpt", tensors)
    loaded = ms.load_checkpoint(str(tmp_path / "x.ckpt"))
    assert list(loaded) == list(tensors)
    for name, (dtype, array) in tensors.items():
        value = loaded[name]
        assert tuple(value.shape) == array.shape, name
        if dtype == "bf16":
            assert value.dtype == ms.bfloat16
            assert same_bits(value.asnumpy().view(np.uint16), array)
            finite = ~np.isnan(bf16_bits_to_fp32(array))
            np.testing.assert_array_equal(value.astype(ms.float32).asnumpy()[finite], bf16_bits_to_fp32(array)[finite])
        else:
            assert same_bits(value.asnumpy(), array), name


def test_reads_mindspore_save_checkpoint_with_append_dict_and_crc(tmp_path):
    ms = pytest.importorskip("mindspore")
    rng = np.random.default_rng(1)
    weights = {"w": rng.standard_normal((3, 5)).astype(np.float32), "h": rng.standard_normal(4).astype(np.float16)}
    params = [{"name": k, "data": ms.Parameter(ms.Tensor(v), name=k)} for k, v in weights.items()]
    bf16 = ms.Tensor(rng.standard_normal((2, 3)).astype(np.float32)).astype(ms.bfloat16)
    params.append({"name": "b", "data": ms.Parameter(bf16, name="b")})
    for crc in (False, True):
        path = str(tmp_path / f"saved_{crc}.ckpt")
        ms.save_checkpoint(params, path, append_dict={"epoch_num": 3, "lr": 0.5, "note": "hi"}, crc_check=crc)
        source = MindSporeCkptSource(path)
        assert source.skipped == {"note": "tensor_type 'str' is not a weight dtype"}   # strings are not weights
        assert set(source.metas()) == {"w", "h", "b", "epoch_num", "lr"}
        for name, array in weights.items():
            assert same_bits(source.read(name), array)
        assert source.metas()["b"].dtype == "bf16"
        assert same_bits(source.read("b"), bf16.asnumpy().view(np.uint16))
        assert source.read("epoch_num").shape == () and int(source.read("epoch_num")) == 3
        assert float(source.read("lr")) == 0.5


def test_large_tensors_are_sliced_like_mindspore(tmp_path, monkeypatch):
    ms = pytest.importorskip("mindspore")
    monkeypatch.setattr(mindspore_ckpt, "SLICE_BYTES", 64)
    big = np.arange(100, dtype=np.float32).reshape(20, 5)
    tensors = {"big": ("fp32", big), "small": ("fp16", np.ones(3, np.float16))}
    write(tmp_path / "x.ckpt", tensors)
    assert len(mindspore_ckpt_read.parse_records(tmp_path / "x.ckpt")) == 8      # 400 bytes in 64-byte slices + 1
    source = MindSporeCkptSource(tmp_path / "x.ckpt")
    assert same_bits(source.read("big"), big)
    assert same_bits(ms.load_checkpoint(str(tmp_path / "x.ckpt"))["big"].asnumpy(), big)


def test_reads_mindspore_own_slices(tmp_path, monkeypatch):
    ms = pytest.importorskip("mindspore")
    import mindspore.train.serialization as serialization

    monkeypatch.setattr(serialization, "SLICE_SIZE", 1)      # KiB: slice anything over 1 KiB
    big = np.random.default_rng(2).standard_normal((64, 16)).astype(np.float32)
    ms.save_checkpoint([{"name": "big", "data": ms.Parameter(ms.Tensor(big), name="big")}], str(tmp_path / "s.ckpt"))
    assert len(mindspore_ckpt_read.parse_records(tmp_path / "s.ckpt")) > 1
    assert same_bits(MindSporeCkptSource(tmp_path / "s.ckpt").read("big"), big)


def test_writer_refuses_and_cleans_up(tmp_path):
    tensors = sample()
    writer = MindSporeCkptWriter(tmp_path / "x.ckpt", [TensorMeta(n, a.shape, d) for n, (d, a) in tensors.items()])
    with pytest.raises(InputError, match="out of order"):
        writer.write("step", tensors["step"][1])
    assert os.listdir(tmp_path) == []
    writer = MindSporeCkptWriter(tmp_path / "y.ckpt", [TensorMeta("w", (2,), "fp32")])
    writer.write("w", np.zeros(2, np.float32))
    writer.abort()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("cut", [1, 10, 200])
def test_truncated_file_names_the_file(tmp_path, cut):
    path = tmp_path / "x.ckpt"
    write(path, sample())
    path.write_bytes(path.read_bytes()[:-cut])
    with pytest.raises(InputError, match=r"x\.ckpt"):
        MindSporeCkptSource(path)


@pytest.mark.parametrize("content", [b"", b"\xff\xff\xff", b"PK\x03\x04 a zip file", b"\x0a\x05\x0a\x01"])
def test_garbage_is_refused(tmp_path, content):
    path = tmp_path / "bad.ckpt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=r"bad\.ckpt"):
        MindSporeCkptSource(path)


def test_size_mismatch_is_refused(tmp_path):
    prefix = mindspore_ckpt.value_prefix(TensorMeta("w", (4,), "fp32"), 8)    # claims [4] but holds 8 bytes
    (tmp_path / "w.ckpt").write_bytes(prefix + b"\x00" * 8)
    with pytest.raises(InputError, match=r"w\.ckpt \[w\]: Float32 \[4\] needs 16 bytes, the file holds 8"):
        MindSporeCkptSource(tmp_path / "w.ckpt")
