"""``MFTrainOneStepInjectCell`` against REAL MindFormers 2.1.0: registered on import and through
``auto_register`` + ``REGISTER_PATH`` (what ``run_mindformer.py --register_path`` sets), built by
MindFormers' own ``build_wrapper`` from a yaml ``runner_wrapper`` section with the default arguments the
trainer passes, wrapping the REAL legacy LlamaForCausalLM loaded with the torch reference's pre-step
weights and MindFormers' own AdamW: one step with the injected reference gradients gives the torch
reference's updated weights (before clipping: the clipped update; after clipping: the unclipped one)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mindformers", reason="real MindFormers is not installed in this venv: the MindFormers "
                                          "tier runs with scripts/test-mindformers.sh")
pytest.importorskip("torch", reason="the torch reference needs torch")

import mindspore as ms  # noqa: E402
import real_mindformers as real  # noqa: E402
from mindformers.core.optim import AdamW  # noqa: E402
from mindformers.tools.hub.hub import HubConstants  # noqa: E402
from mindformers.tools.register import MindFormerConfig, MindFormerModuleType, MindFormerRegister  # noqa: E402
from mindformers.wrapper import MFTrainOneStepCell, build_wrapper  # noqa: E402

import workbench.grads.mindformers_wrapper as wrapper_module  # noqa: E402  (registers on import)
from workbench.grads.captured import AFTER, open_captured_step  # noqa: E402
from workbench.grads.inject_cell import load_params_before  # noqa: E402
from workbench.reference.ms_train import split_weight_decay  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the reference capture
from optim_capture import CONFIG, mindformers_yaml, reference_capture  # noqa: E402

WRAPPER_DIR = Path(wrapper_module.__file__).resolve().parent
LR, WD, BETAS, EPS, CLIP = 1e-2, 0.1, (0.9, 0.95), 1e-8, 1.0

RUNNER_WRAPPER = """\
runner_wrapper:
  type: MFTrainOneStepInjectCell
{extra}  capture_dir: {capture_dir}
  step: 1
  config: {config}
  at: {at}
  use_clip_grad: True
  max_grad_norm: {clip}
  scale_sense: 1.0
