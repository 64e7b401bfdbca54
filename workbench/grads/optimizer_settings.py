"""The optimizer a config applies at one update, in the terms the optimizer check needs.

From a MindFormers yaml (``optimizer``, ``lr_schedule``, ``runner_wrapper``) through the canonical
config (``checklists/keys.yaml``: the same reading ``workbench checklist`` does, with defaults and their
sources), or from a Megatron config for the reference side's own settings (evidence in diagnoses).

Facts encoded:
- ``AdamW`` (mindformers 2.1.0 mindformers/core/optim/adamw.py ``_update_run_op``): ``p ← p·(1 − lr·wd)``,
  moments, bias correction ``1 − βᵗ``, ``p ← p − lr/(1 − β1ᵗ) · m / (sqrt(v/(1 − β2ᵗ)) + eps)``.
- ``AdamWeightDecay`` / ``FP32StateAdamWeightDecay`` (mindspore 2.10.0 mindspore/nn/optim/adam.py
  ``_update_run_op``; the latter, of MindFormers ≤ 1.3, keeps the moments in fp32): no bias correction,
  ``p ← p − lr · (m / (sqrt(v) + eps) + wd · p)``.
- MindFormers' grouping: no weight decay for ``.bias`` and 1-D parameters (``get_optimizer_grouped_parameters``);
  Megatron's the same (megatron/core/optimizer/__init__.py ``_get_param_groups``).
- The lr of update N is ``lr_schedule(N − 1)`` (MindFormers reads the schedule at the global step before
  the update); clipping ``runner_wrapper.use_clip_grad`` / ``max_grad_norm`` with the coefficient
  ``max_norm / (norm + 1e-6)`` applied below 1 (mindformers 2.1.0 mindformers/core/clip_grad.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import InputError

ADAMW, ADAM_WEIGHT_DECAY = "adamw", "adam_weight_decay"
# Which MindFormers optimizer.type is Adam, and with or without bias correction, is the CheckList's knowledge
# (checklists/keys.yaml optimizer.algorithm / optimizer.bias_correction): read through the canonical config.
RULE_NAMES = {ADAMW: "AdamW (bias correction)", ADAM_WEIGHT_DECAY: "AdamWeightDecay (no bias correction)"}


@dataclass(frozen=True)
class OptimizerSettings:
    """One update's optimizer: rule, hyper-parameters, lr, clipping, and where each value came from."""

    rule: str                           # adamw | adam_weight_decay
    type_name: str                      # as the config names it
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    clip: float | None                  # max global norm, None: no clipping
    no_decay_1d: bool = True            # no weight decay for .bias and 1-D parameters
    sources: dict = field(default_factory=dict, compare=False)

    @property
    def bias_correction(self) -> bool:
        return self.rule == ADAMW

    def with_(self, **changes) -> OptimizerSettings:
        return replace(self, **changes)

    def decays(self, name: str, ndim: int) -> bool:
        """Whether this parameter gets weight decay (the frameworks' grouping rule)."""
        return not (self.no_decay_1d and (name.endswith(".bias") or ndim <= 1))

    def weight_decay_of(self, name: str, ndim: int) -> float:
        return self.weight_decay if self.decays(name, ndim) else 0.0

    def describe(self) -> dict:
        return {"optimizer": self.type_name, "rule": RULE_NAMES[self.rule], "lr": self.lr, "beta1": self.beta1,
                "beta2": self.beta2, "eps": self.eps, "weight_decay": self.weight_decay,
                "clip": self.clip if self.clip else "none"}


def _known(config, key: str, path: Path):
    item = config.values.get(key)
    if item is None or not item.known:
        settle = item.settle if item is not None else key
        raise InputError(str(path), f"cannot tell {key} from this config", f"set {settle}")
    return item


def mindformers_settings(path: Path | str, update: int) -> OptimizerSettings:
    """The optimizer a MindFormers yaml applies at update ``update`` (counting from 1)."""
    from ..config import read_config, resolve

    path = Path(path)
    raw = read_config(path, "mindformers")
    config = resolve(raw)
    type_item = raw.lookup("optimizer.type")
    type_name = str(type_item.value) if type_item is not None else ""
    if config.value("optimizer.algorithm") != "adam" or config.value("optimizer.bias_correction") is None:
        raise InputError(f"{path}: optimizer.type", f"{type_name or 'no optimizer.type'} is not an Adam-family "
                         "optimizer optim-check can apply", "use an Adam type such as AdamW or AdamWeightDecay (the types "
                         "checklists/keys.yaml optimizer.bias_correction knows)")
    rule = ADAMW if config.value("optimizer.bias_correction") else ADAM_WEIGHT_DECAY
    items = {key: _known(config, key, path) for key in ("optimizer.beta1", "optimizer.beta2", "optimizer.eps",
                                                          "optimizer.weight_decay", "optimizer.clip_grad")}
    lr, lr_source = _mindformers_lr(raw, config, path, update)
    clip = float(items["optimizer.clip_grad"].value) or None
    return OptimizerSettings(
        rule, type_name, lr, float(items["optimizer.beta1"].value),
        float(items["optimizer.beta2"].value), float(items["optimizer.eps"].value),
        float(items["optimizer.weight_decay"].value), clip,
        sources={**{key.split(".")[-1]: item.source for key, item in items.items()}, "lr": lr_source,
                 "optimizer": type_item.origin if type_item is not None else ""})


def _mindformers_lr(raw, config, path: Path, update: int) -> tuple[float, str]:
    """lr(update − 1) of the yaml's schedule (one schedule simulator: workbench.audit.lr_mindformers)."""
    from ..audit.lr_check import mindformers_schedule
    from ..audit.lr_schedule import mindformers_lr_per_update

    _known(config, "optimizer.lr", path)
    schedule = mindformers_schedule(config, raw, minimum_steps=update)
    lr = float(mindformers_lr_per_update(schedule, update)[update - 1])
    return lr, f"{schedule.type or 'lr_schedule'} at global step {update - 1} ({config['optimizer.lr'].source})"


def megatron_settings(path: Path | str, update: int) -> OptimizerSettings:
    """The reference's optimizer from a Megatron config (script, args, yaml): evidence for the diagnoses."""
    from ..audit.lr_check import megatron_schedule
    from ..audit.lr_schedule import megatron_lr_per_update
    from ..config import read_config, resolve

    path = Path(path)
    raw = read_config(path, "megatron")
    config = resolve(raw)
    items = {key: _known(config, key, path) for key in ("optimizer.beta1", "optimizer.beta2", "optimizer.eps",
                                                          "optimizer.weight_decay", "optimizer.clip_grad")}
    lr = float("nan")
    if config.value("optimizer.lr") is not None and config.value("lr.decay_steps") is not None:
        lr = float(megatron_lr_per_update(megatron_schedule(config, raw), update)[update - 1])
    algorithm = config.value("optimizer.algorithm", "adam")
    if algorithm != "adam":
        raise InputError(f"{path}: --optimizer", f"{algorithm} is not Adam", "optim-check compares Adam updates")
    return OptimizerSettings(ADAMW, "Megatron adam", lr, float(items["optimizer.beta1"].value),
                             float(items["optimizer.beta2"].value), float(items["optimizer.eps"].value),
                             float(items["optimizer.weight_decay"].value),
                             float(items["optimizer.clip_grad"].value) or None,
                             sources={key.split(".")[-1]: item.source for key, item in items.items()})
