"""safetensors reader/writer: round trips, interop with safetensors/torch/MindSpore, refusals, damage."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.tensors.base import STORAGE, TensorMeta, bf16_bits_to_fp32
from workbench.tensors.safetensors_io import INDEX_FILE, SafetensorsSource
from workbench.tensors.safetensors_write import SafetensorsSink, build_header


def sample(seed: int = 0, with_bf16: bool = True) -> dict[str, tuple[str, np.ndarray]]:
    """{name: (dtype, array)} covering every carried dtype, a scalar and an empty tensor."""
    rng = np.random.default_rng(seed)
    out = {
        "layers.0.w": ("fp32", rng.standard_normal((3, 5)).astype(np.float32)),
        "layers.0.h": ("fp16", rng.standard_normal((4,)).astype(np.float16)),
        "layers.0.d": ("fp64", rng.standard_normal((2, 2))),
        "ids": ("int64", rng.integers(-9, 9, (3,), dtype=np.int64)),
        "i32": ("int32", rng.integers(-9, 9, (2, 3), dtype=np.int32)),
        "i16": ("int16", rng.integers(-9, 9, (5,), dtype=np.int16)),
        "i8": ("int8", rng.integers(-9, 9, (7,), dtype=np.int8)),
        "u8": ("uint8", rng.integers(0, 255, (3,), dtype=np.uint8)),
        "mask": ("bool", rng.random((2, 3)) > 0.5),
        "scalar": ("fp32", np.array(1.5, dtype=np.float32)),
        "empty": ("fp32", np.zeros((0, 4), dtype=np.float32)),
    }
    if with_bf16:
        out["layers.0.b"] = ("bf16", rng.integers(0, 2 ** 16, (6, 2), dtype=np.uint16))
    return out


def metas_of(tensors) -> list[TensorMeta]:
    return [TensorMeta(name, array.shape, dtype) for name, (dtype, array) in tensors.items()]


def write(path, tensors, **options):
    sink = SafetensorsSink(path, metas_of(tensors), **options)
    for name, (_, array) in tensors.items():
        sink.write(name, array)
    return sink.finish()


def assert_same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


# ----------------------------------------------------------------------------- round trips

def test_round_trip_single_file(tmp_path):
    tensors = sample()
    files = write(tmp_path / "x.safetensors", tensors, metadata={"format": "pt"})
    assert files == [tmp_path / "x.safetensors"] and os.listdir(tmp_path) == ["x.safetensors"]
    source = SafetensorsSource(tmp_path / "x.safetensors")
    assert source.metas() == {m.name: m for m in metas_of(tensors)}
    assert source.metadata == {"format": "pt"}
    for name, (dtype, array) in tensors.items():
        got = source.read(name)
        assert_same_bits(got, array)
        assert got.dtype == STORAGE[dtype]
    assert isinstance(source.read("layers.0.w"), np.memmap)


def test_header_is_padded_and_in_metas_order(tmp_path):
    tensors = sample()
    write(tmp_path / "x.safetensors", tensors)
    raw = (tmp_path / "x.safetensors").read_bytes()
    length = int.from_bytes(raw[:8], "little")
    assert length % 8 == 0
    assert list(json.loads(raw[8:8 + length])) == list(tensors)
    assert raw[:8 + length] == build_header(metas_of(tensors))


def test_round_trip_sharded(tmp_path):
    tensors = sample()
    files = write(tmp_path / "out", tensors, shard_bytes=64)
    shards = sorted(p.name for p in files if p.suffix == ".safetensors")
    assert files[-1].name == INDEX_FILE and len(shards) > 2
    assert shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    index = json.loads((tmp_path / "out" / INDEX_FILE).read_text())
    assert set(index["weight_map"]) == set(tensors)
    assert index["metadata"]["total_size"] == sum(m.nbytes for m in metas_of(tensors))
    for path in (tmp_path / "out", tmp_path / "out" / INDEX_FILE):
        source = SafetensorsSource(path)
        assert list(source.metas()) == list(tensors)
        for name, (_, array) in tensors.items():
            assert_same_bits(source.read(name), array)


# ----------------------------------------------------------------------------- interop

def test_written_file_loads_with_safetensors_numpy(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tensors = sample(with_bf16=False)              # numpy 1.x has no bfloat16 for safetensors.numpy
    write(tmp_path / "x.safetensors", tensors)
    loaded = safetensors_numpy.load_file(str(tmp_path / "x.safetensors"))
    for name, (_, array) in tensors.items():
        assert_same_bits(loaded[name], array)


def test_written_file_loads_with_safetensors_torch(tmp_path):
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    tensors = sample()
    write(tmp_path / "x.safetensors", tensors)
    loaded = safetensors_torch.load_file(str(tmp_path / "x.safetensors"))
    bf16 = loaded["layers.0.b"]
    assert bf16.dtype == torch.bfloat16
    assert_same_bits(bf16.view(torch.int16).numpy().view(np.uint16), tensors["layers.0.b"][1])
    assert_same_bits(loaded["layers.0.w"].numpy(), tensors["layers.0.w"][1])
    assert loaded["mask"].dtype == torch.bool and loaded["scalar"].shape == ()


def test_reads_files_written_by_safetensors_torch(tmp_path):
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    state = {"a.weight": torch.randn(4, 3, dtype=torch.bfloat16), "b": torch.randn(5).half(),
             "c": torch.arange(6, dtype=torch.int64).reshape(2, 3), "d": torch.randn(2, 2)}
    safetensors_torch.save_file(state, str(tmp_path / "t.safetensors"), metadata={"format": "pt"})
    source = SafetensorsSource(tmp_path / "t.safetensors")
    assert source.metas()["a.weight"] == TensorMeta("a.weight", (4, 3), "bf16")
    assert_same_bits(source.read("a.weight"), state["a.weight"].view(torch.int16).numpy().view(np.uint16))
    for name in ("b", "c", "d"):
        assert_same_bits(source.read(name), state[name].numpy())


def test_unsupported_dtype_is_skipped_with_a_reason(tmp_path):
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch without float8")
    safetensors_torch.save_file({"f8": torch.zeros(4).to(torch.float8_e4m3fn), "x": torch.ones(2)},
                                str(tmp_path / "f.safetensors"))
    source = SafetensorsSource(tmp_path / "f.safetensors")
    assert list(source.metas()) == ["x"] and "F8_E4M3" in source.skipped["f8"]


def test_written_file_loads_with_mindspore(tmp_path):
    ms = pytest.importorskip("mindspore")
    tensors = {name: sample()[name] for name in ("layers.0.w", "layers.0.h", "layers.0.b", "ids", "i32")}
    write(tmp_path / "x.safetensors", tensors, metadata={"format": "pt"})
    loaded = ms.load_checkpoint(str(tmp_path / "x.safetensors"), format="safetensors")
    for name, (dtype, array) in tensors.items():
        value = loaded[name]
        if dtype == "bf16":
            assert_same_bits(value.asnumpy().view(np.uint16), array)
            np.testing.assert_array_equal(value.astype(ms.float32).asnumpy(), bf16_bits_to_fp32(array))
        else:
            assert_same_bits(value.asnumpy(), array)


# ----------------------------------------------------------------------------- refusals and cleanup

def test_sink_refuses_out_of_order_and_leaves_nothing(tmp_path):
    tensors = sample()
    sink = SafetensorsSink(tmp_path / "x.safetensors", metas_of(tensors))
    sink.write("layers.0.w", tensors["layers.0.w"][1])
    with pytest.raises(InputError, match="out of order.*expected 'layers.0.h'"):
        sink.write("ids", tensors["ids"][1])
    assert os.listdir(tmp_path) == []
    with pytest.raises(InputError, match="already aborted"):
        sink.write("layers.0.h", tensors["layers.0.h"][1])


@pytest.mark.parametrize("array, problem", [
    (np.zeros((5, 3), np.float32), r"expected fp32 .* \[3, 5\], got numpy float32 \[5, 3\]"),
    (np.zeros((3, 5), np.float64), "got numpy float64"),
])
def test_sink_refuses_wrong_shape_or_dtype(tmp_path, array, problem):
    sink = SafetensorsSink(tmp_path / "x.safetensors", [TensorMeta("w", (3, 5), "fp32")])
    with pytest.raises(InputError, match=problem):
        sink.write("w", array)
    assert os.listdir(tmp_path) == []


def test_sink_refuses_bf16_given_as_float(tmp_path):
    sink = SafetensorsSink(tmp_path / "x.safetensors", [TensorMeta("w", (2,), "bf16")])
    with pytest.raises(InputError, match="bf16 travels as uint16"):
        sink.write("w", np.zeros(2, np.float32))


def test_finish_with_missing_tensors_fails_and_cleans_up(tmp_path):
    tensors = sample()
    sink = SafetensorsSink(tmp_path / "out", metas_of(tensors), shard_bytes=32)
    for name in list(tensors)[:5]:
        sink.write(name, tensors[name][1])
    with pytest.raises(InputError, match="only 5 of"):
        sink.finish()
    assert not (tmp_path / "out").exists()


def test_abort_and_exception_leave_no_partial_file(tmp_path):
    tensors = sample()
    sink = SafetensorsSink(tmp_path / "x.safetensors", metas_of(tensors))
    sink.write("layers.0.w", tensors["layers.0.w"][1])
    sink.abort()
    assert os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError):
        with SafetensorsSink(tmp_path / "y.safetensors", metas_of(tensors)) as sink:
            sink.write("layers.0.w", tensors["layers.0.w"][1])
            raise RuntimeError("conversion failed")
    assert os.listdir(tmp_path) == []


def test_existing_output_is_replaced_only_on_finish(tmp_path):
    target = tmp_path / "x.safetensors"
    target.write_bytes(b"old")
    sink = SafetensorsSink(target, [TensorMeta("w", (2,), "fp32")])
    sink.write("w", np.ones(2, np.float32))
    assert target.read_bytes() == b"old"
    sink.finish()
    assert_same_bits(SafetensorsSource(target).read("w"), np.ones(2, np.float32))


# ----------------------------------------------------------------------------- damaged files

def test_truncated_file_names_the_file(tmp_path):
    path = tmp_path / "x.safetensors"
    write(path, sample())
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(InputError, match=r"x\.safetensors \[.*\]: tensor ends at byte"):
        SafetensorsSource(path)


@pytest.mark.parametrize("content, problem", [
    (b"\x01\x02", "too short"),
    ((10 ** 12).to_bytes(8, "little") + b"{}", "does not fit"),
    ((4).to_bytes(8, "little") + b"nope", "invalid safetensors header"),
    ((2).to_bytes(8, "little") + b"[]", "the header is a list"),
    ((40).to_bytes(8, "little") + b'{"w":{"dtype":"F32","shape":[2]}}       ', "lacks"),
    ((60).to_bytes(8, "little") + b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}      ', "needs 8"),
])
def test_corrupt_headers(tmp_path, content, problem):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(InputError, match=problem) as error:
        SafetensorsSource(path)
    assert "bad.safetensors" in str(error.value)


def test_unknown_tensor_name(tmp_path):
    write(tmp_path / "x.safetensors", sample())
    with pytest.raises(InputError, match="no tensor named 'layers.0.q'"):
        SafetensorsSource(tmp_path / "x.safetensors").read("layers.0.q")


def test_index_with_missing_shard(tmp_path):
    write(tmp_path / "out", sample(), shard_bytes=64)
    next((tmp_path / "out").glob("model-00002-*")).unlink()
    with pytest.raises(InputError, match="shard model-00002-of-.* is missing"):
        SafetensorsSource(tmp_path / "out")
