"""Honest conversions: no silent data loss, never onto the input, verified before it appears, renames copied
byte for byte, and a `weights diff` that streams. Real files, real CLI (``workbench.cli.main.main``)."""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

from workbench import spec
from workbench.cli.main import main
from workbench.convert import diff as diff_module
from workbench.convert import run as run_module
from workbench.errors import InputError
from workbench.tensors import mindspore_ckpt, mindspore_ckpt_read
from workbench.tensors.bytecopy import FileSpan, _read_write, _sendfile, copy_span
from workbench.tensors.safetensors_io import SafetensorsSource
from workbench.tensors.safetensors_write import SafetensorsSink

SIZES = dict(num_layers=2, hidden=16, vocab=40, num_heads=4, num_kv_heads=2, head_dim=4, ffn=24)
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16, "intermediate_size": 24,
             "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "num_hidden_layers": 2,
             "vocab_size": 40, "tie_word_embeddings": False}


def hf_llama(folder, shard_bytes: int | None = 4096, seed: int = 0):
    """A tiny HF Llama folder (sharded safetensors + index + config.json) written with numpy only."""
    arch = spec.load_arch("llama")
    metas = list(spec.expected_metas(arch, "hf", spec.ModelParams(**SIZES), "fp32").values())
    folder.mkdir()
    rng = np.random.default_rng(seed)
    target = folder if shard_bytes else folder / "model.safetensors"
    with SafetensorsSink(target, metas, shard_bytes=shard_bytes) as sink:
        for meta in metas:
            sink.write(meta.name, rng.standard_normal(meta.shape).astype(np.float32))
    (folder / "config.json").write_text(json.dumps(HF_CONFIG))
    return folder


def digest(folder) -> dict:
    """sha256 of every file under ``folder`` (or of the file itself)."""
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def leftovers(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.endswith(".part")]


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# --------------------------------------------------------------------------- --pad-vocab-to

@pytest.mark.parametrize("value", ["39", "0", "-5"])
def test_pad_vocab_below_the_vocabulary_is_refused(tmp_path, capsys, value):
    source = hf_llama(tmp_path / "hf")
    out = tmp_path / "mf.safetensors"
    assert main(["convert", str(source), str(out), "--to", "mindformers", "--pad-vocab-to", value]) == 2
    error = one_line_error(capsys)
    assert "--pad-vocab-to" in error and f"{value} is below the checkpoint's vocabulary of 40" in error
    assert not out.exists() and leftovers(tmp_path) == []


def test_pad_vocab_to_the_vocabulary_itself_is_a_plain_copy(tmp_path):
    source = hf_llama(tmp_path / "hf")
    assert main(["convert", str(source), str(tmp_path / "mf.safetensors"), "--to", "mindformers",
                 "--pad-vocab-to", "40", "--verify"]) == 0


# --------------------------------------------------------------------------- destination = source

def test_destination_that_is_the_source_file_is_refused_by_every_spelling(tmp_path, capsys, monkeypatch):
    source = hf_llama(tmp_path / "hf", shard_bytes=None)
    weights = source / "model.safetensors"
    os.symlink(weights, tmp_path / "link.safetensors")
    os.link(weights, tmp_path / "hard.safetensors")
    before = digest(source)
    monkeypatch.chdir(tmp_path)                  # a relative spelling of the same file
    for destination in (str(weights), "hf/../hf/model.safetensors", str(tmp_path / "link.safetensors"),
                        str(tmp_path / "hard.safetensors")):
        code = main(["convert", str(weights), destination, "--to", "mindformers", "--force", "--verify",
                     "--config", str(source / "config.json")])
        assert code == 2, destination
        error = one_line_error(capsys)
        assert "the same file on disk" in error and "would overwrite" in error
    assert digest(source) == before and leftovers(source) == []


def test_destination_folder_holding_a_source_file_is_refused(tmp_path, capsys):
    source = hf_llama(tmp_path / "hf")
    before = digest(source)
    for destination in (source, tmp_path):           # the source folder itself, and a folder above it
        assert main(["convert", str(source), str(destination), "--to", "mindformers", "--force"]) == 2
        assert "holds the source file" in one_line_error(capsys)
    index = source / "model.safetensors.index.json"
    assert main(["convert", str(index), str(source), "--to", "mindformers", "--force",
                 "--config", str(source / "config.json")]) == 2
    assert "holds the source file" in one_line_error(capsys)
    assert digest(source) == before


# --------------------------------------------------------------------------- verify before rename

def test_output_is_staged_and_verified_before_it_replaces_the_destination(tmp_path, monkeypatch):
    source = hf_llama(tmp_path / "hf")
    out = tmp_path / "mf.ckpt"
    out.write_bytes(b"old output")
    seen = []
    real_verify = run_module.verify

    def spy(plan, source_, output_path, context, destination=None):
        # observing (not replacing) verify: what it reads, and what the destination holds meanwhile
        seen.append((output_path, out.read_bytes()))
        return real_verify(plan, source_, output_path, context, destination)

    monkeypatch.setattr(run_module, "verify", spy)
    assert main(["convert", str(source), str(out), "--to", "mindformers", "--verify", "--force"]) == 0
    [(output_path, during)] = seen
    assert output_path != out and output_path.parent.parent == tmp_path and output_path.name == out.name
    assert during == b"old output"                      # the destination was untouched while verifying
    assert out.read_bytes() != b"old output" and leftovers(tmp_path) == []


