"""Reference-run configs from a real training config (the CheckList's canonical values).

    model, train = configs_from_file("pretrain_llama.sh", "megatron", steps=4)

Every value comes from the canonical config of that framework (with its defaults and
derivations); a value the config does not settle is an error naming what would settle it.
"""
from __future__ import annotations

from pathlib import Path

from ..config import read_config, resolve
from ..config.canonical import TrainingConfig
from ..errors import InputError
from .config import ModelConfig, PrecisionConfig, TrainConfig

DECAY_STYLES = ("constant", "linear", "cosine")


def _known(config: TrainingConfig, key: str):
    item = config.values.get(key)
    if item is None or not item.known:
        settle = item.settle if item is not None else "not available"
        raise InputError(str(config.path), f"{key} is not settled by this config ({settle})", "set it in the config")
    return item.value


def model_config(config: TrainingConfig) -> ModelConfig:
    experts = config.value("moe.num_experts", 1) or 1
    return ModelConfig(
        num_layers=_known(config, "model.num_layers"), hidden_size=_known(config, "model.hidden_size"),
        num_attention_heads=_known(config, "model.num_attention_heads"),
        num_kv_heads=_known(config, "model.num_kv_heads"), ffn_hidden_size=_known(config, "model.ffn_hidden_size"),
        vocab_size=_known(config, "model.padded_vocab_size"), seq_length=_known(config, "model.seq_length"),
        rotary_base=float(_known(config, "model.rotary_base")), norm_epsilon=_known(config, "model.norm_epsilon"),
        qkv_bias=bool(config.value("model.qkv_bias", False)), qk_norm=bool(config.value("model.qk_norm", False)),
        **_moe_fields(config, experts)).validate()


def _moe_fields(config: TrainingConfig, experts: int) -> dict:
    """MoE settings only for a MoE model (a dense model's top-k default means nothing)."""
    if experts <= 1:
        return {}
    return {"num_experts": experts, "moe_router_topk": _known(config, "moe.router_topk"),
            "shared_expert_size": config.value("moe.shared_expert_size", 0) or 0}


def train_config(config: TrainingConfig, steps: int | None = None) -> TrainConfig:
    style = _known(config, "lr.decay_style")
    if style not in DECAY_STYLES:
        raise InputError(str(config.path), f"lr decay style {style!r} is not simulated by the reference runner",
                         f"use one of {', '.join(DECAY_STYLES)}")
    precision = PrecisionConfig(**{field: _known(config, f"precision.{field}") for field in
                                   ("param_dtype", "compute_dtype", "softmax_dtype", "norm_dtype", "rotary_dtype",
                                    "residual_dtype")}, embedding_dtype=_known(config, "precision.embedding_dtype"))
    schedule_steps = int(_known(config, "train.steps"))
    return TrainConfig(
        steps=steps or schedule_steps, schedule_steps=schedule_steps, lr=_known(config, "optimizer.lr"),
        min_lr=_known(config, "optimizer.min_lr"), warmup_steps=int(_known(config, "lr.warmup_steps")),
        decay_style=style, weight_decay=_known(config, "optimizer.weight_decay"),
        beta1=_known(config, "optimizer.beta1"), beta2=_known(config, "optimizer.beta2"),
        eps=_known(config, "optimizer.eps"), clip_grad=_known(config, "optimizer.clip_grad"),
        optimizer="adamw" if _known(config, "optimizer.bias_correction") else "adam_weight_decay",
        seed=config.value("other.seed", 1234), precision=precision)


def configs_from_file(path: Path | str, framework: str, steps: int | None = None) -> tuple[ModelConfig, TrainConfig]:
    """(model, train) of the reference run that mirrors a Megatron or MindFormers config."""
    canonical = resolve(read_config(path, framework))
    return model_config(canonical), train_config(canonical, steps)