"""


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inject")
    kwargs = dict(lr=LR, weight_decay=WD, betas=BETAS, eps=EPS)
    return {"clipped": reference_capture(folder / "clipped", clip=CLIP, **kwargs),
            "unclipped": reference_capture(folder / "unclipped", clip=None, **kwargs),
            "yaml": mindformers_yaml(folder / "mindformers.yaml", lr=LR, weight_decay=WD, betas=BETAS, eps=EPS)}


def real_llama_at(capture, yaml_path):
    net = real.build_real_llama(real.llama_config_from_reference(CONFIG))
    with open_captured_step(capture, 1, config=yaml_path) as captured:
        load_params_before(captured, net)
    return net


def mindformers_adamw(net):
    decayed, rest = split_weight_decay(net)
    return AdamW([{"params": decayed, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                 learning_rate=LR, betas=BETAS, eps=EPS)


def wrapper_from_yaml(tmp_path, capture, yaml_path, net, at, extra=""):
    """``build_wrapper`` as ``BaseTrainer.create_model_wrapper`` calls it (mindformers/trainer/base_trainer.py)."""
    path = tmp_path / "runner_wrapper.yaml"
    path.write_text(RUNNER_WRAPPER.format(capture_dir=capture, config=yaml_path, at=at, clip=CLIP, extra=extra),
                    encoding="utf-8")
    config = MindFormerConfig(str(path))
    net.set_train(True)                 # Model.train does this in a MindFormers run
    return build_wrapper(config.runner_wrapper, default_args={
        "network": net, "optimizer": mindformers_adamw(net), "parallel_config": None,
        "calculate_per_token_loss": False, "global_norm_spike_threshold": 1.0, "print_separate_loss": True,
        "use_skip_data_by_global_norm": False, "lr_scheduler": None, "grouped_lr_scheduler": None})


def input_ids():
    return ms.Tensor(real.default_tokens(real.llama_config_from_reference(CONFIG), batch=1,
                                         length=CONFIG.seq_length + 1), ms.int32)


def assert_reference_update(net, capture, yaml_path):
    weights = {p.name: p.asnumpy() for p in net.trainable_params()}
    with open_captured_step(capture, 1, config=yaml_path) as captured:
        assert sorted(weights) == sorted(captured.names)
        for name in captured.names:
            np.testing.assert_allclose(weights[name], captured.read(AFTER, name), rtol=1e-6, atol=1e-7, err_msg=name)


def test_importing_the_module_registers_the_wrapper():
    cls = MindFormerRegister.get_cls(MindFormerModuleType.WRAPPER, "MFTrainOneStepInjectCell")
    assert cls is wrapper_module.MFTrainOneStepInjectCell and issubclass(cls, MFTrainOneStepCell)


@pytest.mark.parametrize("at, reference", [("before_clip", "clipped"), ("after_clip", "unclipped")])
def test_real_llama_with_injected_gradients_equals_the_reference_update(tmp_path, captures, at, reference):
    net = real_llama_at(captures["clipped"], captures["yaml"])
    wrapper = wrapper_from_yaml(tmp_path, captures["clipped"], captures["yaml"], net, at)
    assert isinstance(wrapper, wrapper_module.MFTrainOneStepInjectCell)
    loss, overflow, _, lr, global_norm = wrapper(input_ids())
    assert not bool(overflow.asnumpy()) and float(lr.asnumpy()) == pytest.approx(LR)
    assert np.isfinite(float(loss.asnumpy().reshape(-1)[0])) and float(global_norm.asnumpy().reshape(-1)[0]) > 0
    assert_reference_update(net, captures[reference], captures["yaml"])


def test_auto_register_from_register_path(tmp_path, captures, monkeypatch):
    """What run_mindformer.py --register_path DIR does: the yaml's auto_register loads the file from DIR."""
    monkeypatch.delitem(MindFormerRegister.registry[MindFormerModuleType.WRAPPER], "MFTrainOneStepInjectCell")
    monkeypatch.setattr(HubConstants, "OM_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.setattr(sys, "path", list(sys.path) + [str(WRAPPER_DIR)])
    monkeypatch.setenv("REGISTER_PATH", str(WRAPPER_DIR))
    net = real_llama_at(captures["clipped"], captures["yaml"])
    wrapper = wrapper_from_yaml(tmp_path, captures["clipped"], captures["yaml"], net, "before_clip",
                                extra="  auto_register: mindformers_wrapper.MFTrainOneStepInjectCell\n")
    loaded = MindFormerRegister.get_cls(MindFormerModuleType.WRAPPER, "MFTrainOneStepInjectCell")
    assert loaded is not wrapper_module.MFTrainOneStepInjectCell and isinstance(wrapper, loaded)
    wrapper(input_ids())
    assert_reference_update(net, captures["clipped"], captures["yaml"])


def test_a_truncated_capture_is_one_message_naming_the_file(tmp_path, captures):
    root = tmp_path / "broken"
    shutil.copytree(captures["clipped"], root)
    path = root / "step_1" / "grads" / "decoder.layers.0.mlp.linear_fc1.weight.npy"
    path.write_bytes(path.read_bytes()[:100])
    net = real_llama_at(captures["clipped"], captures["yaml"])
    with pytest.raises(ValueError) as error:
        wrapper_from_yaml(tmp_path, root, captures["yaml"], net, "before_clip")
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_optim_check_applies_mindformers_own_adamw_and_matches_the_runner_wrapper(tmp_path, captures):
    """With MindFormers installed, optim-check applies ``mindformers.core.optim.AdamW`` (one instance reused
    slice after slice: checked against a fresh one); its updated weights equal the registered runner_wrapper's
    on the real LlamaForCausalLM, and the clean capture passes."""
    from workbench.grads.optim_check import CheckOptions, run_check
    from workbench.grads.optimizer_apply import UpdatePool, apply_update, implementation
    from workbench.grads.optimizer_settings import OptimizerSettings

    impl = implementation("adamw")
    assert impl.name == "mindformers.core.optim.AdamW"
    settings = OptimizerSettings("adamw", "AdamW", LR, *BETAS, EPS, WD, None)
    pool, rng = UpdatePool(impl, settings), np.random.default_rng(0)
    for update in (1, 2, 2):
        p0, g = rng.standard_normal(64), rng.standard_normal(64) * 1e-3
        state = (None, None) if update == 1 else (rng.standard_normal(64) * 1e-4, rng.random(64) * 1e-7)
        for pooled, fresh in zip(pool.apply(WD, p0, g, update, *state), apply_update(impl, settings, WD, p0, g, update,
                                                                                       *state), strict=True):
            np.testing.assert_array_equal(pooled, fresh)

    updated: dict = {}
    rows, _, _, facts, diagnosis, _ = run_check(captures["clipped"], captures["yaml"], CheckOptions(keep_updated=updated))
    assert facts["optimizer_class"] == "mindformers.core.optim.AdamW" and not diagnosis
    assert all(row["status"] == "ok" for row in rows)
    net = real_llama_at(captures["clipped"], captures["yaml"])
    wrapper_from_yaml(tmp_path, captures["clipped"], captures["yaml"], net, "before_clip")(input_ids())
    weights = {p.name: p.asnumpy() for p in net.trainable_params()}
    assert sorted(weights) == sorted(updated)
    for name, value in updated.items():
        np.testing.assert_allclose(weights[name], value, rtol=1e-6, atol=1e-7, err_msg=name)
