"""Byte-copied tensors land at their source offset's page residue (a faster kernel copy), and the padding
that puts them there leaves files that real safetensors and real MindSpore load bit for bit."""
from __future__ import annotations

import json

import numpy as np
import pytest

from workbench import spec
from workbench.cli.main import main
from workbench.errors import InputError
from workbench.tensors import mindspore_ckpt
from workbench.tensors.base import TensorMeta
from workbench.tensors.bytecopy import ALIGN_FROM, FOLIO, PAGE, chunk_length
from workbench.tensors.mindspore_ckpt import padding_record
from workbench.tensors.mindspore_ckpt_read import MindSporeCkptSource
from workbench.tensors.safetensors_io import SafetensorsSource
from workbench.tensors.safetensors_write import SafetensorsSink, build_header

# embedding and output layer are vocab x hidden fp32 = exactly ALIGN_FROM bytes; the rest is smaller
SIZES = dict(num_layers=1, hidden=128, vocab=ALIGN_FROM // 512, num_heads=4, num_kv_heads=2, head_dim=32, ffn=256)
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
             "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
             "num_hidden_layers": 1, "vocab_size": ALIGN_FROM // 512, "tie_word_embeddings": False}


def hf_llama(folder, metadata: dict):
    """One HF safetensors file whose header length (set by ``metadata``) puts the data at an odd page residue."""
    metas = list(spec.expected_metas(spec.load_arch("llama"), "hf", spec.ModelParams(**SIZES), "fp32").values())
    folder.mkdir()
    rng = np.random.default_rng(0)
    with SafetensorsSink(folder / "model.safetensors", metas, metadata=metadata) as sink:
        for meta in metas:
            sink.write(meta.name, rng.standard_normal(meta.shape).astype(np.float32))
    (folder / "config.json").write_text(json.dumps(HF_CONFIG))
    return folder


def residues(source, output, names: dict[str, str]) -> dict[str, tuple[int, int]]:
    """target name -> (source offset, output offset) modulo PAGE, for the large tensors."""
    out = {}
    for target, origin in names.items():
        a, b = source.span(origin), output.span(target)
        if a.length >= ALIGN_FROM:
            out[target] = (a.offset % PAGE, b.offset % PAGE)
    return out


def converted(tmp_path, suffix: str, metadata: dict):
    source_path = hf_llama(tmp_path / "hf", metadata)
    output_path = tmp_path / f"out{suffix}"
    assert main(["convert", str(source_path), str(output_path), "--to", "mindformers", "--verify"]) == 0
    return source_path, output_path


def large_pairs(source_path):
    """target -> source name of the converted tensors, from the real plan."""
    from workbench.convert.run import ConvertOptions, prepare

    source, *_, plan = prepare(source_path, ConvertOptions(to="mindformers"))
    with source:
        return {step.target.name: step.sources[0] for step in plan.steps}


@pytest.mark.parametrize("metadata", [{"format": "pt"}, {"format": "pt", "note": "x" * 1234}])
def test_safetensors_output_pads_its_header_so_large_copies_keep_their_page_residue(tmp_path, metadata):
    from safetensors.numpy import load_file

    source_path, output_path = converted(tmp_path, ".safetensors", metadata)
    with SafetensorsSource(source_path) as source, SafetensorsSource(output_path) as output:
        found = residues(source, output, large_pairs(source_path))
        assert len(found) == 2 and all(a == b for a, b in found.values()), found
        raw = output_path.read_bytes()
        length = int.from_bytes(raw[:8], "little")
        header = raw[8:8 + length]
        assert (8 + length) % 8 == 0 and header.rstrip(b" ").endswith(b"}")            # only spaces pad it
        unpadded = build_header([output.metas()[name] for name in json.loads(header) if name != "__metadata__"],
                                json.loads(header)["__metadata__"])
        assert len(unpadded) <= 8 + length < len(unpadded) + PAGE
        loaded = load_file(output_path)                                                 # the reference reader
        for target, origin in large_pairs(source_path).items():
            assert loaded[target].tobytes() == source.read(origin).tobytes()


def test_header_padding_follows_the_byte_weight_of_each_residue():
    big, small, other = (TensorMeta("big", (ALIGN_FROM // 4 * 3,), "fp32"), TensorMeta("small", (3,), "fp32"),
                         TensorMeta("other", (ALIGN_FROM // 4,), "fp32"))
    plain = build_header([big, small, other])
    padded = build_header([big, small, other], aligned_to={"big": 5 * PAGE + 1000, "small": 8, "other": 24})
    start = len(padded)
    assert start % PAGE == 1000 and len(plain) <= start < len(plain) + PAGE    # 3 MiB outvote 1 MiB at 24
    assert build_header([big], aligned_to={"big": 7}) == build_header([big])   # data must start 8-aligned
    assert build_header([small], aligned_to={"small": 1000}) == build_header([small])   # not worth a pad


def test_ckpt_padding_records_have_every_size_and_readers_skip_them(tmp_path):
    assert [len(padding_record(size)) for size in (3, 130, 132, PAGE + 2)] == [3, 130, 132, PAGE + 2]
    for size in (2, 131):
        with pytest.raises(ValueError):
            padding_record(size)
    data = np.arange(ALIGN_FROM // 4, dtype=np.float32)
    raw = tmp_path / "raw.bin"
    raw.write_bytes(b"x" * 777 + data.tobytes())
    from workbench.tensors.bytecopy import FileSpan

    with mindspore_ckpt.MindSporeCkptWriter(tmp_path / "a.ckpt", [TensorMeta("w", data.shape, "fp32")]) as writer:
        writer.write("w", FileSpan(raw, 777, data.nbytes))
    source = MindSporeCkptSource(tmp_path / "a.ckpt")
    assert source.span("w").offset % PAGE == 777 and np.array_equal(source.read("w"), data)
    prefix = mindspore_ckpt.value_prefix(source.metas()["w"], data.nbytes)
    pad = padding_record(source.span("w").offset - len(prefix))                 # the record before the value
    assert (tmp_path / "a.ckpt").read_bytes().startswith(pad + prefix)


def test_ckpt_output_pads_records_and_loads_with_mindspore_bit_exact(tmp_path):
    ms = pytest.importorskip("mindspore")
    source_path, output_path = converted(tmp_path, ".ckpt", {"format": "pt", "note": "y" * 333})
    pairs = large_pairs(source_path)
    with SafetensorsSource(source_path) as source:
        output = MindSporeCkptSource(output_path)
        found = residues(source, output, pairs)
        assert len(found) == 2 and all(a == b for a, b in found.values()), found
        loaded = ms.load_checkpoint(str(output_path))
        assert sorted(loaded) == sorted(pairs)
        for target, origin in pairs.items():
            assert loaded[target].asnumpy().tobytes() == source.read(origin).tobytes()


@pytest.mark.parametrize("position,left,expected", [
    (0, 5 * FOLIO, 5 * FOLIO),                       # already on a boundary: one call
    (100, 5 * FOLIO, FOLIO - 100),                   # the head up to the boundary first
    (FOLIO - PAGE, 5 * FOLIO, PAGE),
    (100, ALIGN_FROM - 1, ALIGN_FROM - 1),           # a short range is copied whole
    (100, FOLIO - 200, FOLIO - 200),                 # ends before the boundary: whole
    (100, FOLIO - 100, FOLIO - 100),                 # ends on it: whole
    (0, 3 << 30, 1 << 30),                           # calls of at most 1 GiB, still on boundaries
])
def test_a_long_copy_starts_its_bulk_on_a_large_page_boundary(position, left, expected):
    assert chunk_length(position, left) == expected
    assert (position + chunk_length(position, left)) % FOLIO == 0 or chunk_length(position, left) == left


def test_a_copy_split_at_the_boundary_writes_every_byte_where_it_belongs(tmp_path, monkeypatch):
    """The head and bulk calls together copy exactly the range, at its place (through the real kernel call)."""
    from workbench.tensors import bytecopy

    calls = []
    real = bytecopy._copy_file_range
    monkeypatch.setattr(bytecopy, "_copy_file_range", lambda *args: calls.append(args[2:]) or real(*args))
    data = np.random.default_rng(1).integers(0, 256, 3 * FOLIO + 12345, dtype=np.uint8).tobytes()
    (tmp_path / "source").write_bytes(data)
    with open(tmp_path / "out", "wb") as handle:
        handle.write(b"h" * 777)
        bytecopy.copy_span(bytecopy.FileSpan(tmp_path / "source", PAGE + 777, len(data) - PAGE - 777), handle)
    assert (tmp_path / "out").read_bytes() == b"h" * 777 + data[PAGE + 777:]
    assert [position for _, position, _ in calls] == [777, FOLIO]        # head, then the bulk from the boundary


def test_a_range_shifted_within_its_page_goes_through_the_buffer_not_the_kernel_copy(tmp_path, monkeypatch):
    """Residues that differ: read and written in BUFFER pieces (here 4 KiB, so many), every byte at its place;
    the kernel copy (twice as slow on a shifted range) is not called."""
    from workbench.tensors import bytecopy

    monkeypatch.setattr(bytecopy, "BUFFER", PAGE)
    monkeypatch.setattr(bytecopy, "_copy_file_range", lambda *args: pytest.fail("copy_file_range on a shifted range"))
    data = np.random.default_rng(2).integers(0, 256, 10 * PAGE + 123, dtype=np.uint8).tobytes()
    (tmp_path / "source").write_bytes(data)
    with open(tmp_path / "out", "wb") as handle:
        handle.write(b"h" * 8)
        bytecopy.copy_span(bytecopy.FileSpan(tmp_path / "source", 100, len(data) - 100), handle)
        handle.write(b"t")
    assert (tmp_path / "out").read_bytes() == b"h" * 8 + data[100:] + b"t"


def test_a_shifted_range_past_the_end_of_a_shrunk_source_is_one_error(tmp_path):
    from workbench.tensors import bytecopy

    (tmp_path / "source").write_bytes(b"x" * 5000)
    with open(tmp_path / "out", "wb") as handle, pytest.raises(InputError, match="the file shrank"):
        bytecopy.copy_span(bytecopy.FileSpan(tmp_path / "source", 10, 8000), handle)
