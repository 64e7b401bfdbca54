"""Planting the catalog's faults (workbench/demo/faults.py, --fault): each changes what it should and nothing
else; weights faults rewrite a real MindSpore .ckpt; precision runs stay finite; faults stand above the clean
torch-vs-MindSpore noise (tiny models here: the suite is shared; the demo model's numbers are in
docs/reference-models.md)."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the reference runs need torch (test extra)")
ms = pytest.importorskip("mindspore", reason="the planted faults live in the MindSpore reference model")

from mindspore import Tensor  # noqa: E402

from workbench.cli.main import main  # noqa: E402
from workbench.demo.catalog import find_fault, load_thresholds  # noqa: E402
from workbench.demo.faults import mindspore_model, plant_in_code, plant_replay_fault, plant_weights_fault  # noqa: E402
from workbench.errors import InputError  # noqa: E402
from workbench.reference import ms_model, ms_train, torch_model, torch_train  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig, TrainConfig, synthetic_batches  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_reference_cross import megatron_to_mindformers  # noqa: E402  (the test's own independent name mapping)

TINY = ModelConfig()
TRAIN = TrainConfig(steps=2)
BATCHES = synthetic_batches(TINY, 2, micro_batch_size=2, seed=0)


def ms_trainer(fault_name: str | None, model=TINY, train=TRAIN, weights=None):
    """A PyNative MindSpore trainer with ``fault_name`` planted the way the runner plants it."""
    faults, optimizer = ms_model.NO_FAULTS, ms_train.NO_OPTIMIZER_FAULTS
    if fault_name:
        model, train, faults, optimizer = plant_in_code(find_fault(fault_name), model, train)
    net = ms_model.build_model(model, train.precision, seed=train.seed, faults=faults)
    if weights is not None:
        ms_model.set_weights(net, weights)
    return ms_train.MindFormersStyleTrainer(net, train, jit=False, faults=optimizer), net


def steps(trainer, count: int = 2):
    return [trainer.step(*ms_train.as_model_inputs(batch)) for batch in BATCHES[:count]]


# ---------------------------------------------------------------- optimizer and schedule faults
def test_weight_decay_on_1d_parameters_leaves_step_1_and_changes_only_the_1d_updates():
    clean, clean_net = ms_trainer(None)
    faulty, faulty_net = ms_trainer("weight_decay_1d")
    first_clean, first_faulty = clean.step(*ms_train.as_model_inputs(BATCHES[0])), \
        faulty.step(*ms_train.as_model_inputs(BATCHES[0]))
    assert first_faulty.loss == first_clean.loss and first_faulty.local_norms == first_clean.local_norms
    after_clean, after_faulty = ms_model.get_weights(clean_net), ms_model.get_weights(faulty_net)
    for name, value in after_clean.items():
        if value.ndim == 1:      # norm weights: decayed by lr * wd * w on top of the same Adam step
            np.testing.assert_allclose(after_faulty[name], value * (1 - TRAIN.lr * TRAIN.weight_decay), rtol=2e-6)
            assert not np.array_equal(after_faulty[name], value)
        else:
            np.testing.assert_array_equal(after_faulty[name], value)
    assert faulty.step(*ms_train.as_model_inputs(BATCHES[1])).loss != clean.step(*ms_train.as_model_inputs(BATCHES[1])).loss


def test_adam_without_bias_correction_leaves_step_1_and_shrinks_every_first_update():
    initial = ms_model.initial_weights(TINY, TRAIN.seed)
    clean, clean_net = ms_trainer(None)
    faulty, faulty_net = ms_trainer("no_bias_correction")
    assert faulty.step(*ms_train.as_model_inputs(BATCHES[0])).loss == clean.step(*ms_train.as_model_inputs(BATCHES[0])).loss
    after_clean, after_faulty = ms_model.get_weights(clean_net), ms_model.get_weights(faulty_net)
    name = "model.layers.0.attention.wq.weight"
    step_clean, step_faulty = after_clean[name] - initial[name], after_faulty[name] - initial[name]
    big = np.abs(step_clean) > 0.5 * TRAIN.lr       # elements whose gradient is far above eps
    decay = -TRAIN.lr * TRAIN.weight_decay * initial[name][big]
    ratio = (step_faulty[big] - decay) / (step_clean[big] - decay)
    expected = (1 - TRAIN.beta1) / np.sqrt(1 - TRAIN.beta2)          # 0.447: m and v without 1/(1 - beta^t)
    assert np.mean(np.abs(ratio / expected - 1) < 1e-2) > 0.9              # the rest: |g| near eps, or clipped


def test_the_schedule_fault_changes_the_lr_only_when_the_schedule_decays():
    decaying = replace(TRAIN, steps=20, decay_style="cosine", min_lr=1e-4)
    _, planted, _, _ = plant_in_code(find_fault("lr_schedule"), TINY, decaying)
    clean_lr, faulty_lr = decaying.lr_per_update("mindformers"), planted.lr_per_update("mindformers")
    assert clean_lr[0] == faulty_lr[0] and np.max(np.abs(faulty_lr - clean_lr) / clean_lr) > 0.1
    _, constant, _, _ = plant_in_code(find_fault("lr_schedule"), TINY, TRAIN)       # step-1/2 runs: constant lr
    np.testing.assert_array_equal(constant.lr_per_update("mindformers"), TRAIN.lr_per_update("mindformers"))


# ---------------------------------------------------------------- model and precision faults
TOKENS = Tensor(np.random.default_rng(3).integers(0, TINY.vocab_size, (2, TINY.seq_length)), ms.int32)


def hidden_states(fault_name: str | None) -> dict[str, np.ndarray]:
    _, net = ms_trainer(fault_name, replace(TINY, rotary_base=500000.0))
    h = net.model.tok_embeddings(TOKENS)
    out = {"embedding": ms.ops.cast(h, ms.float32).asnumpy()}
    for i, layer in enumerate(net.model.layers):
        normed = layer.attention_norm(h)
        out[f"layers.{i}.attention_norm"] = normed.asnumpy()
        out[f"layers.{i}.attention"] = layer.attention(normed).asnumpy()
        h = layer(h)
    out["logits"] = net.logits(TOKENS).asnumpy()
    return out


@pytest.mark.parametrize("fault,first", [
    ("norm_epsilon", "layers.0.attention_norm"),
    ("rotary_base", "layers.0.attention"),
    ("softmax_fp16", "layers.0.attention"),
    ("embedding_fp16", "embedding"),
])
def test_each_model_fault_first_changes_its_component(fault, first):
    clean, faulty = hidden_states(None), hidden_states(fault)
    names = list(clean)
    changed = [name for name in names if not np.array_equal(clean[name], faulty[name])]
    assert changed and changed[0] == first and changed == names[names.index(first):]


def test_every_fp16_knob_trains_finite_on_both_sides():
    """The fp16 rsqrt of RMSNorm overflowed in backward at small activations (nan on both sides); the
    statistics are fp32 now, as torch.nn.RMSNorm and MindFormers' fused RmsNorm compute them."""
    fp16 = PrecisionConfig(**{knob: "fp16" for knob in vars(PrecisionConfig())})
    for precision in (fp16,):
        torch_net = torch_model.build_model(TINY, precision, seed=1)
        result = torch_train.MegatronStyleTrainer(torch_net, replace(TRAIN, precision=precision)).step(BATCHES[0])
        assert np.isfinite(result.grad_norm) and all(np.isfinite(list(result.local_norms.values())))
        trainer, _ = ms_trainer(None, train=replace(TRAIN, precision=precision))
        ms_result = trainer.step(*ms_train.as_model_inputs(BATCHES[0]))
        assert np.isfinite(ms_result.global_norm) and all(np.isfinite(list(ms_result.local_norms.values())))


