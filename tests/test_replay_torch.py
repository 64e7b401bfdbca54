"""Replay on the torch (reference) side: a DataLoader yields Megatron's get_batch tensors in exactly the
order the MindSpore replay uses (Megatron's global order when regrouped), repeated for epochs."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch replay needs torch (test extra)")

from workbench.replay.capture import BatchCapture  # noqa: E402
from workbench.replay.store import CaptureStore  # noqa: E402
from workbench.replay.torch_replay import TorchReplayDataset, replay_dataloader  # noqa: E402

STEPS, DP, MICRO, MBS, SEQ = 2, 2, 3, 2, 8


@pytest.fixture
def capture(tmp_path):
    rng, written = np.random.default_rng(0), {}
    for rank in range(DP):
        with BatchCapture(tmp_path, dp_rank=rank, dp_world=DP, micro_batches=MICRO) as capture:
            for step in range(STEPS):
                for m in range(MICRO):
                    stream = rng.integers(1, 100, size=(MBS, SEQ + 1))
                    batch = {"tokens": stream[:, :-1], "labels": stream[:, 1:],
                             "loss_mask": (rng.random((MBS, SEQ)) > 0.3).astype(np.float32),
                             "attention_mask": np.triu(np.ones((1, 1, SEQ, SEQ), bool), 1)}
                    capture.record(step, **batch)
                    written[(step, rank, m)] = batch
    return tmp_path, written


def global_batches(written):
    return [written[(s, r, m)] for s in range(STEPS) for m in range(MICRO) for r in range(DP)]


def test_dataloader_replays_the_global_order_as_megatron_tensors(capture):
    folder, written = capture
    loader = replay_dataloader(folder, dp=1, epochs=2)
    got = list(loader)
    expected = global_batches(written) * 2
    assert isinstance(loader.dataset, torch.utils.data.Dataset) and len(got) == len(expected)
    for batch, want in zip(got, expected, strict=False):
        assert batch["tokens"].dtype == batch["labels"].dtype == torch.int64
        assert batch["loss_mask"].dtype == torch.float32 and batch["attention_mask"].dtype == torch.bool
        assert batch["position_ids"] is None  # not captured
        for name in ("tokens", "labels", "loss_mask", "attention_mask"):
            assert np.array_equal(batch[name].numpy(), want[name]), name


def test_each_rank_gets_its_own_micro_batches(capture):
    folder, written = capture
    for rank in range(DP):
        dataset = TorchReplayDataset(CaptureStore(folder), dp=DP, rank=rank)
        positions = [dataset.position(i) for i in range(len(dataset))]
        assert positions == [(s, m) for s in range(STEPS) for m in range(MICRO)]
        for i in range(len(dataset)):
            step, m = dataset.position(i)
            assert np.array_equal(dataset[i]["tokens"].numpy(), written[(step, rank, m)]["tokens"])


def test_regrouped_to_four_ranks_of_one_sample(capture):
    folder, written = capture
    samples = {s: np.concatenate([b["tokens"] for b in global_batches(written)[s * DP * MICRO:(s + 1) * DP * MICRO]])
               for s in range(STEPS)}
    for rank in range(4):
        dataset = TorchReplayDataset(folder, dp=4, rank=rank, micro_batch_size=1)
        for i in range(len(dataset)):
            step, j = dataset.position(i)
            assert np.array_equal(dataset[i]["tokens"].numpy(), samples[step][j * 4 + rank:j * 4 + rank + 1])


def test_same_order_as_the_mindspore_replay(capture):
    pytest.importorskip("mindspore", reason="the MindSpore side needs mindspore (test extra)")
    from workbench.replay.mindspore_replay import replay_dataset

    folder, _ = capture
    torch_tokens = [b["tokens"].numpy() for b in replay_dataloader(folder, dp=1)]
    ms_rows = list(replay_dataset(folder, "legacy", dp=1).create_tuple_iterator(output_numpy=True, num_epochs=1))
    assert len(torch_tokens) == len(ms_rows)
    for tokens, (input_ids, _labels) in zip(torch_tokens, ms_rows, strict=False):
        assert np.array_equal(input_ids[:, :-1], tokens)


def test_dataset_pickles_for_worker_processes(capture):
    dataset = TorchReplayDataset(capture[0], dp=1)
    clone = pickle.loads(pickle.dumps(dataset))
    assert type(clone) is TorchReplayDataset and torch.equal(clone[3]["tokens"], dataset[3]["tokens"])
