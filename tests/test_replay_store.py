"""CaptureStore (lazy, layouts from datasets/), bad input, verify_store, show_batch, diff_stores."""
from __future__ import annotations

import builtins
import json
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.replay.capture import BatchCapture
from workbench.replay.diff_data import diff_stores
from workbench.replay.layout import load_knowledge
from workbench.replay.show import show_batch
from workbench.replay.store import CaptureError, CaptureStore
from workbench.replay.verify import verify_store


def batch(step: int, rank: int, micro_batch: int = 0, mbs: int = 2, seq: int = 8):
    """A Megatron-like micro-batch: labels are the tokens shifted by one; loss_mask masks the last two."""
    text = (np.arange(mbs * (seq + 1)).reshape(mbs, seq + 1) + 100 * step + 10 * rank + micro_batch) % 97
    loss_mask = np.ones((mbs, seq), np.float32)
    loss_mask[:, -2:] = 0
    return text[:, :-1].astype(np.int64), text[:, 1:].astype(np.int64), loss_mask


def field_capture(root: Path, steps=(0, 1, 2), ranks=(0, 1)) -> Path:
    """What the field's snippet wrote: plain np.save per field, no manifest, one micro-batch per step."""
    for step in steps:
        for rank in ranks:
            folder = root / f"step_{step}" / f"rank_{rank}"
            folder.mkdir(parents=True)
            tokens, labels, loss_mask = batch(step, rank)
            for name, array in (("tokens", tokens), ("labels", labels), ("loss_mask", loss_mask),
                                ("attention_mask", np.tril(np.ones((1, 1, 8, 8))) < 0.5)):
                np.save(folder / f"{name}.npy", array)
    return root


def workbench_capture(root: Path, steps=(0, 1), dp=2, micro=2) -> Path:
    for rank in range(dp):
        with BatchCapture(root, dp_rank=rank, dp_world=dp, micro_batches=micro) as capture:
            for step in steps:
                for micro_batch in range(micro):
                    capture.record(step, *batch(step, rank, micro_batch))
    return root


def test_field_snippet_capture_reads_without_manifest(tmp_path):
    store = CaptureStore(field_capture(tmp_path))
    assert store.layout == "megatron_field" and not store.has_manifest
    assert store.steps == [0, 1, 2] and store.ranks == [0, 1] and store.dp_world == 2
    assert store.micro_batches(1, 1) == 1 and store.global_order(1) == [(0, 0), (1, 0)]
    arrays = store.read(2, 1)
    assert set(arrays) == {"tokens", "labels", "loss_mask", "attention_mask"}
    np.testing.assert_array_equal(arrays["tokens"], batch(2, 1)[0])
    assert verify_store(tmp_path, vocab_size=97).ok


def test_constructor_opens_no_file(tmp_path, monkeypatch):
    workbench_capture(tmp_path, steps=range(20))

    def forbidden(*args, **kwargs):
        raise AssertionError(f"opened at init: {args[:1]}")

    monkeypatch.setattr(builtins, "open", forbidden)
    monkeypatch.setattr(np, "load", forbidden)
    store = CaptureStore(tmp_path)
    assert store.steps == list(range(20)) and store.layout == "workbench" and store.has_manifest
    monkeypatch.undo()
    assert store.ranks == [0, 1] and store.micro_batches(19, 1) == 2


def test_global_order_is_megatron_sampler_order(tmp_path):
    store = CaptureStore(workbench_capture(tmp_path, dp=2, micro=3))
    assert store.global_order(0) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]


def test_a_layout_declared_in_yaml_only(tmp_path):
    knowledge_dir = tmp_path / "knowledge"
    knowledge_dir.mkdir()
    (knowledge_dir / "megatron_capture.yaml").write_text(
        (Path(__file__).resolve().parents[1] / "datasets" / "megatron_capture.yaml").read_text()
        + "  padded:\n    marker: null\n    step_dir: iter_{step:07d}\n    rank_dir: dp{rank}\n"
          "    micro_batch_0: \"{field}.npy\"\n    micro_batch_m: null\n    manifest: null\n")
    knowledge = load_knowledge(knowledge_dir)
    layout = knowledge.layouts["padded"]
    for step in (0, 1):
        folder = tmp_path / "cap" / layout.step_name(step) / layout.rank_name(0)
        folder.mkdir(parents=True)
        for name, array in zip(("tokens", "labels", "loss_mask"), batch(step, 0), strict=False):
            np.save(folder / layout.file(name), array)
    store = CaptureStore(tmp_path / "cap", knowledge=knowledge)
    assert store.layout == "padded" and store.steps == [0, 1]
    assert (tmp_path / "cap" / "iter_0000001" / "dp0" / "tokens.npy").is_file()
    np.testing.assert_array_equal(store.read(1, 0)["labels"], batch(1, 0)[1])


