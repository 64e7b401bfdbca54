"""``MegatronReplayDataset`` against REAL MindFormers 2.1.0: registration (on import, and through
``auto_register`` + ``REGISTER_PATH`` as ``run_mindformer.py --register_path`` sets it), a build through
MindFormers' own ``build_dataset`` from a yaml file read by ``MindFormerConfig``, the stored batches in
Megatron's global order, and the real legacy LlamaForCausalLM's loss on them equal to the torch
reference's (Megatron-style) loss on the captured tokens / labels / loss_mask."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mindformers", reason="real MindFormers is not installed in this venv: the MindFormers "
                                          "tier runs with scripts/test-mindformers.sh")

import mindspore as ms  # noqa: E402
import real_mindformers as real  # noqa: E402
from mindformers.dataset.build_dataset import build_dataset  # noqa: E402
from mindformers.tools.hub.hub import HubConstants  # noqa: E402
from mindformers.tools.register import MindFormerConfig, MindFormerModuleType, MindFormerRegister  # noqa: E402

import workbench.replay.mindformers_dataset as replay_module  # noqa: E402  (registers on import)
from workbench.replay.capture import BatchCapture  # noqa: E402
from workbench.replay.contracts import legacy_columns  # noqa: E402

REPLAY_DIR = Path(replay_module.__file__).resolve().parent
STEPS, DP, MICRO, MBS, SEQ, VOCAB = 2, 2, 2, 2, 32, 128

YAML = """\
train_dataset: &train_dataset
  data_loader:
    capture_dir: {capture_dir}
    contract: {contract}
    dp: null
    rank: null
    micro_batch_size: null
    per_step: {per_step}
  input_columns: {columns}
  batch_size: {batch_size}
  repeat: {repeat}
