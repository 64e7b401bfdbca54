"""Replay in MindSpore: a capture (BatchCapture -> CaptureStore) replays exactly, in order, through the
column contracts of datasets/replay_contracts.yaml; regrouping D=2 -> D'=1 / D'=4 keeps Megatron's
global-batch order; the legacy contract gives the MindSpore reference model the torch reference's loss."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.replay import contracts as C
from workbench.replay.capture import BatchCapture
from workbench.replay.regroup import ReplayIndex, regrouped_batches
from workbench.replay.store import CaptureStore

STEPS, DP, MICRO, MBS, SEQ, VOCAB = 3, 2, 3, 2, 8, 97


def megatron_batch(rng, mbs=MBS, seq=SEQ, vocab=VOCAB, shifted=True):
    stream = rng.integers(1, vocab, size=(mbs, seq + 1))
    labels = stream[:, 1:].copy() if shifted else rng.integers(1, vocab, size=(mbs, seq))
    mask = (rng.random((mbs, seq)) >= 0.3).astype(np.float32)
    mask[:, 0] = 1.0
    return {"tokens": stream[:, :-1].copy(), "labels": labels, "loss_mask": mask,
            "attention_mask": np.triu(np.ones((1, 1, seq, seq), bool), 1),
            "position_ids": np.tile(np.arange(seq), (mbs, 1))}


def write_capture(folder, steps=STEPS, dp=DP, micro=MICRO, seed=0, **batch_options):
    """Megatron-shaped micro-batches through the real capture; returns {(step, rank, mb): batch}."""
    rng, written = np.random.default_rng(seed), {}
    for rank in range(dp):
        with BatchCapture(folder, dp_rank=rank, dp_world=dp, micro_batches=micro) as capture:
            for step in range(steps):
                for m in range(micro):
                    batch = megatron_batch(rng, **batch_options)
                    capture.record(step, **batch)
                    capture.record(step, **batch, training=False)  # an eval call: skipped
                    written[(step, rank, m)] = batch
    return written


def global_order(written, step, dp=DP, micro=MICRO):
    return [written[(step, r, m)] for m in range(micro) for r in range(dp)]


@pytest.fixture
def capture(tmp_path):
    return tmp_path / "capture", write_capture(tmp_path / "capture")


# ------------------------------------------------------------------ contracts (numpy only)
def test_legacy_columns_layout():
    batch = megatron_batch(np.random.default_rng(1))
    batch["loss_mask"][0, 3] = 0
    out = C.legacy_columns(batch)
    assert list(out) == ["input_ids", "labels"] and out["input_ids"].shape == (MBS, SEQ + 1)
    assert np.array_equal(out["input_ids"][:, :-1], batch["tokens"])
    assert np.array_equal(out["input_ids"][:, -1], batch["labels"][:, -1])
    model_labels = out["labels"][:, 1:]  # what the legacy model reads
    assert np.array_equal(model_labels[batch["loss_mask"] == 1], batch["labels"][batch["loss_mask"] == 1])
    assert np.all(model_labels[batch["loss_mask"] == 0] == -100) and model_labels[0, 3] == -100
    # pretraining data: the model's own slice input_ids[:, 1:] equals the labels too
    assert np.array_equal(out["input_ids"][:, 1:], batch["labels"])


def test_ms_train_uses_the_one_implementation():
    pytest.importorskip("mindspore", reason="ms_train imports mindspore")
    from workbench.reference import ms_train

    assert ms_train.input_ids_from_megatron is C.input_ids_from_megatron


def test_check_shifted_labels():
    rng = np.random.default_rng(2)
    assert C.check_shifted_labels(megatron_batch(rng)) == C.ShiftCheck(True, 0, None)
    sft = megatron_batch(rng)
    sft["labels"][1, 4] = sft["tokens"][1, 5] + 1
    check = C.check_shifted_labels(sft)
    assert not check.ok and check.mismatches == 1 and check.first == (1, 4)


def test_contracts_file_declares_both_contracts():
    contracts = C.load_contracts()
    assert contracts["legacy"].column_names == ["input_ids", "labels"]
    assert contracts["new"].column_names == ["input_ids", "labels", "loss_mask", "position_ids"]
    assert contracts["legacy"].args == {"ignore_id": -100}
    batch = megatron_batch(np.random.default_rng(3))
    del batch["position_ids"]  # the field's original snippet captures none: arange, as Megatron builds them
    new = contracts["new"].apply(batch)
    assert new["position_ids"].dtype == np.int32 and np.array_equal(new["position_ids"][1], np.arange(SEQ))


@pytest.mark.parametrize("edit, message", [
    ("transform: legacy_columns", "unknown transform 'nope'"),
    ("dtype: float32, shape: [mbs, s]}", "dtype 'float8' is not supported"),
    ("shape: [mbs, s+1]}\n  new", "shape item 'q+1' is not"),
    ("transform: new_style_columns", "unknown key 'colour'"),
])
def test_contract_mistakes_name_file_and_line(tmp_path, edit, message):
    text = C.contracts_path().read_text(encoding="utf-8")
    broken = {"transform: legacy_columns": text.replace("transform: legacy_columns", "transform: nope"),
              "dtype: float32, shape: [mbs, s]}": text.replace("dtype: float32", "dtype: float8"),
              "shape: [mbs, s+1]}\n  new": text.replace("shape: [mbs, s+1]}\n  new", "shape: [mbs, q+1]}\n  new"),
              "transform: new_style_columns": text.replace("transform: new_style_columns",
                                                           "transform: new_style_columns\n    colour: red")}[edit]
    path = tmp_path / "replay_contracts.yaml"
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(InputError) as error:
        C.load_contracts(path)
    assert message in str(error.value) and f"{path}:" in str(error.value)
    line = int(str(error.value).split(f"{path}:")[1].split()[0])
    assert line == 1 + next(i for i, row in enumerate(broken.splitlines())
                            if ("nope" in row or "float8" in row or "q+1" in row or "colour" in row))


def test_unknown_contract_name():
    with pytest.raises(InputError, match="no replay contract 'old'"):
        C.get_contract("old")


# ------------------------------------------------------------------ regrouping (numpy only)
def test_regroup_d2_to_d1_is_the_global_batch_in_order(capture):
    folder, written = capture
    got = list(regrouped_batches(CaptureStore(folder), target_dp=1, target_rank=0))
    expected = [(step, i, batch) for step in range(STEPS) for i, batch in enumerate(global_order(written, step))]
    assert [(s, i) for s, i, _ in got] == [(s, i) for s, i, _ in expected]
    for (_, _, batch), (_, _, want) in zip(got, expected, strict=False):
        assert all(np.array_equal(batch[k], want[k]) for k in want)


def test_regroup_d2_to_d2_gives_each_rank_its_own_micro_batches(capture):
    folder, written = capture
    for rank in range(DP):
        got = list(regrouped_batches(folder, target_dp=DP, target_rank=rank))
        assert [(s, m) for s, m, _ in got] == [(s, m) for s in range(STEPS) for m in range(MICRO)]
        for step, m, batch in got:
            assert np.array_equal(batch["tokens"], written[(step, rank, m)]["tokens"])


def test_regroup_d2_to_d4_with_micro_batch_size_1(capture):
    folder, written = capture
    per_rank = [list(regrouped_batches(folder, target_dp=4, target_rank=r, micro_batch_size=1)) for r in range(4)]
    samples_per_step = DP * MICRO * MBS  # 12 -> 3 micro-batches of 1 sample per target rank
    assert all(len(batches) == STEPS * samples_per_step // 4 for batches in per_rank)
    for step in range(STEPS):
        glob = {k: np.concatenate([b[k] for b in global_order(written, step)]) for k in ("tokens", "loss_mask")}
        for rank, batches in enumerate(per_rank):
            mine = [b for s, _, b in batches if s == step]
            for j, batch in enumerate(mine):  # Megatron's rule: chunk j of mbs'·D', rank r' takes row r'
                sample = j * 4 + rank
                assert np.array_equal(batch["tokens"], glob["tokens"][sample:sample + 1])
                assert np.array_equal(batch["loss_mask"], glob["loss_mask"][sample:sample + 1])
                assert batch["attention_mask"].shape == (1, 1, SEQ, SEQ)  # shared causal mask, not sliced


@pytest.mark.parametrize("kwargs, message", [
    ({"target_dp": 4}, "do not split over dp=4"),
    ({"target_dp": 1, "micro_batch_size": 5}, "does not split into micro-batches of 5"),
    ({"target_dp": 2, "target_rank": 2}, "outside dp=2"),
    ({"target_dp": 0}, "replay dp: expected an integer >= 1"),
])
def test_regroup_refuses_impossible_splits(capture, kwargs, message):
    with pytest.raises(InputError, match=message):
        ReplayIndex(capture[0], **kwargs)


def test_index_reads_no_tensor(capture, monkeypatch):
    reads = []
    original = CaptureStore.read
    monkeypatch.setattr(CaptureStore, "read", lambda self, *a, **k: reads.append(a) or original(self, *a, **k))
    index = ReplayIndex(capture[0], target_dp=1, epochs=2)
    assert len(index) == 2 * STEPS * DP * MICRO and reads == []
    assert index.locate(len(index) - 1) == (STEPS - 1, DP * MICRO - 1)
    index = ReplayIndex(capture[0], target_dp=4, micro_batch_size=1)  # the captured mbs from .npy headers
    assert len(index) == STEPS * DP * MICRO * MBS // 4 and reads == []


def test_batch_size_ramp_up_needs_uniform_false(tmp_path):
    rng = np.random.default_rng(4)
    with BatchCapture(tmp_path, dp_rank=0, dp_world=1) as capture:  # step 0: 1 micro-batch, step 1: 3
        for step, count in ((0, 1), (1, 3)):
            for _ in range(count):
                capture.record(step, **megatron_batch(rng))
    with pytest.raises(InputError, match="3 micro-batches in the global batch, step 0 has 1.*uniform=False"):
        list(regrouped_batches(tmp_path))
    index = ReplayIndex(tmp_path, uniform=False)
    assert index.counts == [1, 3] and [index.locate(i) for i in range(len(index))] == [(0, 0), (1, 0), (1, 1), (1, 2)]


# ------------------------------------------------------------------ MindSpore GeneratorDataset
def rows(dataset):
    return list(dataset.create_tuple_iterator(output_numpy=True, num_epochs=1))


@pytest.mark.parametrize("epochs", [1, 2])
def test_legacy_replay_yields_the_stored_arrays_in_order(capture, epochs):
    pytest.importorskip("mindspore", reason="the MindSpore replay needs mindspore (test extra)")
    from workbench.replay.mindspore_replay import replay_dataset

    folder, written = capture
    for rank in range(DP):
        dataset = replay_dataset(folder, "legacy", dp=DP, rank=rank, epochs=epochs)
        assert dataset.get_col_names() == ["input_ids", "labels"]
        got = rows(dataset)
        expected = [written[(s, rank, m)] for s in range(STEPS) for m in range(MICRO)] * epochs
        assert len(got) == len(expected) == dataset.get_dataset_size()
        for (input_ids, labels), batch in zip(got, expected, strict=False):
            want = C.legacy_columns(batch)
            assert input_ids.dtype == labels.dtype == np.int32
            assert np.array_equal(input_ids, want["input_ids"]) and np.array_equal(labels, want["labels"])
            assert np.array_equal(input_ids[:, :-1], batch["tokens"])


def test_new_contract_yields_the_captured_tensors(capture):
    pytest.importorskip("mindspore", reason="the MindSpore replay needs mindspore (test extra)")
    from workbench.replay.mindspore_replay import replay_dataset

    folder, written = capture
    dataset = replay_dataset(folder, "new", dp=1, epochs=2)
    assert dataset.get_col_names() == ["input_ids", "labels", "loss_mask", "position_ids"]
    expected = [b for s in range(STEPS) for b in global_order(written, s)] * 2
    got = rows(dataset)
    assert len(got) == len(expected)
    for (input_ids, labels, loss_mask, position_ids), batch in zip(got, expected, strict=False):
        assert np.array_equal(input_ids, batch["tokens"]) and np.array_equal(labels, batch["labels"])
        assert loss_mask.dtype == np.float32 and np.array_equal(loss_mask, batch["loss_mask"])
        assert np.array_equal(position_ids, batch["position_ids"])


def test_per_step_rows_concatenate_the_micro_batches_in_order(capture):
    pytest.importorskip("mindspore", reason="the MindSpore replay needs mindspore (test extra)")
    from workbench.replay.mindspore_replay import replay_dataset

    folder, written = capture
    got = rows(replay_dataset(folder, "new", dp=1, per_step=True))
    assert len(got) == STEPS
    for step, (input_ids, *_rest) in enumerate(got):
        assert np.array_equal(input_ids, np.concatenate([b["tokens"] for b in global_order(written, step)]))


# ------------------------------------------------------------------ the legacy contract computes Megatron's loss
def test_legacy_contract_gives_the_torch_reference_loss(tmp_path):
    pytest.importorskip("torch", reason="the torch reference needs torch (test extra)")
    pytest.importorskip("mindspore", reason="the MindSpore reference needs mindspore (test extra)")
    import mindspore as ms
    import torch
    from test_reference_cross import megatron_to_mindformers

    from workbench.reference import ms_model, torch_model, torch_train
    from workbench.reference.config import ModelConfig, PrecisionConfig
    from workbench.replay.mindspore_replay import replay_dataset

    config = ModelConfig()
    folder = tmp_path / "capture"
    written = write_capture(folder, steps=2, dp=2, micro=2, seq=config.seq_length, vocab=config.vocab_size)
    sft = write_capture(tmp_path / "sft", steps=1, dp=1, micro=1, seq=config.seq_length, vocab=config.vocab_size,
                        shifted=False, seed=5)  # labels are not the shifted tokens: still exact
    torch_net = torch_model.build_model(config, PrecisionConfig(), seed=11)
    ms_net = ms_model.build_model(config, seed=11)
    ms_model.set_weights(ms_net, megatron_to_mindformers(torch_train.weights_as_numpy(torch_net), config))
    ms_net.set_train(True)
    cases = [(folder, [b for s in range(2) for b in global_order(written, s, dp=2, micro=2)]),
             (tmp_path / "sft", [sft[(0, 0, 0)]])]
    for capture_dir, originals in cases:
        replayed = rows(replay_dataset(capture_dir, "legacy", dp=1))
        assert len(replayed) == len(originals)
        for (input_ids, labels), batch in zip(replayed, originals, strict=False):
            assert (batch["loss_mask"] == 0).any()
            with torch.no_grad():
                logits = torch_net(torch.as_tensor(batch["tokens"]))
                expected = float(torch_model.loss_fn(logits, torch.as_tensor(batch["labels"]),
                                                     torch.as_tensor(batch["loss_mask"])))
            loss = float(ms_net(ms.Tensor(input_ids), ms.Tensor(labels)).asnumpy())
            assert abs(loss - expected) / abs(expected) < 1e-5, (capture_dir.name, loss, expected)
