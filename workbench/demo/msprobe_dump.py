"""Per-operator dumps of one forward (and optionally backward) step with mindstudio-probe (``msprobe``),
the tool users run on their clusters: the torch reference model and the MindSpore model.

Call these in a process of their own: msprobe patches the framework's APIs process-wide and its debugger
is a singleton (``python -m workbench.demo.dump_worker`` does it for the demo; the tests' dump pairs too).

    dump_torch(model, tokens, labels, out)            # out/step0/proc0/dump.json (+ stack.json, construct.json)
    dump_mindspore(net, input_ids, out)               # PyNative, as msprobe's API dump needs

On CPU msprobe's MindSpore statistics call ``mint.norm``, which has no CPU kernel: :func:`cpu_norm_for_msprobe`
gives msprobe's processor a norm computed as sqrt(sum(x*x)) in fp32 (the only change to msprobe).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def msprobe_config(out: Path, task: str = "statistics", level: str = "mix") -> Path:
    """The msprobe ``config.json`` for one dump into ``out`` (written beside it)."""
    path = out.parent / f"{out.name}.msprobe.json"
    path.write_text(json.dumps({"task": task, "dump_path": str(out), "rank": [], "step": [], "level": level,
                                task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}))
    return path


def dump_torch(model, tokens: np.ndarray, labels: np.ndarray, out: Path, task: str = "statistics",
               level: str = "mix", backward: bool = False) -> None:
    """Dump the torch model's forward (and backward) on one batch; loss over every token."""
    import torch
    from msprobe.pytorch import PrecisionDebugger

    from ..reference import torch_model

    def as_long(array):
        return torch.from_numpy(np.ascontiguousarray(array)).long()

    debugger = PrecisionDebugger(config_path=str(msprobe_config(Path(out), task, level)))
    debugger.start(model)
    logits = model(as_long(tokens))
    loss = torch_model.loss_fn(logits, as_long(labels), torch.ones(labels.shape, dtype=torch.float32))
    if backward:
        loss.backward()
    debugger.stop()
    debugger.step()


def dump_mindspore(net, input_ids: np.ndarray, out: Path, task: str = "statistics", level: str = "mix",
                   backward: bool = False) -> None:
    """Dump the MindSpore model (called with MindFormers' ``input_ids`` [b, s+1]) in PyNative mode."""
    import mindspore as ms
    from msprobe.mindspore import PrecisionDebugger

    ms.set_context(mode=ms.PYNATIVE_MODE)
    cpu_norm_for_msprobe()
    debugger = PrecisionDebugger(config_path=str(msprobe_config(Path(out), task, level)))
    step = ms.value_and_grad(net, None, net.trainable_params()) if backward else net
    debugger.start(net)
    step(ms.Tensor(np.asarray(input_ids).astype(np.int32)))
    debugger.stop()
    debugger.step()


def cpu_norm_for_msprobe() -> None:
    """msprobe's MindSpore statistics call ``mint.norm`` (no CPU kernel): give its processor sqrt(sum(x*x))."""
    import mindspore as ms
    from mindspore import mint, ops
    from msprobe.core.dump.data_dump.data_processor import mindspore_processor

    class CpuMint:
        def __getattr__(self, name):
            return getattr(mint, name)

        @staticmethod
        def norm(x):
            return ops.sqrt(ops.sum(ops.square(x.astype(ms.float32))))

    mindspore_processor.mint = CpuMint()
