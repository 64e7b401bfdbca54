"""Round trips: the reference trainers write their logs (both sides) -> read_log -> the same values.
Also the example lines of both frameworks' logs, as literals, parse to the numbers they print."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.logs import read_log

MEGATRON_EXAMPLE = (
    " [2025-01-01 12:00:00] iteration        2/      20 | consumed samples:          128 | elapsed time per "
    "iteration (ms): 1752.3 | learning rate: 1.000000E-05 | global batch size:    64 | lm loss: 1.061234E+01 | "
    "loss scale: 1.0 | grad norm: 3.210 | number of skipped iterations:   0 | number of nan iterations:   0 |")
MINDFORMERS_EXAMPLE = (
    "2025-01-01 12:00:00,123 - mindformers./output/log[mindformers/core/callback/callback.py:616] - INFO - "
    "{ Epoch:[  1/  2], step:[    2/   19], loss: 10.633, per_step_time: 1752ms, lr: 1e-05, overflow cond: False, "
    "loss_scale: 1.0, global_norm: [1.508834], train_throughput_per_npu: 0.001T")


def test_megatron_example_line_parses(tmp_path):
    log = tmp_path / "megatron.log"
    log.write_text("junk before\n" + MEGATRON_EXAMPLE + "\n")
    got = read_log(log)
    assert got.format == "megatron"
    assert got.metric("lm_loss").to_dict() == {2: pytest.approx(10.61234)}
    assert got.metric("lr").to_dict() == {3: pytest.approx(1e-5)}          # the next update's lr
    assert got.metric("grad_norm").to_dict() == {2: pytest.approx(3.21)}
    assert got.metric("step_time_ms")[2] == pytest.approx(1752.3)
    assert got.metric("consumed_samples")[2] == 128 and got.metric("nan_iterations")[2] == 0
    assert set(got.series["line"]) == {2}


def test_mindformers_example_line_parses(tmp_path):
    log = tmp_path / "mf.log"
    log.write_text(MINDFORMERS_EXAMPLE + "\n")
    got = read_log(log)
    assert got.format == "mindformers"
    steps = {metric: got.metric(metric).to_dict() for metric in ("loss", "lr", "grad_norm", "overflow",
                                                                  "loss_scale", "step_time_ms", "throughput")}
    assert steps == {"loss": {2: 10.633}, "lr": {2: 1e-5}, "grad_norm": {2: pytest.approx(1.508834)},
                     "overflow": {2: 0.0}, "loss_scale": {2: 1.0}, "step_time_ms": {2: 1752.0},
                     "throughput": {2: 0.001}}


def test_torch_reference_log_round_trips(tmp_path):
    pytest.importorskip("torch")
    from workbench.reference.config import ModelConfig, PrecisionConfig, TrainConfig, synthetic_batches
    from workbench.reference.torch_model import build_model
    from workbench.reference.torch_train import MegatronStyleTrainer

    cfg = ModelConfig()
    train = TrainConfig(steps=3, decay_style="linear", lr=1e-3, min_lr=1e-4, log_local_norms=True)
    trainer = MegatronStyleTrainer(build_model(cfg, PrecisionConfig(), seed=0), train)
    results = trainer.train(3, synthetic_batches(cfg, 3), log_path=tmp_path / "train.log")
    got = read_log(tmp_path / "train.log")
    assert got.format == "megatron" and got.facts["log_interval"] == 1
    assert got.metric("lm_loss").tolist() == pytest.approx([r.loss for r in results], rel=1e-6)
    assert got.metric("grad_norm").tolist() == pytest.approx([r.grad_norm for r in results], abs=6e-4)
    applied = train.lr_per_update("megatron")
    lr = got.metric("lr")                                    # printed on line N, used by update N+1
    assert lr.index.tolist() == [2, 3, 4] and lr[2] == pytest.approx(applied[1]) and lr[3] == pytest.approx(applied[2])
    for step, result in enumerate(results, start=1):
        rows = got.local_norms[got.local_norms["step"] == step]
        assert rows["param"].tolist() == list(result.local_norms)
        assert rows["value"].tolist() == pytest.approx(list(result.local_norms.values()), rel=1e-8)
        assert set(rows["definition"]) == {"sum_sq_step"}


def test_mindspore_reference_log_round_trips_with_param_groups(tmp_path):
    pytest.importorskip("mindspore")
    from workbench.reference import ms_model, ms_train
    from workbench.reference.config import ModelConfig, TrainConfig, synthetic_batches

    cfg = ModelConfig(num_layers=1, hidden_size=32, num_attention_heads=4, num_kv_heads=2, ffn_hidden_size=48,
                      vocab_size=64, seq_length=16)
    trainer = ms_train.MindFormersStyleTrainer(ms_model.build_model(cfg, seed=0),
                                               TrainConfig(steps=2, log_local_norms=True), jit=False)
    batches = [ms_train.input_ids_from_megatron(b["tokens"], b["labels"], b["loss_mask"])
               for b in synthetic_batches(cfg, 2)]
    log = tmp_path / "output" / "log" / "rank_0" / "info.log"
    results = trainer.train(2, batches, log_path=log)
    got = read_log(log)
    assert got.format == "mindformers"
    assert got.metric("loss").tolist() == pytest.approx([r.loss for r in results], abs=6e-7)
    assert got.metric("grad_norm").tolist() == pytest.approx([r.global_norm for r in results], rel=1e-6)
    assert got.metric("lr").tolist() == pytest.approx([r.lr for r in results], rel=1e-6)   # the lr it used
    assert got.param_order == list(trainer.param_names)
    assert set(got.local_norms["rank"]) == {0}                                             # from rank_0/
    for step, result in zip((1, 2), results, strict=True):
        rows = got.local_norms[got.local_norms["step"] == step]
        assert rows["param"].tolist() == list(trainer.param_names)
        assert rows["numel"].tolist() == list(trainer.sizes)
        np.testing.assert_allclose(rows["value"], np.float32(list(result.local_norms.values())), rtol=1e-6)
