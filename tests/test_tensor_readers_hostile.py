"""Tensor readers against hostile bytes: every file is built from scratch here and read through the
real CLI (`workbench weights diff`, `workbench convert`) or the reader itself; each class of damage
gives exit code 2 and one line naming the file and the key, no traceback, no output left behind."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.errors import InputError
from workbench.tensors.base import TensorMeta
from workbench.tensors.mindspore_ckpt import value_prefix
from workbench.tensors.mindspore_ckpt_read import MindSporeCkptSource
from workbench.tensors.sizes import MAX_ELEMENTS, check_shape, tensor_bytes


def safetensors_bytes(header: dict | bytes, data: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return len(raw).to_bytes(8, "little") + raw + data


def good_entry(**changes) -> dict:
    return {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], **changes}}


def one_error_line(capsys, argv: list[str]) -> str:
    """Run the CLI; it must exit 2 with exactly one error line and no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("workbench: error: "), err
    assert "Traceback" not in err
    return lines[0]


def diff_error(capsys, tmp_path, name: str, content: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content)
    line = one_error_line(capsys, ["weights", "diff", str(path), str(path), "--out", str(tmp_path / "d.csv")])
    assert str(path) in line
    assert not (tmp_path / "d.csv").exists() and not list(tmp_path.glob(".d.csv*"))
    return line


@pytest.mark.parametrize("header, key", [
    (good_entry(dtype=["F32"]), "dtype is a list"),
    (good_entry(shape="2"), "shape is a string"),
    (good_entry(shape=[2.0]), "shape[0] is a number"),
    (good_entry(shape=[True, 2]), "shape[0] is true/false"),
    (good_entry(data_offsets={"0": 8}), "data_offsets is a mapping"),
    (good_entry(data_offsets=[0, "8"]), "data_offsets[1] is a string"),
    ({"__metadata__": 7, **good_entry()}, "__metadata__ is an integer"),
    ({"__metadata__": {"format": ["pt"]}, **good_entry()}, "__metadata__.format is a list"),
    ({"w": [1, 2]}, "[w]: the entry is a list"),
    ([good_entry()], "the header is a list"),
])
def test_wrong_json_types_in_a_safetensors_header(tmp_path, capsys, header, key):
    line = diff_error(capsys, tmp_path, "x.safetensors", safetensors_bytes(header, bytes(8)))
    assert key in line


@pytest.mark.parametrize("index, key", [
    ({"weight_map": ["w"]}, "weight_map is a list"),
    ({"weight_map": {"w": 3}}, "weight_map.w is an integer"),
    ({"weight_map": {"w": "../x.safetensors"}}, "expected a file name beside the index"),
    ([], "the index is a list"),
    ({"metadata": {}}, "no weight_map"),
])
def test_wrong_json_types_in_a_safetensors_index(tmp_path, capsys, index, key):
    (tmp_path / "x.safetensors").write_bytes(safetensors_bytes(good_entry(), bytes(8)))
    line = diff_error(capsys, tmp_path, "model.safetensors.index.json", json.dumps(index).encode())
    assert key in line


def test_overlapping_data_offsets_are_refused(tmp_path, capsys):
    header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
    line = diff_error(capsys, tmp_path, "x.safetensors", safetensors_bytes(header, bytes(12)))
    assert "[b]: data_offsets overlap those of a" in line


