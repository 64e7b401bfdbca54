"""``MFTrainOneStepInjectCell``: MindFormers' training step with captured reference gradients injected (2.1.0).

    runner_wrapper:
      type: MFTrainOneStepInjectCell
      auto_register: mindformers_wrapper.MFTrainOneStepInjectCell   # with run_mindformer.py --register_path
      capture_dir: /path/to/capture      # the step store workbench.replay.grad_capture wrote
      step: 1                            # the update to inject (step_N; counts the steps this run takes, from 1)
      arch: null                         # converters/ architecture (null: detected from the capture)
      config: null                       # a yaml giving the model sizes (e.g. this MindFormers yaml)
      at: before_clip                    # or after_clip: the optimizer alone
      use_clip_grad: True
      max_grad_norm: 1.0
      scale_sense: 1.0

It is ``MFTrainOneStepCell`` (mindformers 2.1.0 ``mindformers/wrapper/wrapper.py``) with two Cells
swapped, so MindFormers' own ``construct`` keeps its order (grads -> unscale -> local norm ->
``self.grad_reducer`` -> overflow status -> ``self.clip_grad_norm`` -> lr -> optimizer):
``at: before_clip`` wraps ``grad_reducer`` (the injected gradients replace the reduced ones, then are
checked for overflow and clipped); ``at: after_clip`` wraps ``clip_grad_norm`` (the returned global
norm stays the computed gradients' one). Without ``use_clip_grad`` both positions are the same.

How MindFormers builds it: the trainer calls ``build_wrapper(config.runner_wrapper, default_args={network,
optimizer, parallel_config, calculate_per_token_loss, global_norm_spike_threshold, print_separate_loss,
use_skip_data_by_global_norm, lr_scheduler, grouped_lr_scheduler})`` (``mindformers/trainer/base_trainer.py``
``create_model_wrapper``); ``build_wrapper`` drops ``parallel_config`` for types other than its own two
(``mindformers/wrapper/build_wrapper.py``) and ``MindFormerRegister.get_instance_from_cfg`` calls
``cls(**yaml keys, **default_args)`` after loading ``auto_register: FILE.CLASS`` from ``$REGISTER_PATH``
(``mindformers/tools/register/register.py``). The rest reaches ``MFTrainOneStepCell`` as ``**kwargs``.

On CPU the base class's overflow status (MindSpore ``TrainOneStepWithLossScaleCell.get_overflow_status``,
mindspore/nn/wrap/loss_scale.py) calls ``NPUGetFloatStatusV2``, an Ascend-only op (and its GPU path ``FloatStatus`` has no
CPU kernel either): on CPU the status here is "some gradient is inf or nan" (``ops.isfinite``). Importing this module registers the class when
mindformers is importable, and without mindformers it still imports (the class is then absent). Only
absolute ``workbench`` imports: MindFormers copies this file into its modules cache and imports the copy.
"""
from __future__ import annotations


from workbench.installed import mindformers_installed

WRAPPER_NAME = "MFTrainOneStepInjectCell"


def _build_class():
    """The wrapper class (needs mindformers and mindspore)."""
    import mindspore as ms
    from mindformers.wrapper import MFTrainOneStepCell
    from mindspore import nn, ops

    from workbench.errors import InputError
    from workbench.grads.inject_cell import (AFTER_CLIP, BEFORE_CLIP, GradientInjection, all_finite,
                                             check_position,
                                             load_injected_gradients)

    class _ThenInject(nn.Cell):
        """``cell(x)``, whose gradients (the whole output, or its first item) the injection may replace."""

        def __init__(self, cell, injection, first_of_pair: bool):
            super().__init__(auto_prefix=False)
            self.cell, self.injection, self.first_of_pair = cell, injection, first_of_pair

        def construct(self, grads):
            out = self.cell(grads)
            if self.first_of_pair:
                return self.injection(out[0]), out[1]
            return self.injection(out)

    class MFTrainOneStepInjectCell(MFTrainOneStepCell):
        """``MFTrainOneStepCell`` whose update number ``step`` uses the gradients captured in ``capture_dir``."""

        def __init__(self, network, optimizer, capture_dir=None, step=1, arch=None, config=None, at=BEFORE_CLIP,
                     use_clip_grad=False, max_grad_norm=1.0, scale_sense=1.0, **kwargs):
            try:
                at = check_position(at, "runner_wrapper.at")
                if not capture_dir:
                    raise InputError("runner_wrapper.capture_dir", f"{WRAPPER_NAME} needs the capture folder",
                                     "set it to the folder workbench.replay.grad_capture wrote")
                gradients = load_injected_gradients(capture_dir, step, optimizer.parameters, arch=arch,
                                                    config=config)
            except InputError as error:
                # MindFormers re-raises as type(e)(f"{cls}: {e}"): give it a one-message exception type
                raise ValueError(str(error)) from None
            super().__init__(network, optimizer, use_clip_grad=use_clip_grad, max_grad_norm=max_grad_norm,
                             scale_sense=scale_sense, **kwargs)
            self.injection_at = at
            injection = GradientInjection(gradients, step)
            if at == AFTER_CLIP and use_clip_grad:
                self.clip_grad_norm = _ThenInject(self.clip_grad_norm, injection, first_of_pair=True)
            else:
                self.grad_reducer = _ThenInject(self.grad_reducer, injection, first_of_pair=False)
            self.cpu_target = ms.get_context("device_target") == "CPU"

        def get_overflow_status(self, status, compute_output):
            if self.cpu_target:      # NPUGetFloatStatusV2 (and the GPU path's FloatStatus) have no CPU kernel
                return ops.logical_not(all_finite(compute_output))
            return super().get_overflow_status(status, compute_output)

    MFTrainOneStepInjectCell.__module__ = __name__
    return MFTrainOneStepInjectCell


def register():
    """Register the wrapper as a MindFormers WRAPPER; None when mindformers is absent, else the class."""
    if not mindformers_installed():
        return None
    try:
        from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    except ImportError:  # installed but not importable here: nothing to register with
        return None
    cls = _build_class()
    MindFormerRegister.register_cls(cls, module_type=MindFormerModuleType.WRAPPER)
    return cls


_registered = register()
if _registered is not None:
    MFTrainOneStepInjectCell = _registered
