"""Outputs that are mostly copied byte ranges reserve their blocks before the copy (``AtomicFile.reserve``,
Linux ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``): the file then holds exactly the bytes written (blocks
reserved past the end are freed at commit), a device, pipe or failing file system is never reserved, and
an aborted write leaves nothing. Real files, real writers, real ``convert``."""
from __future__ import annotations

import os

import numpy as np
import pytest

from test_convert_safety import hf_llama
from workbench.cli.main import main
from workbench.blocks import reserve_blocks
from workbench.fileio import PREALLOCATE_FROM, AtomicFile
from workbench.tensors import mindspore_ckpt, safetensors_write
from workbench.tensors.bytecopy import FileSpan
from workbench.tensors.safetensors_io import SafetensorsSource
from workbench.tensors.safetensors_write import SafetensorsSink

MIB = 2**20


def fallocate_works(folder) -> bool:
    descriptor = os.open(folder / "probe", os.O_WRONLY | os.O_CREAT)
    try:
        return reserve_blocks(descriptor, MIB)
    finally:
        os.close(descriptor)
        os.unlink(folder / "probe")


@pytest.fixture
def reservations(tmp_path, monkeypatch):
    """Every reserve() call as (size, reserved), the real method run; the threshold is lowered to one byte
    so that a test-sized checkpoint crosses it (it is a tuning constant, 64 MiB, not behaviour)."""
    if not fallocate_works(tmp_path):
        pytest.skip("the file system under tmp_path has no fallocate")
    calls: list[tuple[int, bool]] = []
    real = AtomicFile.reserve

    def recorded(self, size):
        reserved = real(self, size)
        calls.append((size, reserved))
        return reserved

    monkeypatch.setattr(AtomicFile, "reserve", recorded)
    for module in (safetensors_write, mindspore_ckpt):
        monkeypatch.setattr(module, "PREALLOCATE_FROM", 1)
    return calls


def test_blocks_reserved_past_the_end_are_freed_at_commit(tmp_path):
    if not fallocate_works(tmp_path):
        pytest.skip("the file system under tmp_path has no fallocate")
    output = AtomicFile(tmp_path / "out.bin")
    output.handle.write(b"a" * 1000)
    assert output.reserve(32 * MIB)
    output.handle.flush()
    reserved = os.stat(output.temporary)
    assert reserved.st_size == 1000 and reserved.st_blocks * 512 >= 32 * MIB      # reserved, size unchanged
    output.commit()
    final = os.stat(tmp_path / "out.bin")
    assert final.st_size == 1000 and final.st_blocks * 512 < MIB
    assert (tmp_path / "out.bin").read_bytes() == b"a" * 1000


def test_devices_pipes_and_impossible_sizes_are_never_reserved(tmp_path):
    with AtomicFile("/dev/null") as output:            # written directly: nothing to reserve, nothing renamed
        assert output.streaming and output.reserve(32 * MIB) is False
        output.handle.write(b"x")
    read_end, write_end = os.pipe()
    try:
        assert reserve_blocks(write_end, MIB) is False                 # ESPIPE: no exception, no change
    finally:
        os.close(read_end)
        os.close(write_end)
    (tmp_path / "ro.bin").write_bytes(b"")
    descriptor = os.open(tmp_path / "ro.bin", os.O_RDONLY)
    try:
        assert reserve_blocks(descriptor, MIB) is False                # EBADF: not open for writing
        assert reserve_blocks(descriptor, 2**70) is False              # past int64: refused before the call
        assert reserve_blocks(descriptor, 0) is False
    finally:
        os.close(descriptor)
    assert os.path.getsize(tmp_path / "ro.bin") == 0