def test_a_mistake_in_the_layout_yaml_names_file_and_line(tmp_path):
    text = (Path(__file__).resolve().parents[1] / "datasets" / "megatron_capture.yaml").read_text()
    (tmp_path / "megatron_capture.yaml").write_text(text.replace("labels:         {required: true,  dtype: integer",
                                                                 "labels:         {required: true,  dtype: integr"))
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.strip().startswith("labels:"))
    with pytest.raises(InputError, match=rf"megatron_capture.yaml:{line} \[fields.labels\]: dtype must be one or more"):
        load_knowledge(tmp_path)


def corrupt(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-7])


@pytest.mark.parametrize("damage, read_at, message, named", [
    (lambda root: __import__("shutil").rmtree(root / "step_1"), (1, 0), r"step 1 not captured.*missing: 1", "step_1"),
    (lambda root: __import__("shutil").rmtree(root / "step_2" / "rank_1"), (2, 1), r"rank folder missing", "step_2/rank_1"),
    (lambda root: corrupt(root / "step_1" / "rank_0" / "labels.npy"), (1, 0), r"truncated or corrupt \.npy",
     "step_1/rank_0/labels.npy"),
    (lambda root: np.save(root / "step_2" / "rank_0" / "labels.npy", np.zeros((2, 9), np.int64)), (2, 0),
     r"labels shape \[2, 9\] disagrees with tokens shape \[2, 8\] \(seq = 9 here, 8 there\)", "step_2/rank_0/labels.npy"),
    (lambda root: [np.save(root / "step_2" / "rank_0" / f"{n}.npy", np.zeros((2, 9), np.int64))
                   for n in ("tokens", "labels", "loss_mask")], (2, 0), r"differs from step 0's \[2, 8\]",
     "step_2/rank_0/tokens.npy"),
    (lambda root: np.save(root / "step_1" / "rank_1" / "tokens.npy", np.zeros((2, 8), np.float32)), (1, 1),
     r"dtype float32 is not integer \(expected int64\)", "step_1/rank_1/tokens.npy"),
])
def test_bad_field_capture_one_line_errors(tmp_path, damage, read_at, message, named):
    damage(field_capture(tmp_path))
    with pytest.raises(CaptureError, match=message) as error:
        CaptureStore(tmp_path).read(*read_at)
    assert named in error.value.where and "\n" not in str(error.value)
    assert not verify_store(tmp_path).ok


def test_mismatched_manifest(tmp_path):
    root = workbench_capture(tmp_path)
    tokens = root / "step_1" / "rank_0" / "mb_1" / "tokens.npy"
    np.save(tokens, np.load(tokens)[::-1].copy())  # same shape and dtype, other content
    CaptureStore(root).read(1, 0, 1)  # the manifest's shapes still hold
    with pytest.raises(CaptureError, match="sha256 .* differs from manifest.json") as error:
        CaptureStore(root).read(1, 0, 1, verify=True)
    assert error.value.where.endswith("step_1/rank_0/mb_1/tokens.npy")
    manifest = root / "step_0" / "rank_1" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["files"]["labels.npy"]["shape"] = [2, 16]
    manifest.write_text(json.dumps(data))
    with pytest.raises(CaptureError, match=r"holds int64 \[2, 8\], manifest.json says int64 \[2, 16\]"):
        CaptureStore(root).read(0, 1)
    report = verify_store(root)
    assert {(p.check, p.step, p.rank, p.micro_batch) for p in report.errors} == {("manifest", 1, 0, 1),
                                                                                  ("manifest", 0, 1, 0)}


