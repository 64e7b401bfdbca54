"""A reference capture for the optimizer check and injection tests: one Megatron-style step of the torch
reference model (torch AdamW, Megatron's parameter groups, Megatron's clipping), captured through the real
hook (workbench.replay.grad_capture), and a MindFormers yaml that configures the optimizer.

``reference_capture`` plants faults on the reference side (``decay_1d``: weight decay on 1-D parameters;
``clip``: clipping threshold or None); the yaml plants the rest (``mindformers_yaml``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from workbench.reference.config import ModelConfig, PrecisionConfig, synthetic_batches
from workbench.reference.torch_model import build_model, loss_fn
from workbench.replay.grad_capture import capture_after_step, capture_gradients

CONFIG = ModelConfig(num_layers=2, hidden_size=32, num_attention_heads=4, num_kv_heads=2, ffn_hidden_size=48,
                     vocab_size=64, seq_length=16)


class Wrapper(torch.nn.Module):
    """Megatron's DDP and Float16Module both hold the model as ``self.module``."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args):
        return self.module(*args)


def reference_capture(root: Path, *, lr: float = 1e-2, weight_decay: float = 0.1, betas=(0.9, 0.95),
                      eps: float = 1e-8, clip: float | None = 1.0, decay_1d: bool = False, steps: int = 1,
                      loss_multiplier: float = 1.0, seed: int = 0, config: ModelConfig = CONFIG) -> Path:
    """``steps`` updates of torch AdamW, each captured (grads, params before/after, Adam state)."""
    net = build_model(config, PrecisionConfig(), seed=seed)
    model = Wrapper(net)
    named = dict(net.named_parameters())
    decayed = [p for n, p in named.items() if decay_1d or (p.ndim >= 2 and not n.endswith(".bias"))]
    plain = [p for p in named.values() if all(p is not q for q in decayed)]
    groups = [{"params": decayed, "weight_decay": weight_decay}] + ([{"params": plain, "weight_decay": 0.0}] if plain else [])
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=False)
    for update in range(1, steps + 1):
        batch = synthetic_batches(config, 1, seed=seed + update)[0]
        optimizer.zero_grad()
        logits = model(torch.as_tensor(batch["tokens"], dtype=torch.int64))
        loss = loss_fn(logits, torch.as_tensor(batch["labels"], dtype=torch.int64), torch.as_tensor(batch["loss_mask"]))
        (loss * loss_multiplier).backward()
        norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in named.values())))
        capture_gradients(model, root, update, optimizer, params=True, loss_scale=1.0, grad_norm=norm)
        if clip is not None:
            coeff = clip / (norm + 1e-6)               # Megatron megatron/core/optimizer/clip_grads.py
            if coeff < 1.0:
                for p in named.values():
                    p.grad.mul_(coeff)
        optimizer.step()
        capture_after_step(model, optimizer, root, update, grad_norm=norm, clip_grad=clip)
    return root


def mindformers_yaml(path: Path, *, optimizer: str = "AdamW", lr: float = 1e-2, weight_decay: float = 0.1,
                     betas=(0.9, 0.95), eps: float = 1e-8, clip: float | None = 1.0,
                     config: ModelConfig = CONFIG) -> Path:
    """A legacy MindFormers yaml: the model, a constant lr, the optimizer and runner_wrapper clipping."""
    beta_lines = (f"  betas: [{betas[0]}, {betas[1]}]\n" if optimizer == "AdamW"
                  else f"  beta1: {betas[0]}\n  beta2: {betas[1]}\n")
    text = (
        "model:\n  model_config:\n    type: LlamaConfig\n"
        f"    num_layers: {config.num_layers}\n    hidden_size: {config.hidden_size}\n"
        f"    num_heads: {config.num_attention_heads}\n    n_kv_heads: {config.num_kv_heads}\n"
        f"    intermediate_size: {config.ffn_hidden_size}\n    vocab_size: {config.vocab_size}\n"
        f"    seq_length: {config.seq_length}\n  arch:\n    type: LlamaForCausalLM\n"
        f"lr_schedule:\n  type: ConstantWarmUpLR\n  learning_rate: {lr}\n  warmup_steps: 0\n  total_steps: -1\n"
        f"optimizer:\n  type: {optimizer}\n{beta_lines}  eps: {eps}\n  weight_decay: {weight_decay}\n"
        "runner_config:\n  epochs: 1\n  batch_size: 1\n  sink_mode: False\n"
        "runner_wrapper:\n  type: MFTrainOneStepCell\n"
        + (f"  use_clip_grad: True\n  max_grad_norm: {clip}\n" if clip is not None else "  use_clip_grad: False\n"))
    path.write_text(text)
    return path


def as_numpy(tensors: dict) -> dict[str, np.ndarray]:
    return {name: np.asarray(value) for name, value in tensors.items()}