@pytest.mark.parametrize("suffix", [".safetensors", ".ckpt"])
def test_a_byte_copied_conversion_reserves_its_blocks_and_writes_exactly_its_bytes(tmp_path, reservations,
                                                                                    monkeypatch, suffix):
    source = hf_llama(tmp_path / "hf")
    reserved_out = tmp_path / f"reserved{suffix}"
    assert main(["convert", str(source), str(reserved_out), "--to", "mindformers", "--verify"]) == 0
    assert len(reservations) == 1 and reservations[0][1]
    size = reserved_out.stat().st_size
    # safetensors knows its exact size; the .ckpt reserves an upper bound (padding) and is cut to what it wrote
    assert reservations[0][0] == size if suffix == ".safetensors" else reservations[0][0] >= size
    assert reserved_out.stat().st_blocks * 512 < size + MIB
    for module in (safetensors_write, mindspore_ckpt):
        monkeypatch.setattr(module, "PREALLOCATE_FROM", 2**62)
    plain_out = tmp_path / f"plain{suffix}"
    assert main(["convert", str(source), str(plain_out), "--to", "mindformers"]) == 0
    assert len(reservations) == 1                                      # below the threshold: no reservation
    assert reserved_out.read_bytes() == plain_out.read_bytes()


def test_a_reserved_ckpt_loads_in_mindspore(tmp_path, reservations):
    mindspore = pytest.importorskip("mindspore")
    source = hf_llama(tmp_path / "hf")
    assert main(["convert", str(source), str(tmp_path / "out.ckpt"), "--to", "mindformers"]) == 0
    assert reservations and reservations[0][1]
    loaded = mindspore.load_checkpoint(str(tmp_path / "out.ckpt"))
    original = SafetensorsSource(source)
    assert np.array_equal(loaded["model.norm_out.weight"].asnumpy(), original.read("model.norm.weight"))
    assert len(loaded) == len(original.metas())


@pytest.mark.parametrize("failure", [RuntimeError, KeyboardInterrupt])
def test_an_aborted_reserved_write_leaves_nothing(tmp_path, reservations, failure):
    source = SafetensorsSource(hf_llama(tmp_path / "hf", shard_bytes=None))
    metas = list(source.metas().values())
    spans = {meta.name: source.span(meta.name) for meta in metas}
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(failure):
        with SafetensorsSink(out / "x.safetensors", metas, aligned_to={n: s.offset for n, s in spans.items()}) as sink:
            sink.write(metas[0].name, spans[metas[0].name])
            raise failure()
    assert reservations and reservations[0][1]
    assert list(out.iterdir()) == []


def test_copied_bytes_below_the_threshold_reserve_nothing(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(AtomicFile, "reserve", lambda self, size: calls.append(size) or False)   # observe only
    raw = tmp_path / "raw.bin"
    raw.write_bytes(bytes(4096))
    meta = mindspore_ckpt.TensorMeta("w", (1024,), "fp32")
    with mindspore_ckpt.MindSporeCkptWriter(tmp_path / "a.ckpt", [meta], copied=["w"]) as writer:
        writer.write("w", FileSpan(raw, 0, 4096))
    assert calls == [] and PREALLOCATE_FROM >= MIB


def test_every_reserved_shard_is_its_exact_size_and_loads(tmp_path, reservations):
    from safetensors.numpy import load_file

    source = SafetensorsSource(hf_llama(tmp_path / "hf", shard_bytes=None))
    metas = list(source.metas().values())
    spans = {meta.name: source.span(meta.name) for meta in metas}
    out = tmp_path / "out"
    with SafetensorsSink(out, metas, shard_bytes=4096, aligned_to={n: s.offset for n, s in spans.items()}) as sink:
        for meta in metas:                                # each finished shard is closed before the commit
            sink.write(meta.name, spans[meta.name])
    shards = sorted(out.glob("*.safetensors"))
    assert len(shards) > 2 and len(reservations) == len(shards) and all(ok for _, ok in reservations)
    loaded = {}
    for shard, (reserved, _) in zip(shards, reservations, strict=True):
        assert shard.stat().st_size == reserved and shard.stat().st_blocks * 512 < reserved + MIB
        loaded.update(load_file(shard))
    assert loaded.keys() == source.metas().keys()
    assert all(np.array_equal(loaded[name], source.read(name)) for name in loaded)
