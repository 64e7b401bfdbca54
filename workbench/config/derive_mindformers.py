"""MindFormers derivations (legacy LlamaConfig and mcore-style), registered in DERIVATIONS."""
from __future__ import annotations

from .derive import Derived, Resolver, Unknown, derivation, warmup_over

MC = "model.model_config."


@derivation
def mindformers_legacy_ffn_hidden_size(r: Resolver) -> Derived | Unknown:
    """LlamaFeedForward: 4h, × (ffn_dim_multiplier+0.01), × 2/3, rounded up to multiple_of."""
    hidden = r.need("model.hidden_size")
    multiple_of = r.arg(MC + "multiple_of", "int", 256)
    multiplier = r.arg(MC + "ffn_dim_multiplier", "float")
    hidden_dim = 4 * hidden
    formula = f"4·{hidden}"
    if multiplier is not None:
        hidden_dim = int((multiplier + 0.01) * hidden_dim)
        formula = f"int(({multiplier}+0.01)·{formula})"
    hidden_dim = int(2 * hidden_dim / 3)
    rounded = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
    return Derived(rounded, f"int(2·{formula}/3) = {hidden_dim} rounded up to multiple_of {multiple_of}")


@derivation
def mindformers_mcore_activation(r: Resolver) -> Derived | Unknown:
    act = r.arg(MC + "hidden_act", "str")
    gated = r.arg(MC + "gated_linear_unit", "bool", False)
    if act is None:
        return Derived("gelu", "default: hidden_act gelu", "default")
    origin = r.origin(MC + "hidden_act")
    if act == "swiglu" or (act == "silu" and gated):
        return Derived("swiglu", origin, "set")
    if act in ("gelu", "fast_gelu") and gated:
        return Derived("geglu", origin, "set")
    return Derived({"fast_gelu": "gelu"}.get(act, act), origin, "set")


@derivation
def mindformers_legacy_shared_expert_size(r: Resolver) -> Derived | Unknown:
    count = r.arg("moe_config.shared_expert_num", "int", 0)
    if not count:
        return Derived(0, "default: moe_config.shared_expert_num 0", "default")
    expert = r.key("moe.expert_ffn_size")   # llama_layer.py:811 int(intermediate_size × shared_expert_num)
    if not expert.known:
        return Unknown(expert.settle)
    return Derived(count * expert.value, f"shared_expert_num {count} × expert FFN size {expert.value}")


@derivation
def mindformers_mcore_residual_dtype(r: Resolver) -> Derived | Unknown:
    if r.arg(MC + "fp32_residual_connection", "bool", False):
        return Derived("fp32", r.origin(MC + "fp32_residual_connection"), "set")
    if r.raw.lookup(MC + "residual_dtype") is not None:
        return Derived(r.arg(MC + "residual_dtype", "dtype"), r.origin(MC + "residual_dtype"), "set")
    return Derived(r.value("precision.compute_dtype"), "= compute dtype (fp32_residual_connection: False)")


@derivation
def mindformers_clip_grad(r: Resolver) -> Derived | Unknown:
    use_clip = r.arg("runner_wrapper.use_clip_grad", "bool", False)
    if not use_clip:
        origin = r.origin("runner_wrapper.use_clip_grad") or "default runner_wrapper.use_clip_grad: False"
        return Derived(0.0, f"no clipping ({origin})", "set" if r.origin("runner_wrapper.use_clip_grad") else "default")
    norm = r.arg("runner_wrapper.max_grad_norm", "float", 1.0)
    where = r.origin("runner_wrapper.max_grad_norm") or "default max_grad_norm 1.0"
    return Derived(norm, f"use_clip_grad ({r.origin('runner_wrapper.use_clip_grad')}), {where}", "set")


@derivation
def mindformers_total_steps(r: Resolver) -> Derived | Unknown:
    total = r.arg("lr_schedule.total_steps", "int")
    if total is not None and total > 0:
        return Derived(total, r.origin("lr_schedule.total_steps"), "set")
    where = r.origin("lr_schedule.total_steps") or "lr_schedule.total_steps absent"
    return Unknown("lr_schedule.total_steps (-1 means dataset size × epochs, known only at run time)", where)


@derivation
def mindformers_warmup_steps(r: Resolver) -> Derived | Unknown:
    ratio = r.arg("lr_schedule.warmup_ratio", "float")
    if ratio:
        total = r.key("train.steps")
        if not total.known:
            return Unknown(total.settle, f"warmup_ratio {ratio} × total_steps")
        return Derived(int(total.value * ratio), f"int(total_steps {total.value} × warmup_ratio {ratio})")
    steps = r.arg("lr_schedule.warmup_steps", "int")
    if steps is not None:
        return Derived(steps, r.origin("lr_schedule.warmup_steps"), "set")
    return Derived(0, "default: lr_schedule.warmup_steps 0", "default")


@derivation
def mindformers_warmup_fraction(r: Resolver) -> Derived | Unknown:
    return warmup_over(r, "train.steps", "total_steps", "lr_schedule.warmup_ratio or warmup_steps with total_steps")


@derivation
def mindformers_decay_steps(r: Resolver) -> Derived | Unknown:
    total, warmup = r.need("train.steps", "lr.warmup_steps")
    return Derived(total - warmup, f"total_steps {total} − warmup {warmup}")


def _micro_batches(r: Resolver) -> tuple[int, str]:
    if r.value("parallel.pipeline", 1) > 1:
        count = r.arg("parallel_config.micro_batch_num", "int", 1)
        return count, f"micro_batch_num {count} (pipeline > 1)"
    count = r.arg("runner_config.gradient_accumulation_steps", "int", 1) or 1
    return count, f"gradient_accumulation_steps {count}"


@derivation
def mindformers_micro_batches(r: Resolver) -> Derived | Unknown:
    count, formula = _micro_batches(r)
    return Derived(count, formula)


@derivation
def mindformers_global_batch_size(r: Resolver) -> Derived | Unknown:
    batch, data = r.need("train.micro_batch_size", "parallel.data")
    interleave = r.value("parallel.micro_batch_interleave", 1)
    micro, micro_formula = _micro_batches(r)
    total = batch * data * micro * interleave
    formula = f"batch_size {batch} · DP {data} · {micro_formula} · interleave {interleave}"
    if r.arg("parallel.full_batch", "bool", True) is False:
        formula += " (parallel.full_batch: False: MindFormers scales by the device count; check the log)"
    return Derived(total, formula)