train_dataset_task:
  type: MegatronReplayDataset
{extra}  dataset_config: *train_dataset
"""


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """D=2 ranks x 2 micro-batches x 2 steps, token ids never the pad id 0, loss_mask with zeros."""
    folder, rng, written = tmp_path_factory.mktemp("capture"), np.random.default_rng(0), {}
    for rank in range(DP):
        with BatchCapture(folder, dp_rank=rank, dp_world=DP, micro_batches=MICRO) as capture:
            for step in range(STEPS):
                for m in range(MICRO):
                    stream = rng.integers(1, VOCAB, size=(MBS, SEQ + 1))
                    mask = (rng.random((MBS, SEQ)) >= 0.25).astype(np.float32)
                    mask[:, 0] = 1.0
                    batch = {"tokens": stream[:, :-1], "labels": stream[:, 1:], "loss_mask": mask}
                    capture.record(step, **batch)
                    written[(step, rank, m)] = batch
    return folder, written


def global_order(written, step):
    return [written[(step, r, m)] for m in range(MICRO) for r in range(DP)]


def build_from_yaml(tmp_path, capture_dir, contract="legacy", per_step=True, batch_size=None, repeat=1, extra=""):
    columns = ["input_ids", "labels"] if contract == "legacy" else ["input_ids", "labels", "loss_mask", "position_ids"]
    rows = batch_size or (DP * MICRO * MBS if per_step else MBS)
    path = tmp_path / "replay.yaml"
    path.write_text(YAML.format(capture_dir=capture_dir, contract=contract, per_step=str(per_step).lower(),
                                columns=columns, batch_size=rows, repeat=repeat, extra=extra), encoding="utf-8")
    config = MindFormerConfig(str(path))
    return build_dataset(config.train_dataset_task)


def rows(dataset):
    return list(dataset.create_tuple_iterator(output_numpy=True, num_epochs=1))


def test_importing_the_module_registers_the_dataset_class():
    assert MindFormerRegister.is_exist(MindFormerModuleType.DATASET, "MegatronReplayDataset")
    assert MindFormerRegister.get_cls(MindFormerModuleType.DATASET, "MegatronReplayDataset") \
        is replay_module.MegatronReplayDataset


def test_build_dataset_from_yaml_yields_each_step_global_batch_in_order(tmp_path, capture):
    folder, written = capture
    dataset = build_from_yaml(tmp_path, folder, repeat=2)
    assert isinstance(dataset, ms.dataset.GeneratorDataset) and dataset.get_col_names() == ["input_ids", "labels"]
    got = rows(dataset)
    assert len(got) == 2 * STEPS == dataset.get_dataset_size()
    for i, (input_ids, labels) in enumerate(got):
        batches = [legacy_columns(b) for b in global_order(written, i % STEPS)]
        assert input_ids.shape == (DP * MICRO * MBS, SEQ + 1) and input_ids.dtype == np.int32
        assert np.array_equal(input_ids, np.concatenate([b["input_ids"] for b in batches]))
        assert np.array_equal(labels, np.concatenate([b["labels"] for b in batches]))


def test_new_contract_per_micro_batch(tmp_path, capture):
    folder, written = capture
    got = rows(build_from_yaml(tmp_path, folder, contract="new", per_step=False))
    expected = [b for step in range(STEPS) for b in global_order(written, step)]
    assert len(got) == len(expected)
    for (input_ids, labels, loss_mask, position_ids), batch in zip(got, expected, strict=False):
        assert np.array_equal(input_ids, batch["tokens"]) and np.array_equal(labels, batch["labels"])
        assert np.array_equal(loss_mask, batch["loss_mask"]) and np.array_equal(position_ids[0], np.arange(SEQ))


def test_auto_register_from_register_path(tmp_path, capture, monkeypatch):
    """What run_mindformer.py --register_path DIR does: REGISTER_PATH=DIR, DIR on sys.path; the yaml's
    ``auto_register: mindformers_dataset.MegatronReplayDataset`` loads the file from DIR and registers it."""
    monkeypatch.delitem(MindFormerRegister.registry[MindFormerModuleType.DATASET], "MegatronReplayDataset")
    monkeypatch.setattr(HubConstants, "OM_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.setattr(sys, "path", list(sys.path) + [str(REPLAY_DIR)])
    monkeypatch.setenv("REGISTER_PATH", str(REPLAY_DIR))
    assert not MindFormerRegister.is_exist(MindFormerModuleType.DATASET, "MegatronReplayDataset")
    dataset = build_from_yaml(tmp_path, capture[0],
                              extra="  auto_register: mindformers_dataset.MegatronReplayDataset\n")
    loaded = MindFormerRegister.get_cls(MindFormerModuleType.DATASET, "MegatronReplayDataset")
    assert loaded.__module__.endswith("mindformers_dataset") and loaded is not replay_module.MegatronReplayDataset
    assert len(rows(dataset)) == STEPS


def test_batch_size_that_does_not_match_the_capture_is_one_clear_error(tmp_path, capture):
    with pytest.raises(ValueError, match=r"train_dataset.batch_size: batch_size 4, but each replayed step holds 8"):
        build_from_yaml(tmp_path, capture[0], batch_size=4)


def test_real_legacy_llama_on_replayed_batches_gives_the_torch_reference_loss(tmp_path, capture, monkeypatch):
    torch = pytest.importorskip("torch", reason="the torch reference needs torch")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))  # tests/: the weight mapping
    from test_reference_cross import megatron_to_mindformers

    from workbench.reference import torch_model, torch_train
    from workbench.reference.config import ModelConfig, PrecisionConfig

    folder, written = capture
    config = ModelConfig()
    assert (config.seq_length, config.vocab_size) == (SEQ, VOCAB)
    torch_net = torch_model.build_model(config, PrecisionConfig(), seed=3)
    weights = megatron_to_mindformers(torch_train.weights_as_numpy(torch_net), config)
    ckpt = real.save_numpy_checkpoint(weights, tmp_path / "model.ckpt")
    net = real.build_real_llama(real.llama_config_from_reference(config))
    real.load_checkpoint_strict(net, ckpt)
    net.set_train(True)
    replayed = rows(build_from_yaml(tmp_path, folder, per_step=False))
    originals = [b for step in range(STEPS) for b in global_order(written, step)]
    assert len(replayed) == len(originals)
    for (input_ids, labels), batch in zip(replayed, originals, strict=False):
        with torch.no_grad():
            expected = float(torch_model.loss_fn(torch_net(torch.as_tensor(batch["tokens"])),
                                                 torch.as_tensor(batch["labels"]), torch.as_tensor(batch["loss_mask"])))
        loss = float(net(ms.Tensor(input_ids), ms.Tensor(labels)).asnumpy().reshape(-1)[0])
        assert abs(loss - expected) / abs(expected) < 1e-5, (loss, expected)
