"""The injection wrapper Cell (workbench/grads/inject_cell.py) on real MindSpore CPU.

The MindSpore reference model starts from the torch reference's pre-step weights (converted through the
spec), takes one step with the torch reference's captured gradients injected, and ends where the torch
reference's AdamW step ended: before clipping (clipping applied to the injected gradients) or after it
(the optimizer alone: the unclipped reference update). Steps other than the chosen one use the computed
gradients. A malformed capture is one InputError naming the file and the parameter.
"""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.experimental.optim import AdamW
from optim_capture import CONFIG, mindformers_yaml, reference_capture

from workbench.errors import InputError
from workbench.grads.captured import AFTER, GRADS, open_captured_step
from workbench.grads.inject_cell import (AFTER_CLIP, BEFORE_CLIP, InjectTrainOneStepCell, injected_gradients,
                                         load_injected_gradients, load_params_before)
from workbench.reference import ms_model
from workbench.reference.config import synthetic_batches
from workbench.reference.ms_train import as_model_inputs, split_weight_decay
from workbench.replay.step_store import read_step_manifest, save_step_tensors

LR, WD, BETAS, EPS, CLIP = 1e-2, 0.1, (0.9, 0.95), 1e-8, 1.0
RTOL, ATOL = 1e-6, 1e-7


@pytest.fixture(scope="module")
def yaml_path(tmp_path_factory):
    return mindformers_yaml(tmp_path_factory.mktemp("yaml") / "mindformers.yaml")


@pytest.fixture(scope="module")
def clipped(tmp_path_factory):
    """The reference step with Megatron clipping at 1.0 (its pre-clip norm is above 1: clipping acts)."""
    return reference_capture(tmp_path_factory.mktemp("clipped"), lr=LR, weight_decay=WD, betas=BETAS, eps=EPS,
                             clip=CLIP)


@pytest.fixture(scope="module")
def unclipped(tmp_path_factory):
    """The same step (same model, batch and gradients) without clipping."""
    return reference_capture(tmp_path_factory.mktemp("unclipped"), lr=LR, weight_decay=WD, betas=BETAS, eps=EPS,
                             clip=None)


