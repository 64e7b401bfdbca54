"""Shared configuration of the tiny CPU reference models (torch "Megatron-style" and
MindSpore "MindFormers-style") and of their training runs.

Both sides implement exactly the same math (see ``MATH`` below); only names, layouts and
framework conventions differ. Nothing here imports torch or mindspore.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MATH = """
embedding      h = E[tokens]                                  (gather rows; E: [vocab, hidden])
per layer      h = h + Attn(RMSNorm_attn(h));  h = h + MLP(RMSNorm_mlp(h))
RMSNorm        y = x * rsqrt(mean(x**2, -1) + eps) * w        (computed in norm dtype)
attention      q,k,v = x Wq^T (+bq), x Wk^T (+bk), x Wv^T (+bv); heads [b, s, n, d]
               q/k norm (optional, Qwen3): RMSNorm over d with weights [d], before RoPE
               RoPE rotate-half: inv = 1/base**(arange(0,d,2)/d); f = pos ⊗ inv; emb = cat(f, f)
                   x' = x*cos(emb) + rotate_half(x)*sin(emb); rotate_half(x) = cat(-x[d/2:], x[:d/2])
               GQA: query head j uses kv group j // (n / n_kv)
               P = softmax(q k^T / sqrt(d) + causal mask)     (softmax dtype);  o = (P v) Wo^T
MLP (SwiGLU)   down(silu(gate x) * up x)
MoE            logits = x Wr^T (fp32); top-k by logits; weights = softmax(top-k logits);
               out = sum_k weights_k * expert_k(x) (+ shared expert(x), ungated); no token drop, no aux loss
head           logits = RMSNorm_final(h) Wout^T (untied output layer)
loss           ce = cross_entropy(fp32 logits, labels) per token; loss = sum(ce * mask) / sum(mask)
clip           norm = sqrt(sum_p sum(g_p**2)); coeff = max_norm / (norm + 1e-6); if coeff < 1: g *= coeff
AdamW          decoupled weight decay (no decay for biases and 1-D params), bias correction
AdamWeightDecay  (MindFormers FP32StateAdamWeightDecay) m/(sqrt(v)+eps) + wd*p, no bias correction
"""


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of the tiny decoder (defaults: the project's 2-layer, hidden-64 model)."""

    num_layers: int = 2
    hidden_size: int = 64
    num_attention_heads: int = 4
    num_kv_heads: int = 2
    ffn_hidden_size: int = 176
    vocab_size: int = 128
    seq_length: int = 32
    rotary_base: float = 10000.0
    norm_epsilon: float = 1e-5
    qkv_bias: bool = False           # Qwen2
    qk_norm: bool = False            # Qwen3
    num_experts: int = 0             # 0: dense MLP; > 0: MoE in every layer (Mixtral-style)
    moe_router_topk: int = 2
    moe_ffn_hidden_size: int = 0     # 0: ffn_hidden_size
    shared_expert_size: int = 0      # 0: no shared expert
    init_std: float = 0.02

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def expert_ffn_size(self) -> int:
        return self.moe_ffn_hidden_size or self.ffn_hidden_size

    def validate(self, locate: Callable[[str], str] | None = None) -> "ModelConfig":
        """Ranges (checklists/keys.yaml), then the shapes that must divide; ``locate(field)`` names where."""
        from ..errors import InputError

        where = locate or (lambda name: f"model.{name}")
        check_ranges(self, "model", where)
        if self.hidden_size % self.num_attention_heads:
            raise InputError(where("hidden_size"), f"{self.hidden_size} is not divisible by "
                             f"num_attention_heads {self.num_attention_heads}", "choose divisible sizes")
        if self.num_attention_heads % self.num_kv_heads:
            raise InputError(where("num_kv_heads"), f"num_attention_heads {self.num_attention_heads} is not a "
                             f"multiple of num_kv_heads {self.num_kv_heads}", "choose a divisor")
        if self.head_dim % 2:
            raise InputError(where("hidden_size"), f"head dim {self.head_dim} (model.head_dim) is odd; RoPE needs "
                             "an even head dim", "fix sizes")
        if self.num_experts and self.moe_router_topk > self.num_experts:
            raise InputError(where("moe_router_topk"), f"{self.moe_router_topk} > num_experts {self.num_experts}",
                             "choose top-k <= experts")
        return self


@dataclass(frozen=True)
class PrecisionConfig:
    """Dtypes of the mixed-precision knobs (the CheckList's Mixed precision items).

    MindSpore on CPU cannot compute in bf16: that side stores bf16 and computes fp32 (and says so).
    """

    param_dtype: str = "fp32"
    compute_dtype: str = "fp32"
    embedding_dtype: str = "fp32"    # MindFormers embedding compute dtype
    softmax_dtype: str = "fp32"
    norm_dtype: str = "fp32"
    rotary_dtype: str = "fp32"
    residual_dtype: str = "fp32"


