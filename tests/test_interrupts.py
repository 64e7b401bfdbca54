"""Signals while output is written: SIGTERM (batch schedulers), SIGHUP and Ctrl-C unwind through the
atomic writer, leave no partial file and exit with 128 + signal, on a real `python -m workbench`."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench_testing import ROOT
from workbench.interrupts import Terminated, exit_code, signals_unwind

VOCAB, HIDDEN, FFN, HEADS, KV_HEADS = 1 << 17, 256, 512, 4, 2   # embedding and lm_head: 128 MiB each in fp32


def big_hf_checkpoint(folder: Path) -> Path:
    """A one-layer HF Llama of about 260 MiB: a safetensors header and a body of real bytes (a hole-y file is
    copied by the kernel without moving data, and the conversion would end before a signal can land)."""
    from workbench.reference.config import ModelConfig
    from workbench.reference.hf_io import hf_config

    head_dim = HIDDEN // HEADS
    shapes = {"model.embed_tokens.weight": [VOCAB, HIDDEN], "model.layers.0.input_layernorm.weight": [HIDDEN],
              "model.layers.0.self_attn.q_proj.weight": [HEADS * head_dim, HIDDEN],
              "model.layers.0.self_attn.k_proj.weight": [KV_HEADS * head_dim, HIDDEN],
              "model.layers.0.self_attn.v_proj.weight": [KV_HEADS * head_dim, HIDDEN],
              "model.layers.0.self_attn.o_proj.weight": [HIDDEN, HEADS * head_dim],
              "model.layers.0.post_attention_layernorm.weight": [HIDDEN],
              "model.layers.0.mlp.gate_proj.weight": [FFN, HIDDEN], "model.layers.0.mlp.up_proj.weight": [FFN, HIDDEN],
              "model.layers.0.mlp.down_proj.weight": [HIDDEN, FFN], "model.norm.weight": [HIDDEN],
              "lm_head.weight": [VOCAB, HIDDEN]}
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shapes.items():
        size = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    folder.mkdir()
    weights = folder / "model.safetensors"
    block = bytes(range(1, 129)) * (1 << 13)          # 1 MiB of data, not a hole: copies move real bytes
    with open(weights, "wb") as handle:
        handle.write(len(encoded).to_bytes(8, "little") + encoded)
        for _ in range(offset // len(block)):
            handle.write(block)
        handle.write(block[:offset % len(block)])
    model = ModelConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=HEADS, num_kv_heads=KV_HEADS,
                        ffn_hidden_size=FFN, vocab_size=VOCAB)
    (folder / "config.json").write_text(json.dumps(hf_config(model)))
    return folder


def _default_signals() -> None:
    """In the child: SIGHUP's and SIGINT's default actions, whatever the test runner inherited (under ``nohup``
    SIGHUP is ignored, in a job a non-interactive shell started in the background SIGINT is; the converter
    rightly keeps an ignored signal ignored, and those cases would then finish normally)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_convert(source: Path, destination: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "workbench", "convert", str(source), str(destination),
                             "--to", "mindformers"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals)


def wait_for_partial(folder: Path, process: subprocess.Popen, timeout: float = 120.0) -> Path:
    """The ``.part`` file once the writer has created it (polled every millisecond)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(folder.glob(".*.part"))
        if found:
            return found[0]
        if process.poll() is not None:
            raise AssertionError(f"convert ended ({process.returncode}) before its output appeared: "
                                 f"{process.stderr.read()}")
        time.sleep(0.001)
    process.kill()
    raise AssertionError("no .part file appeared")


@pytest.mark.parametrize("signum, code, line", [
    (signal.SIGTERM, 143, "workbench: terminated by SIGTERM; partial output files were removed"),
    (signal.SIGHUP, 129, "workbench: terminated by SIGHUP; partial output files were removed"),
    (signal.SIGINT, 130, "workbench: interrupted (SIGINT); partial output files were removed"),
])
def test_signal_mid_write_removes_the_partial_output_and_exits_128_plus_signal(tmp_path, signum, code, line):
    source = big_hf_checkpoint(tmp_path / "hf")
    for attempt in range(5):          # byte copies are fast: on a loaded machine the signal can land after the end
        out = tmp_path / f"out{attempt}"
        out.mkdir()
        process = start_convert(source, out / "llama.ckpt")
        partial = wait_for_partial(out, process)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
        if process.returncode != 0:
            break
        assert (out / "llama.ckpt").is_file() and not partial.exists()   # finished first: complete, nothing left
    assert process.returncode == code, stderr
    assert stderr.strip().splitlines()[-1] == line and "Traceback" not in stderr
    assert not partial.exists() and list(out.iterdir()) == []      # neither a .part nor a complete-looking file


def test_the_same_conversion_without_a_signal_completes(tmp_path):
    """The control: the checkpoint above converts (so the test above interrupts real work)."""
    source = big_hf_checkpoint(tmp_path / "hf")
    process = start_convert(source, tmp_path / "llama.ckpt")
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert (tmp_path / "llama.ckpt").stat().st_size > 2 * VOCAB * HIDDEN * 4
    assert not list(tmp_path.glob(".*.part"))


def test_handlers_are_restored_and_ignored_signals_stay_ignored():
    before = signal.getsignal(signal.SIGTERM)
    with signals_unwind():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)        # as under nohup
    try:
        with signals_unwind():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_sigterm_raises_terminated_once_then_the_default_action_is_back():
    with signals_unwind():
        with pytest.raises(Terminated) as raised:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)                            # the handler runs at the next bytecode boundary
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert exit_code(raised.value) == 143 and exit_code(KeyboardInterrupt()) == 130


def test_a_temporary_a_signal_caught_mid_creation_is_removed_at_exit(tmp_path):
    """The window the signal tests above hit now and then: a temporary created, the interrupt raised
    before its writer's clean-up is in place. The record taken before the creation removes it."""
    from workbench.temporaries import new_temporary, remove_leftovers

    file_path, descriptor = new_temporary(tmp_path / "out.ckpt")
    os.close(descriptor)
    folder_path, _ = new_temporary(tmp_path / "hf", folder=True)
    (folder_path / "model.safetensors").write_bytes(b"partial")
    assert file_path.name.startswith(".out.ckpt.") and file_path.exists() and folder_path.is_dir()
    assert set(remove_leftovers()) == {file_path, folder_path}
    assert list(tmp_path.iterdir()) == [] and remove_leftovers() == []
