"""BatchCapture driven like Megatron's forward_step: micro-batches, DP ranks, evaluation calls."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from workbench_testing import ROOT  # noqa: E402
from workbench.replay import capture as capture_module  # noqa: E402
from workbench.replay.capture import BatchCapture, capture_batch, megatron_forward_step_snippet, to_numpy  # noqa: E402
from workbench.replay.store import CaptureError, CaptureStore  # noqa: E402
from workbench.replay.verify import verify_store  # noqa: E402

SEQ, MBS, DP, MICRO = 6, 2, 2, 3


def megatron_run(out, first_iteration=4, iterations=3, eval_every=1, hook=capture_batch, close=True):
    """Emulate Megatron: MegatronPretrainingSampler slicing, curr_iteration, eval calls in between.

    Returns {iteration: [global batch samples, in sample order]} as (tokens, labels, loss_mask) arrays.
    """
    rng = np.random.default_rng(0)
    expected = {}
    for iteration in range(first_iteration, first_iteration + iterations):
        text = torch.from_numpy(rng.integers(0, 500, (MICRO * MBS * DP, SEQ + 1)))
        loss_mask = torch.from_numpy((rng.random((MICRO * MBS * DP, SEQ)) > 0.2).astype(np.float32))
        expected[iteration] = (text[:, :-1].numpy(), text[:, 1:].numpy(), loss_mask.numpy())
        for micro_batch in range(MICRO):  # forward_step runs once per micro-batch on every rank
            chunk = slice(micro_batch * MBS * DP, (micro_batch + 1) * MBS * DP)
            for rank in range(DP):  # rank r takes chunk[r*mbs:(r+1)*mbs]
                rows = slice(chunk.start + rank * MBS, chunk.start + (rank + 1) * MBS)
                tokens, labels = text[rows, :-1], text[rows, 1:]
                attention_mask = torch.tril(torch.ones(1, 1, SEQ, SEQ)) < 0.5
                position_ids = torch.arange(SEQ).unsqueeze(0).expand(MBS, SEQ)
                hook(out, iteration, tokens, labels, loss_mask[rows], attention_mask, position_ids,
                     dp_rank=rank, dp_world=DP, micro_batches=MICRO, training=True)
                if micro_batch == 1 and eval_every:  # an evaluation forward_step: skipped
                    hook(out, iteration, tokens * 0, labels * 0, loss_mask[rows] * 0, None, None,
                         dp_rank=rank, dp_world=DP, micro_batches=MICRO, training=False)
    if close:
        for capture in list(capture_module._CAPTURES.values()):
            capture.close()
    capture_module._CAPTURES.clear()
    return expected


def test_capture_then_store_reads_back_exactly_in_global_order(tmp_path):
    expected = megatron_run(tmp_path / "cap")
    store = CaptureStore(tmp_path / "cap")
    assert store.layout == "workbench" and store.has_manifest
    assert store.steps == [4, 5, 6] and store.ranks == [0, 1] and store.dp_world == 2
    assert store.fields == ["tokens", "labels", "loss_mask", "attention_mask", "position_ids"]
    for step, (tokens, labels, loss_mask) in expected.items():
        assert all(store.micro_batches(step, rank) == MICRO for rank in store.ranks)
        order = store.global_order(step)
        assert order == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
        batches = [store.read(step, rank, mb, verify=True) for rank, mb in order]
        np.testing.assert_array_equal(np.concatenate([b["tokens"] for b in batches]), tokens)
        np.testing.assert_array_equal(np.concatenate([b["labels"] for b in batches]), labels)
        np.testing.assert_array_equal(np.concatenate([b["loss_mask"] for b in batches]), loss_mask)
        first = batches[0]
        assert first["tokens"].dtype == np.int64 and first["loss_mask"].dtype == np.float32
        assert first["attention_mask"].dtype == np.bool_ and first["attention_mask"].shape == (1, 1, SEQ, SEQ)
    layout = tmp_path / "cap" / "step_5" / "rank_1"
    assert (layout / "tokens.npy").is_file() and (layout / "mb_2" / "tokens.npy").is_file()
    manifest = json.loads((layout / "manifest.json").read_text())
    assert manifest["micro_batches"] == MICRO and manifest["files"]["mb_1/labels.npy"]["shape"] == [MBS, SEQ]
    assert not list((tmp_path / "cap").rglob("*.part"))
    assert verify_store(tmp_path / "cap", vocab_size=500).ok


def test_micro_batches_are_numbered_per_iteration_and_eval_is_skipped(tmp_path):
    capture = BatchCapture(tmp_path, dp_rank=0, dp_world=1)
    batch = (np.zeros((1, 4), np.int64), np.zeros((1, 4), np.int64), np.ones((1, 4), np.float32))
    indices = [capture.record(0, *batch), capture.record(0, *batch), capture.record(0, *batch, training=False),
               capture.record(0, *batch), capture.record(1, *batch), capture.record(1, *batch, training=False),
               capture.record(1, *batch)]
    capture.close()
    assert indices == [0, 1, None, 2, 0, None, 1]  # not a per-call counter
    store = CaptureStore(tmp_path)
    assert [store.micro_batches(step, 0) for step in store.steps] == [3, 2]


def test_killed_capture_leaves_its_last_step_incomplete(tmp_path):
    megatron_run(tmp_path, iterations=2, close=False)  # Megatron announced 3 micro-batches: both steps finalised
    capture = BatchCapture(tmp_path, dp_rank=0, dp_world=DP, micro_batches=MICRO)
    batch = (torch.zeros(MBS, SEQ, dtype=torch.long), torch.zeros(MBS, SEQ, dtype=torch.long), torch.ones(MBS, SEQ))
    capture.record(6, *batch)  # killed after 1 of 3 micro-batches of step 6 on rank 0
    (tmp_path / "step_6" / "rank_0" / ".labels.npy.x1y2.part").write_bytes(b"\x93NUMPY half")
    capture.close()  # even a clean exit cannot make a short step look complete
    store = CaptureStore(tmp_path)
    assert store.steps == [4, 5, 6] and store.is_complete(5) and not store.is_complete(6)
    with pytest.raises(CaptureError, match=r"manifest.json: incomplete step.*half-written \.labels\.npy"):
        store.read(6, 0)
    report = verify_store(tmp_path)
    assert not report.ok
    assert {(p.check, p.step, p.rank) for p in report.errors} == {("incomplete", 6, 0), ("missing", 6, 1)}


def test_without_announced_count_the_last_step_waits_for_close(tmp_path):
    capture = BatchCapture(tmp_path, dp_rank=0, dp_world=1)
    for step in (0, 1):
        capture.record(step, np.zeros((1, 4), np.int64), np.zeros((1, 4), np.int64), np.ones((1, 4), np.float32))
    store = CaptureStore(tmp_path)
    assert store.is_complete(0) and not store.is_complete(1)  # a kill here leaves step 1 incomplete
    capture.close()
    assert CaptureStore(tmp_path).is_complete(1)


def test_rank_from_environment_and_resumed_step_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    capture = BatchCapture(tmp_path)
    assert (capture.dp_rank, capture.dp_world) == (1, 2)
    ids = np.arange(8).reshape(2, 4)
    for _ in range(3):
        capture.record(0, ids, ids + 1, np.ones((2, 4), np.float32))
    capture.close()
    resumed = BatchCapture(tmp_path)  # a restarted run captures step 0 again, with one micro-batch
    resumed.record(0, ids * 2, ids + 1, np.ones((2, 4), np.float32))
    resumed.close()
    store = CaptureStore(tmp_path)
    assert store.ranks == [0, 1] and store.micro_batches(0, 1) == 1
    np.testing.assert_array_equal(store.read(0, 1)["tokens"], ids * 2)
    assert not (tmp_path / "step_0" / "rank_1" / "mb_1").exists()


def test_to_numpy_and_snippet():
    bf16 = torch.ones(2, 3, dtype=torch.bfloat16, requires_grad=True)
    assert to_numpy(bf16).dtype == np.float32 and to_numpy(None) is None
    assert to_numpy([[1, 2]]).dtype.kind == "i"
    assert "get_args().curr_iteration" in megatron_forward_step_snippet
    assert "parallel_state.get_data_parallel_rank()" in megatron_forward_step_snippet
    assert "training=model.training" in megatron_forward_step_snippet


def test_capture_module_does_not_import_torch():
    code = "import sys, workbench.replay.capture, workbench.replay.store; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.stdout.strip() == "False", result.stderr


def test_repeated_causal_mask_is_linked_not_rewritten(tmp_path):
    seq = 1024  # the [1, 1, s, s] bool mask is 1 MiB here, 16 MiB at s = 4096
    causal = np.triu(np.ones((1, 1, seq, seq), bool), 1)
    ids = np.zeros((1, seq), np.int64)
    with BatchCapture(tmp_path, dp_rank=0, dp_world=1, micro_batches=2) as capture:
        for step in (0, 1):
            capture.record(step, ids, ids, np.ones((1, seq), np.float32), causal)
            capture.record(step, ids, ids, np.ones((1, seq), np.float32), ~causal if step else causal)
    files = [tmp_path / "step_0/rank_0/attention_mask.npy", tmp_path / "step_0/rank_0/mb_1/attention_mask.npy",
             tmp_path / "step_1/rank_0/attention_mask.npy", tmp_path / "step_1/rank_0/mb_1/attention_mask.npy"]
    inodes = [path.stat().st_ino for path in files]
    assert inodes[0] == inodes[1] == inodes[2] != inodes[3]
    store = CaptureStore(tmp_path)
    np.testing.assert_array_equal(store.read(1, 0, 0, verify=True)["attention_mask"], causal)
    np.testing.assert_array_equal(store.read(1, 0, 1, verify=True)["attention_mask"], ~causal)
    assert verify_store(tmp_path).ok


def test_pipeline_stage_without_labels_is_refused(tmp_path):
    capture = BatchCapture(tmp_path, dp_rank=0, dp_world=1)
    with pytest.raises(ValueError, match="labels is None.*capture with PP=1"):
        capture.record(0, torch.zeros(1, 4, dtype=torch.long), None, None)