# ---------------------------------------------------------------- above the clean pair's noise
NOISE_MODEL = ModelConfig(seq_length=64, vocab_size=256, rotary_base=500000.0)
NOISE_TRAIN = TrainConfig(steps=1)


def step1_differences(fault_name: str | None) -> tuple[float, dict[str, float]]:
    """Step-1 loss relative difference and per-parameter local-norm relative differences (Megatron names),
    torch reference vs the MindSpore side with ``fault_name`` planted, from the same weights and batch."""
    torch_net = torch_model.build_model(NOISE_MODEL, NOISE_TRAIN.precision, seed=NOISE_TRAIN.seed)
    weights = megatron_to_mindformers(torch_train.weights_as_numpy(torch_net), NOISE_MODEL)
    batch = synthetic_batches(NOISE_MODEL, 1, micro_batch_size=4, seed=0)[0]
    reference = torch_train.MegatronStyleTrainer(torch_net, NOISE_TRAIN).step(batch)
    trainer, _ = ms_trainer(fault_name, NOISE_MODEL, NOISE_TRAIN, weights)
    candidate = trainer.step(*ms_train.as_model_inputs(batch))
    merged: dict[str, float] = {}
    for name, value in candidate.local_norms.items():
        key = megatron_name(name)
        merged[key] = merged.get(key, 0.0) + value
    relative = {name: abs(np.sqrt(merged[name]) - np.sqrt(value)) / np.sqrt(value)
                for name, value in reference.local_norms.items()}
    return abs(candidate.loss - reference.loss) / reference.loss, relative