@pytest.mark.parametrize("failure", ["mismatch", "interrupt"])
@pytest.mark.parametrize("destination", ["mf.ckpt", "mf.safetensors", "mf_folder"])
def test_failed_or_interrupted_verify_leaves_nothing(tmp_path, capsys, monkeypatch, failure, destination):
    # A real bit mismatch cannot be produced without breaking the writer itself; the comparison is
    # replaced so the clean-up path runs for real (staging folder, rename, CLI exit code).
    if failure == "mismatch":
        monkeypatch.setattr(run_module, "_same_bits", lambda a, b: False)
    else:
        def interrupted(a, b):
            raise KeyboardInterrupt
        monkeypatch.setattr(run_module, "_same_bits", interrupted)
    source = hf_llama(tmp_path / "hf")
    out = tmp_path / destination
    args = ["convert", str(source), str(out), "--to", "mindformers", "--verify"]
    if failure == "mismatch":
        assert main(args) == 2
        assert "does not match its source" in one_line_error(capsys)
    else:
        assert main(args) == 130
    assert not out.exists() and leftovers(tmp_path) == []


def test_verified_folder_replaces_an_existing_folder_only_after_verification(tmp_path):
    source = hf_llama(tmp_path / "hf")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("old output")
    assert main(["convert", str(source), str(out), "--to", "mindformers", "--verify", "--force"]) == 0
    assert not (out / "notes.txt").exists() and (out / "model.safetensors").is_file()
    assert main(["weights", "diff", str(source), str(out), "--format", "csv", "--config", str(source / "config.json")]) == 0
    assert leftovers(tmp_path) == []


# --------------------------------------------------------------------------- renames copied byte for byte

def test_renames_are_planned_as_byte_copies_and_transforms_are_not(tmp_path):
    source = SafetensorsSource(hf_llama(tmp_path / "hf"))
    arch, params = spec.load_arch("llama"), spec.ModelParams(**SIZES)
    plain = spec.build_plan(source.metas(), "hf", "mindformers", arch, params)
    assert all(spec.plan.is_byte_copy(step) for step in plain.steps)
    fused = spec.build_plan(source.metas(), "hf", "mindformers_qkv_concat", arch, params)
    copies = {step.target.name: spec.plan.is_byte_copy(step) for step in fused.steps}
    assert not copies["model.layers.0.attention.w_qkv.weight"] and copies["model.layers.0.attention.wo.weight"]
    cast = spec.build_plan(source.metas(), "hf", "mindformers", arch, params, target_dtype="bf16")
    padded = spec.build_plan(source.metas(), "hf", "mindformers", arch, params, pad_vocab_to=48)
    assert not any(spec.plan.is_byte_copy(step) for step in cast.steps)
    assert [step.target.name for step in padded.steps if not spec.plan.is_byte_copy(step)] == \
        ["model.tok_embeddings.embedding_weight", "lm_head.weight"]


@pytest.mark.parametrize("suffix", [".safetensors", ".ckpt", ""])
def test_byte_copied_output_equals_the_decoded_path_bit_for_bit(tmp_path, monkeypatch, suffix):
    source = hf_llama(tmp_path / "hf")
    fast, slow = tmp_path / f"fast{suffix}", tmp_path / f"slow{suffix}"
    assert main(["convert", str(source), str(fast), "--to", "mindformers", "--verify"]) == 0
    monkeypatch.setattr(run_module, "_byte_span", lambda step, src: None)   # force the decode-and-write path
    assert main(["convert", str(source), str(slow), "--to", "mindformers", "--workers", "3"]) == 0
    fast_files = {p.relative_to(fast).as_posix() if suffix == "" else "": p.read_bytes() for p in
                  ([fast] if suffix else fast.iterdir())}
    slow_files = {p.relative_to(slow).as_posix() if suffix == "" else "": p.read_bytes() for p in
                  ([slow] if suffix else slow.iterdir())}
    assert fast_files == slow_files


def test_ckpt_slices_of_a_copied_span_match_slices_of_an_array(tmp_path, monkeypatch):
    # MindSpore slices tensors over 512 MiB; a tiny slice size exercises the same code on a test-sized tensor
    monkeypatch.setattr(mindspore_ckpt, "SLICE_BYTES", 64)
    data = np.arange(50, dtype=np.float32).reshape(5, 10)
    raw = tmp_path / "raw.bin"
    raw.write_bytes(b"xyz" + data.tobytes())
    meta = spec.expected_metas(spec.load_arch("llama"), "hf", spec.ModelParams(**SIZES))["model.norm.weight"]
    meta = type(meta)("w", (5, 10), "fp32")
    for name, payload in (("a.ckpt", data), ("b.ckpt", FileSpan(raw, 3, data.nbytes))):
        with mindspore_ckpt.MindSporeCkptWriter(tmp_path / name, [meta]) as writer:
            writer.write("w", payload)
    assert (tmp_path / "a.ckpt").read_bytes() == (tmp_path / "b.ckpt").read_bytes()
    assert np.array_equal(mindspore_ckpt_read.MindSporeCkptSource(tmp_path / "b.ckpt").read("w"), data)


