"""Megatron-style training of the torch reference model on CPU.

One iteration = one micro-batch (dp = 1, no gradient accumulation): forward, masked-mean
loss, backward, global-norm clipping with Megatron's coefficient
``max_norm / (norm + 1e-6)`` (applied only when < 1), optimizer step.

* Parameter groups as Megatron's ``_get_param_groups``: weight decay for >= 2-D weights, none
  for ``*.bias`` and 1-D parameters. The decayed group comes first (the embedding is the first
  parameter); inside a group, parameters keep model order. This is the "optimizer order" of
  ``StepResult.local_norms`` and of the ``local_norm/`` log lines.
* ``optimizer: adamw``: ``torch.optim.AdamW`` (decoupled weight decay, bias correction) as
  Megatron's adam. ``adam_weight_decay``: MindFormers' ``AdamWeightDecay`` (no bias
  correction, ``p -= lr * (m / (sqrt(v) + eps) + wd * p)``), for comparison tests.
* Parameters stored in fp16/bf16 get fp32 master copies in the optimizer (Megatron's
  ``Float16OptimizerWithFloat16Params``); gradients are cast to fp32 first. No loss scaling:
  the printed loss scale is 1.0.
* Update k uses ``lr_per_update[k-1]``; the logged lr is the next update's (Megatron logs
  after ``opt_param_scheduler.step``).
* ``grad_norm``, ``local_norms`` and saved gradients are taken *before* clipping.
* Deterministic: fixed seed, CPU kernels, and one intra-op thread while stepping (restored
  afterwards). One thread is also the fastest setting for this tiny model.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .artifacts import save_grads  # noqa: F401  (re-exported)
from .config import TrainConfig
from .megatron_log import IterationRecord, format_iteration_line, format_local_norm_line
from .torch_model import loss_fn


@dataclass
class StepResult:
    """One iteration: loss, pre-clip global grad norm, applied lr, per-parameter sums of squares."""

    loss: float
    grad_norm: float
    lr: float
    local_norms: dict[str, float] = field(default_factory=dict)
    grads: dict[str, np.ndarray] | None = None
    elapsed_s: float = 0.0


def megatron_param_groups(model: torch.nn.Module) -> tuple[list[str], list[str]]:
    """``(decayed names, not-decayed names)``, each in model order."""
    decayed, not_decayed = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (not_decayed if name.endswith(".bias") or param.ndim == 1 else decayed).append(name)
    return decayed, not_decayed


class AdamWeightDecay(torch.optim.Optimizer):
    """MindFormers ``AdamWeightDecay`` / ``FP32StateAdamWeightDecay``: no bias correction."""

    def __init__(self, params, lr: float, betas: tuple[float, float], eps: float, weight_decay: float):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["exp_avg"], state["exp_avg_sq"] = torch.zeros_like(param), torch.zeros_like(param)
                m, v, grad = state["exp_avg"], state["exp_avg_sq"], param.grad
                m.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                update = m / (v.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update = update + group["weight_decay"] * param
                param.sub_(group["lr"] * update)


def weights_as_numpy(model: nn.Module) -> dict[str, np.ndarray]:
    """Every parameter as an fp32 numpy array, by Megatron name, in parameter order."""
    return {name: p.detach().float().numpy().copy() for name, p in model.named_parameters()}


def load_numpy_weights(model: nn.Module, weights: dict[str, np.ndarray]) -> None:
    """Copy arrays (cast to each parameter's dtype) into the model; names must match exactly."""
    params = dict(model.named_parameters())
    if set(params) != set(weights):
        raise KeyError(f"weights do not match the model: only in weights {sorted(set(weights) - set(params))}, "
                       f"only in model {sorted(set(params) - set(weights))}")
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(torch.from_numpy(np.asarray(weights[name])).to(param.dtype).reshape(param.shape))


@contextmanager
def single_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _as_tensor(array, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(array)).to(dtype)


class MegatronStyleTrainer:
    """Train ``model`` (from ``torch_model.build_model``) the way Megatron-LM would."""

    def __init__(self, model: torch.nn.Module, train: TrainConfig, framework_lr=None):
        self.model, self.config = model, train
        if not train.deterministic:      # determinism off: every linear layer sums in another order (split-K)
            for module in model.modules():
                if hasattr(module, "split_reduction"):
                    module.split_reduction = True
        self.lr_per_update = np.asarray(train.lr_per_update("megatron") if framework_lr is None else framework_lr,
                                        dtype=np.float64)
        decayed, not_decayed = megatron_param_groups(model)
        self.order = decayed + not_decayed
        params = dict(model.named_parameters())
        self.params = {name: params[name] for name in self.order}
        self.masters = {name: p if p.dtype == torch.float32 else torch.nn.Parameter(p.detach().float().clone())
                        for name, p in self.params.items()}
        groups = [{"params": [self.masters[n] for n in names], "weight_decay": wd}
                  for names, wd in ((decayed, train.weight_decay), (not_decayed, 0.0)) if names]
        self.optimizer = self._build_optimizer(groups)
        self.iteration = 0
        self.consumed_samples = 0

    def _build_optimizer(self, groups: list[dict]) -> torch.optim.Optimizer:
        train = self.config
        options = dict(lr=float(self.lr_for_update(1)), betas=(train.beta1, train.beta2), eps=train.eps)
        if train.optimizer == "adamw":
            return torch.optim.AdamW(groups, weight_decay=train.weight_decay, foreach=False, **options)
        if train.optimizer == "adam_weight_decay":
            return AdamWeightDecay(groups, weight_decay=train.weight_decay, **options)
        raise ValueError(f"train.optimizer {train.optimizer!r} is not 'adamw' or 'adam_weight_decay'")

    def lr_for_update(self, k: int) -> float:
        """The lr of update k (1-based); past the given schedule, Megatron's own schedule at k-1."""
        if k <= len(self.lr_per_update):
            return float(self.lr_per_update[k - 1])
        from ..audit import lr_schedule as schedules

        train = self.config
        schedule = schedules.MegatronSchedule(lr=train.lr, min_lr=train.min_lr, warmup_steps=train.warmup_steps,
                                              decay_steps=train.steps, style=train.decay_style)
        return float(schedules.megatron_lr_at(schedule, np.array([k - 1], dtype=np.float64))[0])

    def _gradients(self) -> dict[str, torch.Tensor]:
        """fp32 gradients in optimizer order (zeros for parameters that got none)."""
        return {name: (torch.zeros(p.shape, dtype=torch.float32) if p.grad is None else p.grad.float())
                for name, p in self.params.items()}

    def _clip(self, grads: dict[str, torch.Tensor], norm: torch.Tensor) -> None:
        if self.config.clip_grad <= 0:
            return
        coefficient = self.config.clip_grad / (float(norm) + 1.0e-6)
        if coefficient < 1.0:
            for grad in grads.values():
                grad.mul_(coefficient)

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _apply_update(self, grads: dict[str, torch.Tensor], lr: float) -> None:
        for name, master in self.masters.items():
            master.grad = grads[name]
        self._set_lr(lr)
        self.optimizer.step()
        with torch.no_grad():
            for name, param in self.params.items():
                if param is not self.masters[name]:
                    param.copy_(self.masters[name])

    def _forward_backward(self, batch: dict) -> torch.Tensor:
        """The loss of ``batch``, gradients accumulated. Determinism off (``train.deterministic: False``, a
        GPU run without Megatron's --deterministic-mode): the samples are forwarded and their gradients
        accumulated one at a time in a shuffled order, and every linear layer reduces in two halves (split-K),
        so sums are rounded in another order, as atomics and split reductions do on a GPU (seeded per update:
        the demo stays reproducible)."""
        tokens, labels = _as_tensor(batch["tokens"], torch.int64), _as_tensor(batch["labels"], torch.int64)
        mask = _as_tensor(batch["loss_mask"], torch.float32)
        if self.config.deterministic:
            loss = loss_fn(self.model(tokens), labels, mask)
            loss.backward()
            return loss.detach()
        total, loss = torch.sum(mask), torch.zeros(())
        order = np.random.default_rng((self.config.seed, self.iteration)).permutation(len(tokens))
        for sample in order.tolist():
            part = loss_fn(self.model(tokens[sample:sample + 1]), labels[sample:sample + 1],
                           mask[sample:sample + 1]) * (torch.sum(mask[sample]) / total)
            part.backward()
            loss = loss + part.detach()
        return loss

    def step(self, batch: dict, keep_grads: bool = False, capture: Path | str | None = None) -> StepResult:
        """One iteration on ``batch`` (numpy ``tokens``, ``labels``, ``loss_mask``); ``capture``: the step store
        the real capture hook writes this update into (gradients, weights before and after, Adam's state)."""
        from ..replay.grad_capture import capture_after_step, capture_gradients

        start = time.perf_counter()
        lr = self.lr_for_update(self.iteration + 1)
        with single_thread():
            self.model.zero_grad(set_to_none=True)
            loss = self._forward_backward(batch)
            grads = self._gradients()
            squares = {name: torch.sum(grad * grad) for name, grad in grads.items()}
            norm = torch.sqrt(torch.stack(list(squares.values())).sum())
            kept = {name: grad.detach().clone().numpy() for name, grad in grads.items()} if keep_grads else None
            if capture is not None:                     # Megatron's hook point: before optimizer.step()
                self._set_lr(lr)
                capture_gradients(self.model, capture, self.iteration + 1, self.optimizer, params=True,
                                  loss_scale=1.0, grad_norm=float(norm))
            self._clip(grads, norm)
            self._apply_update(grads, lr)
            if capture is not None:
                capture_after_step(self.model, self.optimizer, capture, self.iteration + 1, grad_norm=float(norm),
                                   clip_grad=self.config.clip_grad or None)
        self.iteration += 1
        self.consumed_samples += int(np.asarray(batch["tokens"]).shape[0])
        return StepResult(loss=float(loss.detach()), grad_norm=float(norm), lr=lr,
                          local_norms={name: float(value) for name, value in squares.items()}, grads=kept,
                          elapsed_s=time.perf_counter() - start)

    def log_lines(self, result: StepResult, train_iters: int, global_batch_size: int) -> list[str]:
        """The Megatron iteration line of the step just taken (+ its local-norm lines)."""
        finite = bool(np.isfinite(result.loss))
        record = IterationRecord(iteration=self.iteration, train_iters=train_iters,
                                 consumed_samples=self.consumed_samples, elapsed_ms=result.elapsed_s * 1000.0,
                                 learning_rate=self.lr_for_update(self.iteration + 1),
                                 global_batch_size=global_batch_size, lm_loss=result.loss, loss_scale=1.0,
                                 grad_norm=result.grad_norm, nan_iterations=0 if finite else 1)
        lines = [format_iteration_line(record)]
        if self.config.log_local_norms:
            lines += [format_local_norm_line(name, value) for name, value in result.local_norms.items()]
        return lines

    def train(self, steps: int, batches, log_path: Path | str | None = None,
              grads_dir: Path | str | None = None) -> list[StepResult]:
        """``steps`` iterations over ``batches``; optional Megatron log file; ``grads_dir``: every update captured
        by Megatron's capture hook (gradients, weights before and after, Adam's state)."""
        train_iters = max(self.config.steps, self.iteration + steps)
        results, lines = [], []
        batch_iterator = iter(batches)
        for _ in range(steps):
            batch = next(batch_iterator)
            result = self.step(batch, capture=grads_dir)   # the real capture hook (docs/step-store.md)
            lines += self.log_lines(result, train_iters, int(np.asarray(batch["tokens"]).shape[0]))
            results.append(result)
        if log_path is not None:
            from ..fileio import write_text

            write_text(log_path, "\n".join(lines) + "\n")
        return results