def megatron_name(name: str) -> str:
    fixed = {"model.tok_embeddings.embedding_weight": "embedding.word_embeddings.weight",
             "model.norm_out.weight": "decoder.final_layernorm.weight", "lm_head.weight": "output_layer.weight"}
    if name in fixed:
        return fixed[name]
    layer, rest = name.split(".")[2], ".".join(name.split(".")[3:])
    parts = {"attention_norm": "input_layernorm", "ffn_norm": "pre_mlp_layernorm",
             "attention.wq": "self_attention.linear_qkv", "attention.wk": "self_attention.linear_qkv",
             "attention.wv": "self_attention.linear_qkv", "attention.wo": "self_attention.linear_proj",
             "feed_forward.w1": "mlp.linear_fc1", "feed_forward.w3": "mlp.linear_fc1", "feed_forward.w2": "mlp.linear_fc2"}
    return f"decoder.layers.{layer}.{parts[rest.removesuffix('.weight')]}.weight"


@pytest.fixture(scope="module")
def clean_noise():
    return step1_differences(None)


@pytest.mark.parametrize("fault,stage", [
    ("norm_epsilon", "step1_loss"),
    ("rotary_base", "step1_loss"),
    ("softmax_fp16", "step1_localnorm"),
    ("embedding_fp16", "step1_localnorm"),
])
def test_code_faults_stand_above_the_clean_noise_at_their_stage(clean_noise, fault, stage):
    """The catalog's thresholds on a small fp32 pair: the clean pair passes both step-1 checks with a wide
    margin; each fault fails its catalog stage (a precision fault: within the loss bar, outside the norms')."""
    thresholds = load_thresholds()
    clean_loss, clean_norms = clean_noise
    assert clean_loss < thresholds.step1_loss_rtol / 10 and max(clean_norms.values()) < thresholds.localnorm_floor / 10
    loss, norms = step1_differences(fault)
    assert find_fault(fault).stage == stage and np.isfinite(loss) and all(np.isfinite(list(norms.values())))
    assert (loss > thresholds.step1_loss_rtol) == (stage == "step1_loss"), loss
    assert max(norms.values()) > max(3 * thresholds.localnorm_floor, 100 * max(clean_norms.values())), norms


# ---------------------------------------------------------------- weights and replay faults
@pytest.fixture()
def checkpoint(tmp_path) -> Path:
    path = tmp_path / "converted.ckpt"
    net = ms_model.build_model(TINY, PrecisionConfig(), seed=7)
    ms.save_checkpoint(net, str(path))
    return path


def test_gate_up_swap_rewrites_the_checkpoint_with_mindspore_and_changes_only_w1_w3(checkpoint, tmp_path):
    before = {name: value.asnumpy() for name, value in ms.load_checkpoint(str(checkpoint)).items()}
    out = plant_weights_fault(checkpoint, find_fault("gate_up_swapped"), tmp_path / "planted.ckpt")
    after = {name: value.asnumpy() for name, value in ms.load_checkpoint(str(out)).items()}
    assert set(after) == set(before)
    for name, value in before.items():
        if ".feed_forward.w1." in name:
            np.testing.assert_array_equal(after[name], before[name.replace(".w1.", ".w3.")])
        elif ".feed_forward.w3." in name:
            np.testing.assert_array_equal(after[name], before[name.replace(".w3.", ".w1.")])
        else:
            np.testing.assert_array_equal(after[name], value)
    assert {name: value.asnumpy() for name, value in ms.load_checkpoint(str(checkpoint)).items()}.keys() == before.keys()


