"""Planted faults of the MindSpore reference model (ms_model.PlantedFaults): each changes the layer it
names and leaves everything computed before it bit for bit as the clean model's. They are the faults
that the dump comparison must find (tests/dump_pairs.py dumps them)."""
from __future__ import annotations

import numpy as np
import pytest

ms = pytest.importorskip("mindspore", reason="the planted faults live in the MindSpore reference model")

from mindspore import Tensor  # noqa: E402

from workbench.reference import ms_model  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig  # noqa: E402

CONFIG = ModelConfig()
TOKENS = Tensor(np.random.default_rng(3).integers(0, CONFIG.vocab_size, (2, CONFIG.seq_length)), ms.int32)


def trace(faults: ms_model.PlantedFaults) -> dict[str, np.ndarray]:
    """Hidden states in execution order: embedding, then per layer its attention_norm, attention and output."""
    net = ms_model.build_model(CONFIG, PrecisionConfig(), seed=5, faults=faults)
    h = net.model.tok_embeddings(TOKENS)
    out = {"embedding": h.asnumpy()}
    for i, layer in enumerate(net.model.layers):
        normed = layer.attention_norm(h)
        out[f"layers.{i}.attention_norm"] = normed.asnumpy()
        out[f"layers.{i}.attention"] = layer.attention(normed).asnumpy()
        h = layer(h)
        out[f"layers.{i}.output"] = h.asnumpy()
    out["logits"] = net.logits(TOKENS).asnumpy()
    return out


@pytest.fixture(scope="module")
def clean():
    return trace(ms_model.NO_FAULTS)


def first_changed(clean: dict, faulty: dict) -> str:
    """The first traced tensor that is not bit-identical; every later one must differ too."""
    names = list(clean)
    changed = [name for name in names if not np.array_equal(clean[name], faulty[name])]
    assert changed, "the planted fault changed nothing"
    first = names.index(changed[0])
    assert changed == names[first:], f"a later tensor is unchanged: {sorted(set(names[first:]) - set(changed))}"
    return changed[0]


def relative(clean: np.ndarray, faulty: np.ndarray) -> float:
    return float(np.linalg.norm(faulty - clean) / np.linalg.norm(clean))


@pytest.mark.parametrize("layer", [1])
def test_fp16_softmax_changes_that_layers_attention_and_nothing_before(clean, layer):
    faulty = trace(ms_model.PlantedFaults(softmax_fp16_layer=layer))
    assert first_changed(clean, faulty) == f"layers.{layer}.attention"
    # fp16 rounding of the probabilities: far above fp32 noise, far below a broken model
    assert 1e-5 < relative(clean[f"layers.{layer}.attention"], faulty[f"layers.{layer}.attention"]) < 1e-2


@pytest.mark.parametrize("layer", [0, 1])
def test_wrong_norm_epsilon_changes_that_layers_attention_norm_and_nothing_before(clean, layer):
    faulty = trace(ms_model.PlantedFaults(norm_epsilon_layer=layer))
    assert first_changed(clean, faulty) == f"layers.{layer}.attention_norm"
    assert 1e-4 < relative(clean[f"layers.{layer}.attention_norm"], faulty[f"layers.{layer}.attention_norm"]) < 0.1


def test_no_faults_is_the_default_and_bit_identical(clean):
    net = ms_model.build_model(CONFIG, PrecisionConfig(), seed=5)
    np.testing.assert_array_equal(net.logits(TOKENS).asnumpy(), clean["logits"])


def test_a_fault_outside_the_model_is_refused():
    with pytest.raises(ValueError, match="layer 2"):
        ms_model.build_model(CONFIG, PrecisionConfig(), faults=ms_model.PlantedFaults(softmax_fp16_layer=2))