def test_copy_span_interleaves_with_buffered_writes_on_every_copy_path(tmp_path):
    raw = tmp_path / "raw.bin"
    raw.write_bytes(bytes(range(256)) * 64)
    for way in (None, _sendfile, _read_write):
        out = tmp_path / "out.bin"
        with open(out, "wb") as handle:
            handle.write(b"head")
            if way is None:
                copy_span(FileSpan(raw, 10, 5000), handle)
            else:
                handle.flush()
                assert way(os.open(raw, os.O_RDONLY), handle.fileno(), 10, 4, 5000) == 5000
                handle.seek(5004)
            handle.write(b"tail")
        assert out.read_bytes() == b"head" + raw.read_bytes()[10:5010] + b"tail"


def test_a_source_that_shrank_after_planning_is_an_error_not_a_short_tensor(tmp_path, capsys):
    raw = tmp_path / "raw.bin"
    raw.write_bytes(b"x" * 100)
    with open(tmp_path / "out.bin", "wb") as handle, pytest.raises(InputError, match="shrank"):
        copy_span(FileSpan(raw, 50, 80), handle)


# --------------------------------------------------------------------------- weights diff

def reference_row(a, b, atol, rtol):
    """What `weights diff` computed before streaming: whole-tensor float64 copies."""
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = x - y
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    equal = np.array_equal(a.view(np.uint8), b.view(np.uint8)) if atol == rtol == 0 else \
        bool(np.all(np.abs(d) <= atol + rtol * np.abs(y)))
    return {"cosine": float(x @ y / (nx * ny)), "l2_diff": float(np.linalg.norm(d)),
            "max_abs_diff": float(np.abs(d).max()), "status": "match" if equal else "mismatch"}


@pytest.mark.parametrize("atol, rtol", [(0.0, 0.0), (1e-3, 0.0), (0.0, 1e-2), (2e-3, 1e-3)])
def test_streamed_diff_gives_the_whole_tensor_results(monkeypatch, atol, rtol):
    monkeypatch.setattr(diff_module, "CHUNK", 1000)    # many chunks on a test-sized tensor
    rng = np.random.default_rng(1)
    a = rng.standard_normal((77, 131)).astype(np.float32)
    b = a + rng.normal(scale=1e-3, size=a.shape).astype(np.float32)
    for other in (a.copy(), b):
        row = diff_module.compare_tensors("w", a, "fp32", other, "fp32", diff_module.Tolerance(atol, rtol))
        want = reference_row(a, other, atol, rtol)
        assert row["status"] == want["status"] and row["max_abs_diff"] == want["max_abs_diff"]
        assert row["cosine"] == pytest.approx(want["cosine"], rel=1e-12)
        assert row["l2_diff"] == pytest.approx(want["l2_diff"], rel=1e-12, abs=1e-300)


def test_streamed_diff_keeps_nan_and_bf16_semantics(monkeypatch):
    monkeypatch.setattr(diff_module, "CHUNK", 7)
    bits = np.arange(0x3F00, 0x3F00 + 50, dtype=np.uint16)
    other = bits.copy()
    other[33] = 0x7FC0                                  # a NaN in the last chunks
    row = diff_module.compare_tensors("w", bits, "bf16", other, "bf16", diff_module.Tolerance(1.0, 0.0))
    assert row["status"] == "mismatch" and np.isnan(row["max_abs_diff"])
    same = diff_module.compare_tensors("w", bits, "bf16", bits.copy(), "bf16", diff_module.Tolerance())
    assert same["status"] == "match" and same["max_abs_diff"] == 0.0 and same["cosine"] == pytest.approx(1.0)


@pytest.mark.parametrize("option, value", [("--atol", "-1"), ("--atol", "nan"), ("--rtol", "inf"), ("--rtol", "-0.5")])
def test_weights_diff_refuses_bad_tolerances(tmp_path, capsys, option, value):
    source = hf_llama(tmp_path / "hf")
    out = tmp_path / "diff.csv"
    assert main(["weights", "diff", str(source), str(source), option, value, "--out", str(out)]) == 2
    error = one_line_error(capsys)
    assert error.count(option) >= 1 and "finite number >= 0" in error and not out.exists()


def test_copy_span_into_a_pipe_streams_in_order(tmp_path):
    raw = tmp_path / "raw.bin"
    raw.write_bytes(bytes(range(256)) * 40)
    read_end, write_end = os.pipe()
    with open(write_end, "wb") as handle:
        handle.write(b"<")
        copy_span(FileSpan(raw, 7, 3000), handle)
        handle.write(b">")
    with open(read_end, "rb") as pipe:
        assert pipe.read() == b"<" + raw.read_bytes()[7:3007] + b">"