def test_gate_up_swap_of_a_fused_checkpoint_swaps_the_interleaved_rows(tmp_path):
    path = tmp_path / "fused.ckpt"
    ms.save_checkpoint(ms_model.build_model(TINY, PrecisionConfig(), seed=7, qkv_concat=True), str(path))
    plant_weights_fault(path, find_fault("gate_up_swapped"))                      # in place
    planted = ms_model.unfuse_weights({n: v.asnumpy() for n, v in ms.load_checkpoint(str(path)).items()}, TINY)
    clean = ms_model.initial_weights(TINY, 7)
    np.testing.assert_array_equal(planted["model.layers.1.feed_forward.w1.weight"],
                                  clean["model.layers.1.feed_forward.w3.weight"])


def test_vocabulary_padding_adds_zero_rows_and_the_mindspore_side_loads_them(checkpoint):
    fault = find_fault("vocab_padding")
    plant_weights_fault(checkpoint, fault)
    padded = {name: value.asnumpy() for name, value in ms.load_checkpoint(str(checkpoint)).items()}
    rows = fault.plant.values["pad_vocab_rows"]
    for name in ("model.tok_embeddings.embedding_weight", "lm_head.weight"):
        assert padded[name].shape == (TINY.vocab_size + rows, TINY.hidden_size) and not padded[name][-rows:].any()
    model = mindspore_model(fault, TINY)
    net = ms_model.build_model(model, PrecisionConfig())
    ms_model.set_weights(net, padded)                                  # the MindSpore side's config matches
    assert model.vocab_size == TINY.vocab_size + rows


def test_a_truncated_checkpoint_is_one_input_error_and_nothing_is_written(checkpoint, tmp_path):
    checkpoint.write_bytes(checkpoint.read_bytes()[:-100])
    out = tmp_path / "planted.ckpt"
    with pytest.raises(InputError) as error:
        plant_weights_fault(checkpoint, find_fault("gate_up_swapped"), out)
    assert str(checkpoint) in str(error.value) and "\n" not in str(error.value) and not out.exists()


def test_the_replay_fault_shifts_the_batches_by_one_step():
    shifted = plant_replay_fault(BATCHES, find_fault("data_off_by_one"))
    assert len(shifted) == len(BATCHES) and shifted[0] is BATCHES[1] and shifted[1] is BATCHES[0]
    with pytest.raises(ValueError, match="not a replay fault"):
        plant_replay_fault(BATCHES, find_fault("gate_up_swapped"))


# ---------------------------------------------------------------- through the command line
@pytest.mark.parametrize("fault,model", [("rotary_base", TINY), ("norm_epsilon", replace(TINY, norm_epsilon=1e-6))])
def test_a_fault_that_would_change_nothing_is_refused(fault, model):
    with pytest.raises(InputError, match="it would change nothing"):
        plant_in_code(find_fault(fault), model, TRAIN)


def test_train_with_a_fault_changes_the_mindspore_run_and_keeps_the_log(tmp_path, capsys):
    clean, faulty = tmp_path / "clean", tmp_path / "faulty"
    common = ["reference", "train", "--side", "mindformers", "--steps", "1", "--no-jit"]
    assert main([*common, "--out", str(clean)]) == 0
    assert main([*common, "--fault", "norm_epsilon", "--out", str(faulty)]) == 0
    printed = capsys.readouterr().out
    losses = [line for line in printed.splitlines() if line.startswith("step 1:")]
    assert len(losses) == 2 and losses[0] != losses[1]
    assert (faulty / "train.log").read_text().count("loss") == (clean / "train.log").read_text().count("loss")


def test_a_padded_checkpoint_on_the_unpadded_model_is_one_line(checkpoint, tmp_path, capsys):
    plant_weights_fault(checkpoint, find_fault("vocab_padding"))
    out = tmp_path / "run"
    assert main(["reference", "train", "--side", "mindformers", "--steps", "1", "--no-jit", "--init", str(checkpoint),
                 "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"{checkpoint}: does not fit the model" in error[0] and "embedding_weight" in error[0]
    assert not out.exists()