def test_verify_finds_out_of_range_ids_and_broken_shift_with_positions(tmp_path):
    root = field_capture(tmp_path)
    tokens, labels, loss_mask = batch(1, 0)
    tokens[1, 5] = 500  # out of a 97-token vocabulary
    labels[0, 3] = 50  # labels[0, 3] should be tokens[0, 4]
    np.save(root / "step_1" / "rank_0" / "tokens.npy", tokens)
    np.save(root / "step_1" / "rank_0" / "labels.npy", labels)
    np.save(root / "step_2" / "rank_1" / "loss_mask.npy", np.zeros_like(loss_mask))
    report = verify_store(root, vocab_size=97)
    by_check = {p.check: p for p in report.problems}
    assert by_check["token_range"].position == (1, 5) and "tokens[1, 5] = 500" in by_check["token_range"].message
    shift = [p for p in report.problems if p.check == "label_shift"]
    assert [(p.position, p.step, p.rank, p.micro_batch) for p in shift] == [((0, 3), 1, 0, 0)]
    assert shift[0].message.startswith("2 position(s)")  # labels[1, 4] no longer matches the changed token
    assert "labels[0, 3] = 50 but tokens[0, 4] = 7" in shift[0].message
    assert by_check["loss_mask"].severity == "warning" and (by_check["loss_mask"].step, by_check["loss_mask"].rank) == (2, 1)
    frame = report.loss_mask_frame()
    assert list(frame.columns) == ["step", "rank", "micro_batches", "positions", "masked", "fraction_masked"]
    assert frame.set_index(["step", "rank"]).loc[(0, 0), "fraction_masked"] == pytest.approx(0.25)
    assert frame.set_index(["step", "rank"]).loc[(2, 1), "fraction_masked"] == 1.0
    assert not report.ok and report.id_range == (0, 500)


def test_diff_finds_the_first_differing_position_and_only_in_steps(tmp_path):
    a = workbench_capture(tmp_path / "a", steps=(0, 1, 2))
    b = workbench_capture(tmp_path / "b", steps=(1, 2, 3))
    assert diff_stores(a, a).identical
    labels = b / "step_2" / "rank_1" / "mb_1" / "labels.npy"
    changed = np.load(labels)
    changed[1, 6] += 1
    changed[1, 7] += 1
    np.save(labels, changed)
    diff = diff_stores(a, b)
    assert diff.mode == "rank" and diff.only_in_a == [0] and diff.only_in_b == [3]
    first = diff.first
    assert (first.step, first.rank, first.micro_batch, first.field, first.position, first.count) == (
        2, 1, 1, "labels", (1, 6), 2)
    assert first.b == first.a + 1
    assert diff.steps_compared == 2 and diff.steps_identical == 1
    assert {row.status for row in diff.rows} == {"only in A", "only in B", "differs"}


def test_diff_by_global_batch_across_dp_sizes(tmp_path):
    dp2 = workbench_capture(tmp_path / "dp2", steps=(0,), dp=2, micro=2)
    store = CaptureStore(dp2)
    with BatchCapture(tmp_path / "dp1", dp_rank=0, dp_world=1, micro_batches=4) as single:
        for rank, micro_batch in store.global_order(0):  # what a single card consumed, in global order
            arrays = store.read(0, rank, micro_batch)
            single.record(0, arrays["tokens"], arrays["labels"], arrays["loss_mask"])
    diff = diff_stores(dp2, tmp_path / "dp1")
    assert diff.mode == "global" and diff.identical
    tokens = tmp_path / "dp1" / "step_0" / "rank_0" / "mb_2" / "tokens.npy"  # global samples 4-5 = rank 0, mb 1
    changed = np.load(tokens)
    changed[1, 0] = 96
    np.save(tokens, changed)
    first = diff_stores(dp2, tmp_path / "dp1").first
    assert (first.field, first.position, first.rank, first.micro_batch) == ("tokens", (5, 0), 0, 1)


def test_show_batch_decodes_with_a_local_tokenizer(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    words = "the cat sat on a mat dog ate bone".split()
    model = tokenizers.models.WordLevel({word: i for i, word in enumerate(["[UNK]"] + words)}, unk_token="[UNK]")
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(tmp_path / "tok")
    root = tmp_path / "cap"
    with BatchCapture(root, dp_rank=0, dp_world=1) as capture:
        ids = np.array([[1, 2, 3, 4, 5, 42]])  # "the cat sat on a" and an id outside the vocabulary
        capture.record(0, ids, np.roll(ids, -1), np.array([[1, 1, 1, 1, 0, 0]], np.float32))
    frame = show_batch(root, 0, 0)
    assert list(frame.columns) == ["sample", "position", "token", "label", "loss_mask"]
    frame = show_batch(root, 0, 0, tokenizer=tmp_path / "tok")
    assert list(frame.columns) == ["sample", "position", "token", "label", "loss_mask", "token_text", "label_text"]
    assert list(frame["token_text"]) == ["the", "cat", "sat", "on", "a", "<out of vocab>"]
    assert frame["label_text"].iloc[0] == "cat" and frame["loss_mask"].iloc[4] == 0
