"""A tiny Megatron-core-style GPT (local spec, no Transformer Engine) on CPU.

It implements ``workbench.reference.config.MATH`` exactly, with Megatron-core parameter
names and fused layouts, so that the workbench can be exercised against a "Megatron"
side without a GPU. Parameter names (``model.named_parameters()`` order follows
Megatron's module registration order, e.g. ``linear_proj`` before ``linear_qkv``)::

    embedding.word_embeddings.weight                                  [V, h]
    decoder.layers.{i}.input_layernorm.weight                         [h]
    decoder.layers.{i}.self_attention.linear_proj.weight              [h, nh*d]
    decoder.layers.{i}.self_attention.linear_qkv.weight (+ .bias)     [ng*(nh/ng+2)*d, h]
    decoder.layers.{i}.self_attention.q_layernorm/k_layernorm.weight  [d]   (qk_norm)
    decoder.layers.{i}.pre_mlp_layernorm.weight                       [h]
    decoder.layers.{i}.mlp.linear_fc1.weight / linear_fc2.weight      [2F, h] / [h, F]
      MoE: mlp.router.weight [E, h], mlp.experts.local_experts.{j}.linear_fc1/2.weight,
           mlp.shared_experts.linear_fc1/2.weight (shared_expert_size)
    decoder.final_layernorm.weight                                    [h]
    output_layer.weight                                               [V, h]

Dtypes (``PrecisionConfig``): params stored in ``param_dtype``; matmuls in ``compute_dtype`` (fp16/bf16
operands accumulated in fp32, as accelerators do: :func:`accelerator_matmul`);
RMSNorm in ``norm_dtype``; softmax in ``softmax_dtype`` (the 1/sqrt(d) scale is applied in
compute dtype before the cast, as Megatron's local path); RoPE frequencies fp32, cos/sin
evaluated in ``rotary_dtype`` then cast to compute dtype (Megatron ``apply_rotary_pos_emb``);
residual stream in ``residual_dtype``; router logits, top-k softmax and MoE combine fp32;
logits returned fp32. The gathered embedding rows enter the network in ``embedding_dtype``
(Megatron: the activation dtype of Float16Module; checklists/keys.yaml precision.embedding_dtype),
then the residual dtype.

The layers are in :mod:`.torch_layers`; the fused layouts (``linear_qkv`` grouped per query group,
``linear_fc1`` = ``[gate; up]``) are sketched, and split/fused, by :mod:`workbench.reference.layouts`.
"""
from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig, PrecisionConfig
from .torch_layers import MLP, Dtypes, Linear, MoELayer, RMSNorm, SelfAttention, rotary_tables

class TransformerLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, dtypes: Dtypes):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.norm_epsilon, dtypes)
        self.self_attention = SelfAttention(cfg, dtypes)
        self.pre_mlp_layernorm = RMSNorm(cfg.hidden_size, cfg.norm_epsilon, dtypes)
        self.mlp = MoELayer(cfg, dtypes) if cfg.num_experts else MLP(cfg.hidden_size, cfg.ffn_hidden_size, dtypes)
        self.residual = dtypes.residual

    def forward(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = h + self.self_attention(self.input_layernorm(h), cos, sin).to(self.residual)
        return h + self.mlp(self.pre_mlp_layernorm(h)).to(self.residual)


class TransformerBlock(nn.Module):
    def __init__(self, cfg: ModelConfig, dtypes: Dtypes):
        super().__init__()
        self.layers = nn.ModuleList(TransformerLayer(cfg, dtypes) for _ in range(cfg.num_layers))
        self.final_layernorm = RMSNorm(cfg.hidden_size, cfg.norm_epsilon, dtypes)


class WordEmbedding(nn.Embedding):
    """The rows of ``tokens``, gathered from the weight cast to ``embedding_dtype``. A module of its own, as
    Megatron's ``VocabParallelEmbedding`` is: a per-module dump (msprobe mix level) then has its row, which
    the dump comparison matches with MindFormers' ``tok_embeddings`` cell."""

    def __init__(self, cfg: ModelConfig, dtypes: Dtypes):
        super().__init__(cfg.vocab_size, cfg.hidden_size, dtype=dtypes.param)
        self.rows_dtype = dtypes.embedding

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.weight.to(self.rows_dtype))


class LanguageModelEmbedding(nn.Module):
    def __init__(self, cfg: ModelConfig, dtypes: Dtypes):
        super().__init__()
        self.word_embeddings = WordEmbedding(cfg, dtypes)


class GPTModel(nn.Module):
    """``model(tokens [b,s] int64) -> fp32 logits [b,s,V]``."""

    def __init__(self, cfg: ModelConfig, precision: PrecisionConfig):
        super().__init__()
        self.config, self.dtypes = cfg, Dtypes(precision)
        self.embedding = LanguageModelEmbedding(cfg, self.dtypes)
        self.decoder = TransformerBlock(cfg, self.dtypes)
        self.output_layer = Linear(cfg.hidden_size, cfg.vocab_size, self.dtypes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        cos, sin = rotary_tables(tokens.shape[1], cfg.head_dim, cfg.rotary_base, self.dtypes.rotary)
        rows = self.embedding.word_embeddings(tokens)
        h = rows.to(self.dtypes.residual)
        for layer in self.decoder.layers:
            h = layer(h, cos, sin)
        return self.output_layer(self.decoder.final_layernorm(h)).float()


def initialise(model: nn.Module, std: float, seed: int) -> None:
    """normal(0, std) for matrices (drawn in fp32, in parameter order), ones for 1-D norm
    weights, zeros for biases; one ``torch.Generator`` seeded with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.zero_()
            elif param.ndim == 1:
                param.fill_(1.0)
            else:
                values = torch.empty(param.shape, dtype=torch.float32).normal_(0.0, std, generator=generator)
                param.copy_(values)


def build_model(model: ModelConfig, precision: PrecisionConfig, seed: int) -> GPTModel:
    """The Megatron-style GPT with deterministic initial weights from ``seed``."""
    gpt = GPTModel(model.validate(), precision)
    initialise(gpt, model.init_std, seed)
    return gpt


def loss_fn(logits: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """``sum(ce * mask) / sum(mask)`` with per-token cross entropy of fp32 logits."""
    ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    mask = loss_mask.reshape(-1).float()
    return torch.sum(ce * mask) / torch.sum(mask)
