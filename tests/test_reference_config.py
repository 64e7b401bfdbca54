"""The shared configuration of the reference models and its synthetic Megatron-shaped batches."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import InputError
from workbench.reference.config import ModelConfig, TrainConfig, synthetic_batches


def test_default_is_the_tiny_two_layer_model():
    model = ModelConfig().validate()
    assert (model.num_layers, model.hidden_size, model.head_dim) == (2, 64, 16)


@pytest.mark.parametrize("changes,where", [
    ({"num_attention_heads": 5}, "model.hidden_size"),
    ({"num_kv_heads": 3}, "model.num_kv_heads"),
    ({"num_experts": 2, "moe_router_topk": 3}, "model.moe_router_topk"),
])
def test_invalid_shapes_are_named(changes, where):
    with pytest.raises(InputError, match=where):
        ModelConfig(**changes).validate()


@pytest.mark.parametrize("style,min_lr", [("constant", 1e-4), ("linear", 0.0), ("cosine", 1e-4)])
def test_both_frameworks_apply_the_same_schedule_for_the_same_settings(style, min_lr):
    train = TrainConfig(steps=12, warmup_steps=3, decay_style=style, min_lr=min_lr)
    megatron, mindformers = train.lr_per_update("megatron"), train.lr_per_update("mindformers")
    assert megatron[0] == mindformers[0] == 0.0          # both apply lr(0) at the first update
    np.testing.assert_allclose(megatron, mindformers, rtol=1e-12, atol=0)
    assert megatron[3] == pytest.approx(train.lr)        # warmup ends at update warmup + 1


def test_linear_decay_differs_when_megatron_has_a_min_lr():
    """MindFormers LinearWithWarmUpLR has no lr_end: it decays to 0, Megatron to --min-lr."""
    train = TrainConfig(steps=12, warmup_steps=3, decay_style="linear", min_lr=1e-4)
    megatron, mindformers = train.lr_per_update("megatron"), train.lr_per_update("mindformers")
    np.testing.assert_allclose(megatron[:4], mindformers[:4], rtol=1e-12)
    assert mindformers[-1] < megatron[-1]


def test_synthetic_batches_are_megatron_shaped():
    model = ModelConfig(vocab_size=50, seq_length=16)
    batches = synthetic_batches(model, steps=3, micro_batch_size=4, seed=7)
    assert len(batches) == 3
    for batch in batches:
        assert batch["tokens"].shape == batch["labels"].shape == batch["loss_mask"].shape == (4, 16)
        assert batch["tokens"].dtype == np.int64 and batch["loss_mask"].dtype == np.float32
        np.testing.assert_array_equal(batch["tokens"][:, 1:], batch["labels"][:, :-1])  # labels = next token
        assert 0 <= batch["tokens"].min() and batch["tokens"].max() < 50
        assert (batch["loss_mask"] == 0).any() and (batch["loss_mask"][:, 0] == 1).all()
    again = synthetic_batches(model, steps=3, micro_batch_size=4, seed=7)
    assert all(np.array_equal(a["tokens"], b["tokens"]) for a, b in zip(batches, again, strict=False))
