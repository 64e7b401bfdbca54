"""MindFormers-style training of the MindSpore reference model (``MFTrainOneStepCell`` semantics).

One update = forward/backward (jitted by default) -> per-parameter sums of squares (``local_norm``) ->
global norm -> clip with ``coeff = max_norm / (norm + 1e-6)`` when coeff < 1 -> optimizer with the lr of
this update (``train.lr_per_update("mindformers")``; the first update uses lr(0)).

Optimizer order = MindFormers grouping: decayed parameters first, then ``.bias`` and 1-D parameters (no
weight decay), each group in network order. ``adamw`` is ``mindspore.experimental.optim.AdamW`` (bias
correction, torch-equivalent); ``adam_weight_decay`` is ``nn.AdamWeightDecay`` (no bias correction).
MindSpore CPU has no bf16 optimizer kernels, so bf16 parameters are updated through fp32 master copies
and cast back after every update (storage bf16, compute fp32).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops

from ..mindspore_quiet import quiet_constant_tensor_warning
from ..replay.contracts import input_ids_from_megatron  # noqa: F401  (one implementation, re-exported)
from .artifacts import save_grads  # noqa: F401  (re-exported)
from .config import TrainConfig, with_changes
from .mindformers_log import MindFormersLogWriter

IGNORE_TOKEN_ID = -100


@dataclass
class StepResult:
    """One update: loss, pre-clip global norm, applied lr, per-parameter sums of squares (optimizer order)."""

    loss: float
    global_norm: float
    lr: float
    local_norms: dict[str, float] = field(default_factory=dict)
    grads: dict[str, np.ndarray] | None = field(default=None, repr=False)
    elapsed_s: float = 0.0
    step: int = 0


def split_weight_decay(model: nn.Cell) -> tuple[list[Parameter], list[Parameter]]:
    """(decayed, not decayed): no weight decay for ``.bias`` and 1-D parameters (MindFormers rule)."""
    decayed, rest = [], []
    for param in model.trainable_params():
        (rest if param.name.endswith(".bias") or len(param.shape) == 1 else decayed).append(param)
    return decayed, rest


@dataclass(frozen=True)
class OptimizerFaults:
    """Deliberate optimizer bugs (off by default), planted by name from ``datasets/demo_faults.yaml``:
    ``weight_decay_1d``: the no-decay group (biases, 1-D parameters) is decayed too (the group and the
    parameter order stay as they are); ``bias_correction=False``: Adam without bias correction
    (``nn.AdamWeightDecay``) where the config asks for ``adamw``."""

    weight_decay_1d: bool = False
    bias_correction: bool = True


NO_OPTIMIZER_FAULTS = OptimizerFaults()


def _make_optimizer(train: TrainConfig, decayed: list, rest: list,
                    faults: OptimizerFaults = NO_OPTIMIZER_FAULTS) -> nn.Cell:
    rest_decay = train.weight_decay if faults.weight_decay_1d else 0.0
    groups = [{"params": decayed, "weight_decay": train.weight_decay}, {"params": rest, "weight_decay": rest_decay}]
    groups = [group for group in groups if group["params"]]
    if train.optimizer == "adamw" and not faults.bias_correction:
        train = with_changes(train, optimizer="adam_weight_decay")
    if train.optimizer == "adamw":
        from mindspore.experimental.optim import AdamW
        return AdamW(groups, lr=float(train.lr), betas=(train.beta1, train.beta2), eps=train.eps)
    if train.optimizer == "adam_weight_decay":
        return nn.AdamWeightDecay(groups, learning_rate=float(train.lr), beta1=train.beta1, beta2=train.beta2,
                                  eps=train.eps)
    raise ValueError(f"train.optimizer: expected 'adamw' or 'adam_weight_decay', got {train.optimizer!r}")


def norms_and_clip(grads: tuple, max_norm: float):
    """local sums of squares (fp32), global norm, grads scaled by min(max/(norm+1e-6), 1)."""
    squares = [ops.sum(ops.square(ops.cast(g, ms.float32))) for g in grads]
    local = ops.stack(squares)
    global_norm = ops.sqrt(ops.addn(squares))
    if max_norm > 0:
        coeff = ops.minimum(max_norm / (global_norm + 1e-6), 1.0)
        grads = tuple(ops.cast(ops.cast(g, ms.float32) * coeff, g.dtype) for g in grads)
    return grads, local, global_norm


class MindFormersStyleTrainer:
    """Train ``model`` (an ``ms_model.LlamaForCausalLM``) the way MindFormers' one-step cell does."""

    def __init__(self, model: nn.Cell, train: TrainConfig, jit: bool = True, keep_grads: bool = False,
                 faults: OptimizerFaults = NO_OPTIMIZER_FAULTS):
        self.model, self.train_config, self.keep_grads = model, train, keep_grads
        decayed, rest = split_weight_decay(model)
        self.params = tuple(decayed + rest)
        self.param_names = tuple(p.name for p in self.params)
        self.sizes = tuple(int(np.prod(p.shape)) for p in self.params)
        self.masters = self._fp32_masters()
        n_decayed = len(decayed)
        targets = self.masters or self.params
        self.optimizer = _make_optimizer(train, list(targets[:n_decayed]), list(targets[n_decayed:]), faults)
        self._lrs = np.asarray(train.lr_per_update("mindformers"), dtype=np.float64)
        self.updates = 0
        model.set_train(True)
        grad_fn = ms.value_and_grad(model, None, self.params)
        clip = float(train.clip_grad)

        def forward_backward(input_ids, labels):
            loss, grads = grad_fn(input_ids, labels)
            clipped, local, global_norm = norms_and_clip(grads, clip)
            return loss, grads, clipped, local, global_norm

        self._forward_backward = ms.jit(forward_backward) if jit else forward_backward

    def _fp32_masters(self) -> tuple:
        """fp32 copies for bf16 parameters (CPU has no bf16 optimizer kernels); () when none are bf16."""
        if all(p.dtype != ms.bfloat16 for p in self.params):
            return ()
        return tuple(Parameter(ops.cast(p, ms.float32), name=f"fp32_master.{p.name}") for p in self.params)

    def lr_at(self, update: int) -> float:
        """lr of update ``update`` (0-based); past the configured steps the schedule is extended."""
        if update >= len(self._lrs):
            self._lrs = np.asarray(with_changes(self.train_config, steps=update + 1).lr_per_update("mindformers"))
        return float(self._lrs[update])

    def _set_lr(self, lr: float) -> None:
        """Write the update's lr into the optimizer. ``ops.assign``, not ``set_data``: after the first
        call the optimizer's compiled kernel keeps reading the old data of a ``set_data`` Parameter."""
        value = Tensor(lr, ms.float32)
        lr_params = getattr(self.optimizer, "lrs", None) or [self.optimizer.learning_rate]
        for lr_param in lr_params:
            ops.assign(lr_param, value)

    def _apply(self, grads: tuple) -> None:
        """Optimizer update (grads as ``mutable`` so the optimizer's jitted kernels compile once)."""
        if self.masters:
            grads = tuple(ops.cast(g, ms.float32) for g in grads)
        with quiet_constant_tensor_warning():
            self.optimizer(ms.mutable(tuple(grads)))
        for param, master in zip(self.params, self.masters, strict=True) if self.masters else ():
            param.set_data(ops.cast(master, param.dtype))       # low-precision params refreshed from fp32 masters

    def _injected(self, grads: dict) -> tuple:
        missing = [name for name in self.param_names if name not in grads]
        if missing:
            raise KeyError(f"injected gradients lack {missing[:3]}{'...' if len(missing) > 3 else ''}")
        return tuple(Tensor(np.asarray(grads[name], np.float32), p.dtype) for name, p in
                     zip(self.param_names, self.params, strict=True))

    def step(self, input_ids: np.ndarray | None = None, labels: np.ndarray | None = None,
             grads: dict[str, np.ndarray] | None = None) -> StepResult:
        """One update on ``input_ids`` [b, s+1] (``labels`` [b, s+1] with -100: optional).

        ``grads`` (name -> array) replaces the computed gradients (optimizer isolation); without
        ``input_ids`` no forward runs and the loss is NaN.
        """
        if input_ids is None and grads is None:
            raise ValueError("step: expected input_ids, injected grads, or both")
        start = time.perf_counter()
        loss = float("nan")
        if input_ids is not None:
            ids = Tensor(np.asarray(input_ids), ms.int32)
            label_tensor = ids if labels is None else Tensor(np.asarray(labels), ms.int32)
            loss, raw, clipped, local, global_norm = self._forward_backward(ids, label_tensor)
            loss = float(loss.asnumpy())
        if grads is not None:
            raw = self._injected(grads)
            clipped, local, global_norm = norms_and_clip(raw, float(self.train_config.clip_grad))
        lr = self.lr_at(self.updates)
        self._set_lr(lr)
        self._apply(clipped)
        self.updates += 1
        kept = None
        if self.keep_grads:
            kept = {name: ops.cast(g, ms.float32).asnumpy() for name, g in zip(self.param_names, raw, strict=True)}
        squares = local.asnumpy()
        return StepResult(loss=loss, global_norm=float(global_norm.asnumpy()), lr=lr,
                          local_norms={name: float(v) for name, v in zip(self.param_names, squares, strict=True)},
                          grads=kept, elapsed_s=time.perf_counter() - start, step=self.updates)

    def train(self, steps: int, batches, log_path: str | Path | None = None,
              grads_dir: str | Path | None = None, injected: dict | None = None) -> list[StepResult]:
        """Run ``steps`` updates over ``batches`` (input_ids arrays, (input_ids, labels) pairs or Megatron
        dicts with tokens/labels/loss_mask), writing MindFormers log lines and ``step_{N}/<name>.npy`` grads.
        ``injected``: update number (from 1) -> gradients (name -> array) that replace the computed ones; such an
        update runs no forward pass (its gradients are given; its loss is logged as nan)."""
        batches = list(batches)
        if len(batches) < steps:
            raise ValueError(f"train: {steps} steps need {steps} batches, got {len(batches)}")
        keep = self.keep_grads
        self.keep_grads = keep or grads_dir is not None
        writer = MindFormersLogWriter(log_path) if log_path is not None else None
        if writer is not None:
            writer.param_groups([(p.name, tuple(p.shape)) for p in self.params], self.train_config.weight_decay)
        results = []
        try:
            for index in range(steps):
                given = (injected or {}).get(index + 1)
                input_ids, labels = as_model_inputs(batches[index])
                result = self.step(*((input_ids, labels) if given is None else (None, None)), grads=given)
                results.append(result)
                if grads_dir is not None:
                    save_grads(grads_dir, result.step, result.grads, {"lr": result.lr, "loss_scale": 1.0,
                                                                      "grad_norm": result.global_norm, "side": "mindformers"})
                if writer is not None:
                    self._log(writer, result, steps, len(input_ids))
        finally:
            self.keep_grads = keep
            if writer is not None:
                writer.close()
        return results

    def _log(self, writer: MindFormersLogWriter, result: StepResult, steps: int, batch: int) -> None:
        step_ms = result.elapsed_s * 1000.0
        flops = 6.0 * sum(self.sizes) * batch * self.model.config.seq_length  # fwd+bwd estimate
        local = None
        if self.train_config.log_local_norms:
            local = (self.sizes, np.array(list(result.local_norms.values()), dtype=np.float32))
        writer.step(epoch=1, epochs=1, step=result.step, steps=steps, loss=result.loss, per_step_ms=step_ms,
                    lr=result.lr, global_norm=result.global_norm, global_batch_size=batch,
                    throughput_tflops=flops / max(step_ms, 1e-3) / 1e9, local_norm=local)


def as_model_inputs(batch) -> tuple[np.ndarray, np.ndarray | None]:
    """input_ids array | (input_ids, labels) | Megatron dict -> (input_ids, labels or None)."""
    if isinstance(batch, dict):
        return input_ids_from_megatron(batch["tokens"], batch["labels"], batch["loss_mask"])
    if isinstance(batch, (tuple, list)):
        return np.asarray(batch[0]), (None if batch[1] is None else np.asarray(batch[1]))
    return np.asarray(batch), None