def adamw(network):
    decayed, rest = split_weight_decay(network)
    return AdamW([{"params": decayed, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                 lr=LR, betas=BETAS, eps=EPS)


def input_ids(seed=1):
    ids, _ = as_model_inputs(synthetic_batches(CONFIG, 1, seed=seed)[0])
    return ms.Tensor(np.asarray(ids), ms.int32)


def network_at(captured):
    network = ms_model.build_model(CONFIG, seed=99)        # other weights: load_params_before must replace all
    load_params_before(captured, network)
    return network


def assert_weights(network, expected: dict[str, np.ndarray]):
    weights = ms_model.get_weights(network)
    assert sorted(weights) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(weights[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


def injected_step(capture, yaml_path, at, max_grad_norm):
    with open_captured_step(capture, 1, config=yaml_path) as captured:
        network = network_at(captured)
        optimizer = adamw(network)
        cell = InjectTrainOneStepCell(network, optimizer, injected_gradients(captured, optimizer.parameters), 1,
                                      at=at, max_grad_norm=max_grad_norm)
        loss, overflow, norm = cell(input_ids())
        expected = {name: captured.read(AFTER, name) for name in captured.names}
        return network, expected, float(norm.asnumpy()), bool(overflow.asnumpy()), captured.meta["grad_norm"]


def test_before_clip_gives_the_reference_clipped_update(clipped, yaml_path):
    network, expected, norm, overflow, reference_norm = injected_step(clipped, yaml_path, BEFORE_CLIP, CLIP)
    assert not overflow and reference_norm > CLIP          # clipping really scaled the update
    assert norm == pytest.approx(reference_norm, rel=1e-5)  # the pre-clip global norm of the injected grads
    assert_weights(network, expected)


def test_after_clip_gives_the_unclipped_reference_update(clipped, unclipped, yaml_path):
    network, _, _, _, _ = injected_step(clipped, yaml_path, AFTER_CLIP, CLIP)
    with open_captured_step(unclipped, 1, config=yaml_path) as captured:
        expected = {name: captured.read(AFTER, name) for name in captured.names}
    assert_weights(network, expected)
    clipped_net, clipped_expected, _, _, _ = injected_step(clipped, yaml_path, BEFORE_CLIP, CLIP)
    name = "lm_head.weight"                                  # the two positions really differ
    assert not np.allclose(clipped_expected[name], expected[name], rtol=1e-4, atol=0)


def computed_gradients(network, ids):
    return ms.grad(network, None, tuple(network.trainable_params()))(ids)


def test_other_steps_use_the_computed_gradients(clipped, yaml_path):
    """step=2: the first call updates with the network's own gradients, the second with the injected ones."""
    ids = input_ids(seed=5)
    with open_captured_step(clipped, 1, config=yaml_path) as captured:
        network, twin = network_at(captured), network_at(captured)
        optimizer = nn.SGD(network.trainable_params(), learning_rate=0.5)
        cell = InjectTrainOneStepCell(network, optimizer, injected_gradients(captured, optimizer.parameters), 2)
        before = ms_model.get_weights(network)
        own = dict(zip([p.name for p in twin.trainable_params()],
                       [g.asnumpy() for g in computed_gradients(twin, ids)], strict=True))
        cell(ids)
        after_first = ms_model.get_weights(network)
        for name, value in before.items():
            np.testing.assert_allclose(after_first[name], value - 0.5 * own[name], rtol=1e-5, atol=1e-6, err_msg=name)
        cell(ids)
        for name, value in after_first.items():
            injected = captured.read(GRADS, name)
            np.testing.assert_allclose(ms_model.get_weights(network)[name], value - 0.5 * injected,
                                       rtol=1e-5, atol=1e-6, err_msg=name)


def test_loss_scaled_capture_is_unscaled(tmp_path, clipped, yaml_path):
    """Megatron captures main_grad times the loss scale: the injected gradient is divided by meta.loss_scale."""
    root = tmp_path / "scaled"
    shutil.copytree(clipped, root)
    manifest = read_step_manifest(root / "step_1" / GRADS)
    folder = root / "step_1" / GRADS
    tensors = {name: np.load(folder / f"{name}.npy") * 8.0 for name in manifest.tensors}
    save_step_tensors(root, 1, GRADS, tensors, {**manifest.meta, "loss_scale": 8.0})
    network = ms_model.build_model(CONFIG)
    params = network.trainable_params()
    scaled = load_injected_gradients(root, 1, params, config=yaml_path)
    plain = load_injected_gradients(clipped, 1, params, config=yaml_path)
    for a, b in zip(scaled, plain, strict=True):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)


# ---------------------------------------------------------------- malformed captures ----------------

def broken_capture(tmp_path: Path, source: Path, edit) -> Path:
    """A copy of ``source`` whose step-1 grads folder was rewritten after ``edit(tensors)``."""
    root = tmp_path / "broken"
    shutil.copytree(source, root)
    folder = root / "step_1" / GRADS
    manifest = read_step_manifest(folder)
    tensors = {name: np.load(folder / f"{name}.npy") for name in manifest.tensors}
    edit(tensors)
    save_step_tensors(root, 1, GRADS, tensors, manifest.meta)
    return root


def load(root, yaml_path):
    network = ms_model.build_model(CONFIG)
    return load_injected_gradients(root, 1, network.trainable_params(), config=yaml_path)


def test_capture_missing_a_parameter_names_file_and_parameter(tmp_path, clipped, yaml_path):
    root = broken_capture(tmp_path, clipped, lambda t: t.pop("decoder.final_layernorm.weight"))
    with pytest.raises(InputError) as error:
        load(root, yaml_path)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{root / 'step_1' / GRADS}: decoder.final_layernorm.weight: 1 tensor(s)")


def test_capture_with_a_wrong_shape_names_file_and_parameter(tmp_path, clipped, yaml_path):
    def reshape(tensors):
        tensors["decoder.layers.1.mlp.linear_fc2.weight"] = np.zeros((32, 40), np.float32)

    root = broken_capture(tmp_path, clipped, reshape)
    with pytest.raises(InputError) as error:
        load(root, yaml_path)
    message = str(error.value)
    assert "\n" not in message and "linear_fc2" in message and str(root / "step_1" / GRADS) in message


def test_truncated_npy_names_file_and_parameter(tmp_path, clipped, yaml_path):
    root = tmp_path / "truncated"
    shutil.copytree(clipped, root)
    path = root / "step_1" / GRADS / "decoder.layers.0.self_attention.linear_qkv.weight.npy"
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(InputError) as error:
        load(root, yaml_path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message


def test_bad_step_and_position_are_input_errors(clipped, yaml_path):
    network = ms_model.build_model(CONFIG)
    optimizer = adamw(network)
    grads = load(clipped, yaml_path)
    with pytest.raises(InputError, match=r"^at: expected one of before_clip, after_clip"):
        InjectTrainOneStepCell(network, optimizer, grads, 1, at="middle")
    with pytest.raises(InputError, match=r"^step: expected the update number"):
        InjectTrainOneStepCell(network, optimizer, grads, 0)
    with pytest.raises(InputError, match=r"no gradients for update 3"):
        load_injected_gradients(clipped, 3, network.trainable_params(), config=yaml_path)


@pytest.mark.skipif(importlib.util.find_spec("mindformers") is not None, reason="tested in the MindFormers tier")
def test_the_mindformers_wrapper_module_imports_without_mindformers():
    import workbench.grads.mindformers_wrapper as wrapper_module

    assert wrapper_module.register() is None and not hasattr(wrapper_module, "MFTrainOneStepInjectCell")


def test_the_cell_and_optim_check_give_the_same_updated_weights(clipped, yaml_path):
    """The injection Cell (one optimizer over the whole network) and `workbench optim-check` (the same
    configured optimizer, slice by slice) end at the same weights for the same capture and yaml."""
    from workbench.grads.optim_check import CheckOptions, run_check

    network, _, _, _, _ = injected_step(clipped, yaml_path, BEFORE_CLIP, CLIP)
    updated: dict = {}
    run_check(clipped, yaml_path, CheckOptions(keep_updated=updated, use_mindformers=False))
    weights = ms_model.get_weights(network)
    assert sorted(updated) == sorted(weights)
    for name, value in updated.items():
        np.testing.assert_allclose(weights[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