@dataclass(frozen=True)
class TrainConfig:
    """One training run: optimizer, clipping, learning-rate schedule."""

    steps: int = 2
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 0
    decay_style: str = "constant"    # Megatron --lr-decay-style; mapped to a MindFormers schedule type
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    clip_grad: float = 1.0           # 0: no clipping
    optimizer: str = "adamw"         # adamw (bias correction) | adam_weight_decay (MindFormers, none)
    seed: int = 1234
    log_local_norms: bool = False
    deterministic: bool = True       # False: the torch side accumulates samples in a shuffled order (noise band)
    schedule_steps: int = 0          # length the lr schedule is defined over (0: steps); a run may be shorter
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)

    def validate(self, locate: Callable[[str], str] | None = None) -> "TrainConfig":
        """Ranges (checklists/keys.yaml) and the choices the runners implement."""
        from ..errors import InputError

        where = locate or (lambda name: f"train.{name}")
        check_ranges(self, "train", where)
        if self.steps > MAX_STEPS:
            raise InputError(where("steps"), f"train.steps is {self.steps}, more than the {MAX_STEPS} steps a CPU "
                             "reference run takes (its lr is precomputed per step)", "run fewer steps")
        for name, choices in (("decay_style", ("constant", "linear", "cosine")),
                              ("optimizer", ("adamw", "adam_weight_decay"))):
            if getattr(self, name) not in choices:
                raise InputError(where(name), f"train.{name} is {getattr(self, name)!r}, expected one of "
                                 f"{', '.join(choices)}", f"use one of {', '.join(choices)}")
        return self

    def lr_per_update(self, framework: str) -> np.ndarray:
        """The lr each framework applies at updates 1..steps (workbench.audit.lr_schedule)."""
        from ..audit import lr_schedule as schedules

        total = self.schedule_steps or self.steps
        if framework == "megatron":
            schedule = schedules.MegatronSchedule(lr=self.lr, min_lr=self.min_lr, warmup_steps=self.warmup_steps,
                                                  decay_steps=total, style=self.decay_style)
            return schedules.megatron_lr_per_update(schedule, self.steps)
        kind = mindformers_schedule_type(self.decay_style)
        schedule = schedules.MindFormersSchedule(type=kind, learning_rate=self.lr, warmup_steps=self.warmup_steps,
                                                 total_steps=total, lr_end=self.min_lr)
        return schedules.mindformers_lr_per_update(schedule, self.steps)


MAX_STEPS = 1_000_000
"""Most steps of one reference run: each is a CPU training step, and the lr of each is precomputed."""


def check_ranges(config: Any, section: str, locate: Callable[[str], str]) -> None:
    """Every numeric field of ``config`` against the range of the canonical key it is the alias of
    (``reference:`` aliases in checklists/keys.yaml); a field at its ``unset:`` value means "not given"."""
    from ..config.aliases import NO_VALUE
    from ..config.registry import load_registry
    from ..config.vocabulary import reference_field_keys, to_canonical
    from ..input_files import expect

    registry, aliases = load_registry(), reference_field_keys()
    for item in fields(config):
        value = getattr(config, item.name)
        key, alias = aliases.get(f"{section}.{item.name}", ("", None))
        if alias is None or isinstance(value, bool) or registry[key].type not in ("int", "float"):
            continue
        if alias.unset is not NO_VALUE and value == alias.unset:
            continue
        expect(value, float, locate(item.name), f"{section}.{item.name}")
        registry[key].bounds.check(to_canonical(value, alias), locate(item.name), f"{section}.{item.name}")


def mindformers_schedule_type(decay_style: str) -> str:
    """The MindFormers ``lr_schedule.type`` for a Megatron decay style: the CheckList registry's
    ``lr.decay_style`` map (schedule class -> style), inverted."""
    from ..config.registry import load_registry
    from ..errors import InputError

    side = load_registry()["lr.decay_style"].side("mindformers", "legacy")
    matches = [cls for cls, style in (side.value_map or {}).items() if style == decay_style]
    if len(matches) != 1:
        raise InputError("train.decay_style", f"{decay_style!r} has {len(matches)} MindFormers schedule classes "
                         "in checklists/keys.yaml (lr.decay_style)", "use constant, linear or cosine")
    return matches[0]


def to_dict(config: Any) -> dict:
    return asdict(config)


def with_changes(config: Any, **changes: Any) -> Any:
    return replace(config, **changes)


def synthetic_batches(model: ModelConfig, steps: int, micro_batch_size: int = 2, seed: int = 0,
                      masked_fraction: float = 0.25) -> list[dict[str, np.ndarray]]:
    """Megatron-shaped batches: ``tokens``, ``labels`` (tokens shifted by one), ``loss_mask`` (float32).

    One batch per step; ``masked_fraction`` of positions get loss_mask 0 (as Megatron's
    ``eod_mask_loss`` / padding would), so the loss normalisation is exercised.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(steps):
        stream = rng.integers(0, model.vocab_size, size=(micro_batch_size, model.seq_length + 1), dtype=np.int64)
        mask = (rng.random((micro_batch_size, model.seq_length)) >= masked_fraction).astype(np.float32)
        mask[:, 0] = 1.0  # never an all-zero row
        batches.append({"tokens": stream[:, :-1].copy(), "labels": stream[:, 1:].copy(), "loss_mask": mask})
    return batches
