"""Reference-run configs from a real training config (the CheckList's canonical values).

    model, train = configs_from_file("pretrain_llama.sh", "megatron", steps=4)

Every value comes from the canonical config of that framework (with its defaults and
derivations), field by the key it is the alias of (``reference:`` in checklists/keys.yaml,
workbench/config/vocabulary.py); a value the config does not settle is an error naming what
would settle it.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..config import read_config, resolve, vocabulary
from ..config.canonical import TrainingConfig
from ..errors import InputError
from .config import ModelConfig, TrainConfig

DECAY_STYLES = ("constant", "linear", "cosine")


def _unsettled(config: TrainingConfig) -> Callable[[str], InputError]:
    def error(key: str) -> InputError:
        item = config.values.get(key)
        settle = item.settle if item is not None else "not available"
        return InputError(str(config.path), f"{key} is not settled by this config ({settle})", "set it in the config")
    return error


def model_config(config: TrainingConfig) -> ModelConfig:
    """The reference model of this config; MoE fields only for a MoE model (``requires: moe.num_experts``)."""
    return vocabulary.model_config(vocabulary.known_values(config), _unsettled(config)).validate()


def train_config(config: TrainingConfig, steps: int | None = None) -> TrainConfig:
    """The reference run of this config: its schedule over ``train.steps``, run for ``steps`` (default all)."""
    style = config.value("lr.decay_style")
    if style is None:
        raise _unsettled(config)("lr.decay_style")
    if style not in DECAY_STYLES:
        raise InputError(str(config.path), f"lr decay style {style!r} is not simulated by the reference runner",
                         f"use one of {', '.join(DECAY_STYLES)}")
    train = vocabulary.train_config(vocabulary.known_values(config), _unsettled(config))
    return replace(train, steps=steps) if steps else train


def configs_from_file(path: Path | str, framework: str, steps: int | None = None) -> tuple[ModelConfig, TrainConfig]:
    """(model, train) of the reference run that mirrors a Megatron or MindFormers config."""
    canonical = resolve(read_config(path, framework))
    return model_config(canonical), train_config(canonical, steps)