def test_offsets_past_the_end_of_the_file(tmp_path, capsys):
    header = {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    line = diff_error(capsys, tmp_path, "x.safetensors", safetensors_bytes(header, bytes(8)))
    assert "[w]: tensor ends at byte" in line and "past the file's end" in line


def test_header_length_larger_than_the_file(tmp_path, capsys):
    line = diff_error(capsys, tmp_path, "x.safetensors", (10 ** 6).to_bytes(8, "little") + b"{}")
    assert "header length 1000000 does not fit the file's 10 bytes" in line


@pytest.mark.parametrize("shape, words", [
    ([2 ** 32, 2 ** 32], "has 18446744073709551616 elements"),     # int64 product wraps to 0 bytes
    ([2 ** 62, 4], "shape[0] is 4611686018427387904, expected 0 to 2**40"),
    ([-2, -4], "shape[0] is -2, expected 0 to 2**40"),            # product 8 elements: would pass a size check
])
def test_a_shape_whose_size_wraps_or_is_negative_is_refused(tmp_path, capsys, shape, words):
    header = {"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}
    line = diff_error(capsys, tmp_path, "x.safetensors", safetensors_bytes(header))
    assert "[w]" in line and words in line
    assert "-4 bytes" not in line


def test_sizes_are_python_ints_and_bounded():
    assert tensor_bytes([2 ** 20, 2 ** 20], 4, "f") == 2 ** 42          # past int32, exact
    assert TensorMeta("w", (2 ** 32, 2 ** 32), "fp32").nbytes == 2 ** 66  # never wraps in int64
    with pytest.raises(InputError, match=r"f: shape \[1099511627777\] has|shape\[0\] is 1099511627777"):
        check_shape([MAX_ELEMENTS + 1], "f")


def ckpt_record(name: str, dims: tuple[int, ...], dtype: str = "fp32", content: bytes = b"") -> bytes:
    return value_prefix(TensorMeta(name, dims, dtype), len(content)) + content


@pytest.mark.parametrize("dims, words", [
    ((2 ** 32, 2 ** 32), "has 18446744073709551616 elements"),
    ((2 ** 64 - 4,), "dims[0] is -4, expected 0 to 2**40"),       # protobuf int64 -4 on the wire
])
def test_mindspore_ckpt_with_absurd_dims(tmp_path, capsys, dims, words):
    line = diff_error(capsys, tmp_path, "x.ckpt", ckpt_record("w", dims))
    assert "[w]" in line and words in line


def test_mindspore_ckpt_claiming_more_than_it_holds(tmp_path):
    path = tmp_path / "x.ckpt"
    path.write_bytes(ckpt_record("w", (1000, 1000), content=bytes(16)))
    with pytest.raises(InputError, match=r"x\.ckpt \[w\]: Float32 \[1000, 1000\] needs 4000000 bytes, the file holds 16"):
        MindSporeCkptSource(path)


@pytest.mark.parametrize("name", ["x.safetensors", "x.ckpt", "model_optim_rng.pt"])
def test_self_referencing_symlink_and_fifo_are_named(tmp_path, capsys, name):
    loop = tmp_path / name
    loop.symlink_to(loop)
    line = one_error_line(capsys, ["weights", "diff", str(loop), str(loop)])
    assert str(loop) in line and "symlink that loops" in line
    loop.unlink()
    os.mkfifo(loop)
    line = one_error_line(capsys, ["weights", "diff", str(loop), str(loop)])   # must not block on the pipe
    assert str(loop) in line and "pipe (FIFO)" in line


def test_fifo_and_loop_inside_a_checkpoint_folder_are_named(tmp_path, capsys):
    os.mkfifo(tmp_path / "model.safetensors")
    line = one_error_line(capsys, ["weights", "diff", str(tmp_path), str(tmp_path)])
    assert "model.safetensors: is a pipe (FIFO)" in line
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "model.safetensors.index.json").symlink_to(tmp_path / "model.safetensors.index.json")
    line = one_error_line(capsys, ["weights", "diff", str(tmp_path), str(tmp_path)])
    assert "model.safetensors.index.json: is a symlink that loops" in line


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_json_nested_100k_deep_is_one_line_everywhere(tmp_path, capsys):
    line = diff_error(capsys, tmp_path, "x.safetensors", safetensors_bytes(b'{"a": ' + deep(100_000) + b"}"))
    assert "safetensors header nests 100001 levels deep" in line
    line = diff_error(capsys, tmp_path, "model.safetensors.index.json", deep(100_000))
    assert "nests 100000 levels deep" in line
    llama_file(tmp_path / "x.safetensors")
    config = tmp_path / "config.json"
    config.write_bytes(b'{"model_type": ' + deep(100_000) + b"}")
    line = one_error_line(capsys, ["weights", "diff", str(tmp_path / "x.safetensors"), str(tmp_path / "x.safetensors"),
                                   "--config", str(config)])
    assert str(config) in line and "nests 100001 levels deep" in line


LLAMA_SHAPES = {"model.embed_tokens.weight": [8, 4], "model.norm.weight": [4], "lm_head.weight": [8, 4],
                **{f"model.layers.0.self_attn.{p}_proj.weight": [4, 4] for p in "qkvo"},
                "model.layers.0.mlp.gate_proj.weight": [8, 4], "model.layers.0.mlp.up_proj.weight": [8, 4],
                "model.layers.0.mlp.down_proj.weight": [4, 8], "model.layers.0.input_layernorm.weight": [4],
                "model.layers.0.post_attention_layernorm.weight": [4]}
LLAMA_CONFIG = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 4, "num_attention_heads": 2,
                "num_key_value_heads": 2, "intermediate_size": 8, "vocab_size": 8}


def llama_file(path, dtype_of_q: str = "F32", item_size: int = 4) -> None:
    """One Hugging Face Llama layer (hidden 4, vocab 8), q_proj stored as ``dtype_of_q``."""
    header, offset = {}, 0
    for name, shape in LLAMA_SHAPES.items():
        dtype, size = (dtype_of_q, item_size) if "q_proj" in name else ("F32", 4)
        nbytes = size * int(np.prod(shape))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    path.write_bytes(safetensors_bytes(header, bytes(offset)))


def test_unsupported_dtype_is_named_not_no_spec_matches(tmp_path, capsys):
    folder = tmp_path / "hf"
    folder.mkdir()
    llama_file(folder / "model.safetensors", "F8_E5M2", 1)
    (folder / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    line = one_error_line(capsys, ["convert", str(folder), str(tmp_path / "out.ckpt"), "--to", "mindformers"])
    assert f"{folder} [model.layers.0.self_attn.q_proj.weight]: dtype F8_E5M2 is not supported; " \
           "supported: F64" in line
    assert "no converter spec" not in line and "missing" not in line
    assert not list(tmp_path.glob("*out.ckpt*"))


def test_a_well_formed_file_still_reads(tmp_path):
    from workbench.tensors.open import open_source

    path = tmp_path / "x.safetensors"
    path.write_bytes(safetensors_bytes({"__metadata__": {"format": "pt"}, **good_entry()},
                                       np.arange(2, dtype=np.float32).tobytes()))
    assert open_source(path).read("w").tolist() == [0.0, 1.0]


def test_spec_files_and_megatron_checkpoint_paths_name_loops_and_fifos(tmp_path):
    from workbench.config.megatron_checkpoint import find_checkpoint_file
    from workbench.spec.loader import available_archs, load_arch

    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    os.mkfifo(tmp_path / "pipe.yaml")
    assert available_archs(tmp_path) == []                       # listing never opens the pipe
    with pytest.raises(InputError, match=r"loop\.yaml: is a symlink that loops"):
        load_arch("loop", tmp_path)
    with pytest.raises(InputError, match=r"pipe\.yaml: is a pipe \(FIFO\)"):
        load_arch("pipe", tmp_path)
    with pytest.raises(InputError, match=r"loop\.yaml: is a symlink that loops"):
        find_checkpoint_file(tmp_path / "loop.yaml")
    with pytest.raises(InputError, match=r"pipe\.yaml: is a pipe \(FIFO\)"):
        find_checkpoint_file(tmp_path / "pipe.yaml")
