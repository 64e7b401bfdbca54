"""Named derivations: how each framework computes a value the config does not state.

Each function takes the side's :class:`~workbench.config.resolver.Resolver` and returns
``Derived(value, formula)`` or ``Unknown(settle)``. ``r.need(*keys)`` returns known inputs and
otherwise ends the derivation as unknown, naming what would settle it. Keys name the
functions in ``checklists/keys.yaml`` (``derive: NAME``). Facts: docs/framework-facts.md §2.
"""
from __future__ import annotations

import math
from typing import Callable

from .resolver import Derived, Resolver, Unknown

DERIVATIONS: dict[str, Callable[[Resolver], Derived | Unknown]] = {}


def derivation(function: Callable[[Resolver], Derived | Unknown]) -> Callable[[Resolver], Derived | Unknown]:
    DERIVATIONS[function.__name__] = function
    return function


# ------------------------------------------------------------------------- shared
@derivation
def head_dim(r: Resolver) -> Derived | Unknown:
    hidden, heads = r.need("model.hidden_size", "model.num_attention_heads")
    return Derived(hidden // heads, f"hidden_size / heads = {hidden} / {heads}")


# ------------------------------------------------------------------------- Megatron model
@derivation
def megatron_kv_heads(r: Resolver) -> Derived | Unknown:
    if r.arg("group_query_attention", "bool", False):
        groups = r.arg("num_query_groups", "int", 1)
        return Derived(groups, r.origin("num_query_groups") or "--num-query-groups default 1 with --group-query-attention",
                       "set" if r.origin("num_query_groups") else "default")
    return Derived(r.need("model.num_attention_heads"),
                   "= num_attention_heads (no --group-query-attention: --num-query-groups is ignored)")


@derivation
def megatron_ffn_hidden_size(r: Resolver) -> Derived | Unknown:
    hidden = r.need("model.hidden_size")
    if r.arg("swiglu", "bool", False):
        return Derived(int((4 * hidden * 2 / 3) / 64) * 64, f"int((4·{hidden}·2/3)/64)·64 (--swiglu)")
    return Derived(4 * hidden, f"4·hidden_size = 4·{hidden}")


@derivation
def megatron_padded_vocab_size(r: Resolver) -> Derived | Unknown:
    vocab = r.key("model.vocab_size")
    if not vocab.known:
        return Unknown("--vocab-size or --padded-vocab-size (otherwise the tokenizer decides the vocabulary)")
    divisor, tensor_parallel = r.need("model.make_vocab_size_divisible_by", "parallel.tensor")
    multiple = divisor * tensor_parallel
    padded = math.ceil(vocab.value / multiple) * multiple
    return Derived(padded, f"ceil({vocab.value}/({divisor}·TP {tensor_parallel}))·{multiple}")


@derivation
def megatron_activation(r: Resolver) -> Derived | Unknown:
    if r.arg("swiglu", "bool", False):
        return Derived("swiglu", r.origin("swiglu"), "set")
    if r.arg("squared_relu", "bool", False):
        return Derived("squared_relu", r.origin("squared_relu"), "set")
    return Derived("gelu", "default: gelu (no --swiglu)", "default")


@derivation
def megatron_qkv_bias(r: Resolver) -> Derived | Unknown:
    if r.arg("add_qkv_bias", "bool", False):
        return Derived(True, r.origin("add_qkv_bias"), "set")
    linear = r.key("model.add_bias_linear")
    return Derived(linear.value, f"= add_bias_linear ({linear.source})", linear.kind)


@derivation
def megatron_hardware(r: Resolver) -> Derived | Unknown:
    from .registry import load_framework

    indicators = load_framework("megatron").get("ascend_indicators", {})
    for name in indicators.get("args", []):
        if r.raw.lookup(name) is not None:
            return Derived("ascend", f"MindSpeed flag --{name.replace('_', '-')} ({r.origin(name)})")
    for name in indicators.get("environment", []):
        if f"env.{name}" in r.raw.launcher:
            return Derived("ascend", f"NPU environment variable {name} ({r.raw.launcher[f'env.{name}'].origin})")
    return Derived("gpu", "no MindSpeed flag or NPU variable seen: Megatron-LM on GPU", "default")


@derivation
def megatron_fused_rms_norm(r: Resolver) -> Derived | Unknown:
    if r.raw.lookup("use_fused_rmsnorm") is not None:
        return Derived(r.arg("use_fused_rmsnorm", "bool"), r.origin("use_fused_rmsnorm"), "set")
    if r.value("runtime.hardware") == "ascend":
        return Derived(False, "MindSpeed without --use-fused-rmsnorm", "default")
    impl = r.arg("transformer_impl", "str", "transformer_engine")
    fused = impl == "transformer_engine"
    return Derived(fused, f"--transformer-impl {impl} ({'TE fused norm' if fused else 'local torch norm'})",
                   "set" if r.origin("transformer_impl") else "default")


# ------------------------------------------------------------------------- Megatron precision
@derivation
def megatron_compute_dtype(r: Resolver) -> Derived | Unknown:
    if r.arg("bf16", "bool", False):
        return Derived("bf16", r.origin("bf16"), "set")
    if r.arg("fp16", "bool", False):
        return Derived("fp16", r.origin("fp16"), "set")
    if r.raw.lookup("params_dtype") is not None:
        return Derived(r.arg("params_dtype"), r.origin("params_dtype"), "set")
    return Derived("fp32", "default: fp32 (neither --bf16 nor --fp16)", "default")


@derivation
def megatron_grad_reduce_dtype(r: Resolver) -> Derived | Unknown:
    if r.arg("grad_reduce_in_bf16", "bool", False):  # core_v0.12.1 arguments.py:591 (wins over fp32 accumulation)
        return Derived("bf16", r.origin("grad_reduce_in_bf16"), "set")
    if r.arg("accumulate_allreduce_grads_in_fp32", "bool", False):
        return Derived("fp32", r.origin("accumulate_allreduce_grads_in_fp32"), "set")
    compute = r.value("precision.compute_dtype")
    if compute == "bf16":
        return Derived("fp32", "--bf16 implies fp32 gradient accumulation and reduction")
    return Derived(compute, "= compute dtype (main grads in the parameter dtype)")


@derivation
def megatron_norm_dtype(r: Resolver) -> Derived | Unknown:
    if r.value("fused.rms_norm"):
        return Derived("fp32", "fused norm kernel computes in fp32")
    return Derived(r.value("precision.compute_dtype"), "= compute dtype (unfused torch norm)")


@derivation
def megatron_softmax_dtype(r: Resolver) -> Derived | Unknown:
    for flag in ("attention_softmax_in_fp32", "apply_query_key_layer_scaling"):
        if r.arg(flag, "bool", False):
            return Derived("fp32", r.origin(flag), "set")
    return Derived(r.value("precision.compute_dtype"), "= compute dtype (no --attention-softmax-in-fp32)")


@derivation
def megatron_residual_dtype(r: Resolver) -> Derived | Unknown:
    if r.arg("fp32_residual_connection", "bool", False):
        return Derived("fp32", r.origin("fp32_residual_connection"), "set")
    return Derived(r.value("precision.compute_dtype"), "= compute dtype (no --fp32-residual-connection)")


@derivation
def megatron_loss_dtype(r: Resolver) -> Derived | Unknown:
    if r.arg("fp16_lm_cross_entropy", "bool", False):
        return Derived(r.value("precision.compute_dtype"), r.origin("fp16_lm_cross_entropy"), "set")
    return Derived("fp32", "cross entropy in fp32 (no --fp16-lm-cross-entropy)", "default")


# ------------------------------------------------------------------------- Megatron training
def _world_size(r: Resolver) -> tuple[int | None, str]:
    if r.raw.lookup("world_size") is not None:
        return r.arg("world_size", "int"), r.origin("world_size")
    per_node = r.raw.launcher.get("nproc_per_node")
    nodes = r.raw.launcher.get("nnodes")
    node_text = "1" if nodes is None or nodes.unresolved else str(nodes.value)
    if per_node is None or per_node.unresolved or nodes is not None and nodes.unresolved:
        return None, ""
    if not str(per_node.value).isdigit() or not node_text.isdigit():  # elastic 'MIN:MAX', '--nproc_per_node gpu'
        return None, ""
    return int(per_node.value) * int(node_text), f"torchrun {per_node.value}×{node_text} ({per_node.origin})"


@derivation
def megatron_data_parallel(r: Resolver) -> Derived | Unknown:
    if r.raw.lookup("data_parallel_size") is not None:
        return Derived(r.arg("data_parallel_size", "int"), r.origin("data_parallel_size"), "set")
    world, origin = _world_size(r)
    if world is None:
        return Unknown("torchrun --nproc_per_node and --nnodes (the world size)")
    tensor, pipeline, context = r.need("parallel.tensor", "parallel.pipeline", "parallel.context")
    model_parallel = tensor * pipeline * context
    return Derived(world // model_parallel, f"world {world} / (TP·PP·CP {model_parallel}); world from {origin}")


@derivation
def megatron_sequence_parallel(r: Resolver) -> Derived | Unknown:
    requested = r.arg("sequence_parallel", "bool", False)
    if requested and r.need("parallel.tensor") == 1:
        return Derived(False, f"{r.origin('sequence_parallel')} is switched off by Megatron at TP=1")
    return Derived(requested, r.origin("sequence_parallel") or "default: off", "set" if requested else "default")


@derivation
def megatron_global_batch_size(r: Resolver) -> Derived | Unknown:
    micro, data = r.need("train.micro_batch_size", "parallel.data")
    return Derived(micro * data, f"micro_batch_size·DP = {micro}·{data} (no --global-batch-size)")


@derivation
def megatron_micro_batches(r: Resolver) -> Derived | Unknown:
    total, micro, data = r.need("train.global_batch_size", "train.micro_batch_size", "parallel.data")
    return Derived(total // (micro * data), f"GBS/(MBS·DP) = {total}/({micro}·{data})")


def _per_batch(r: Resolver, samples_arg: str) -> tuple[float | None, str]:
    samples = r.arg(samples_arg, "int")
    gbs = r.value("train.global_batch_size")
    if samples is None or not gbs:
        return None, ""
    return samples / gbs, f"--{samples_arg.replace('_', '-')} {samples} / GBS {gbs}"


@derivation
def megatron_train_steps(r: Resolver) -> Derived | Unknown:
    if r.raw.lookup("train_iters") is not None:
        return Derived(r.arg("train_iters", "int"), r.origin("train_iters"), "set")
    steps, formula = _per_batch(r, "train_samples")
    return Derived(int(steps), formula) if steps is not None else Unknown("--train-iters")


@derivation
def megatron_decay_steps(r: Resolver) -> Derived | Unknown:
    if r.raw.lookup("lr_decay_iters") is not None:
        return Derived(r.arg("lr_decay_iters", "int"), r.origin("lr_decay_iters"), "set")
    steps, formula = _per_batch(r, "lr_decay_samples")
    if steps is not None:
        return Derived(steps, formula)
    train = r.key("train.steps")
    if not train.known:
        return Unknown(f"--lr-decay-iters or --train-iters ({train.settle})")
    return Derived(train.value, f"= train iters ({train.source}) when --lr-decay-iters is unset")


@derivation
def megatron_warmup_steps(r: Resolver) -> Derived | Unknown:
    fraction = r.arg("lr_warmup_fraction", "float")
    if fraction is not None:
        decay = r.key("lr.decay_steps")
        if not decay.known:
            return Unknown(decay.settle)
        steps = fraction * decay.value
        return Derived(steps, f"--lr-warmup-fraction {fraction:g} × decay steps {decay.value:g}")
    if r.raw.lookup("lr_warmup_samples") is not None and r.arg("lr_warmup_samples", "int"):
        steps, formula = _per_batch(r, "lr_warmup_samples")
        if steps is not None:
            return Derived(steps, formula)
    if r.raw.lookup("lr_warmup_iters") is not None:
        return Derived(r.arg("lr_warmup_iters", "int"), r.origin("lr_warmup_iters"), "set")
    return Derived(0, "default: no warmup (--lr-warmup-iters 0)", "default")


def warmup_over(r: Resolver, denominator_key: str, label: str, settle: str) -> Derived | Unknown:
    """Warmup as a fraction of ``denominator_key`` (Megatron: decay steps; MindFormers: total steps)."""
    warmup, denominator = r.key("lr.warmup_steps"), r.key(denominator_key)
    if not (warmup.known and denominator.known) or not denominator.value:
        return Unknown(settle)
    return Derived(warmup.value / denominator.value, f"warmup {warmup.value} / {label} {denominator.value}")


@derivation
def megatron_warmup_fraction(r: Resolver) -> Derived | Unknown:
    return warmup_over(r, "lr.decay_steps", "decay steps", "--lr-warmup-fraction or --lr-warmup-iters with --train-iters")


from . import derive_megatron_kernels, derive_mindformers, derive_mindformers_moe, derive_moe_rope  # noqa: E402,F401,E501
