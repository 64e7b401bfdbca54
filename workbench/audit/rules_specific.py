"""Rules written for one CheckList item each (registered in RULES by name)."""
from __future__ import annotations

from .rules import MANUAL, PASS, RISK, UNKNOWN, Outcome, equal, fail, fmt, pair_text, rule, same, unknown_outcome


def _attention_kind(kv_heads: int, heads: int | None) -> str:
    if heads is not None and kv_heads == heads:
        return "MHA"
    return "MQA" if kv_heads == 1 else f"GQA ({kv_heads} groups)"


@rule
def attention_kind(item, ctx, megatron, mindformers):
    outcome = equal(item, ctx, megatron, mindformers)
    if outcome.verdict == UNKNOWN:
        return outcome
    kind_m = _attention_kind(megatron[0].value, ctx.megatron.value("model.num_attention_heads"))
    kind_f = _attention_kind(mindformers[0].value, ctx.mindformers.value("model.num_attention_heads"))
    outcome.message += f" — Megatron {kind_m}, MindFormers {kind_f}"
    return outcome


@rule
def vocabulary(item, ctx, megatron, mindformers):
    padded_m, padded_f = megatron[0], mindformers[0]
    if not padded_m.known and padded_f.known and (decided := _tokenizer_vocabulary(item, ctx, padded_f.value)):
        return decided
    if unknown := unknown_outcome([padded_m], [padded_f]):
        return unknown
    if not same(padded_m.value, padded_f.value):
        return fail(item, f"padded vocabulary Megatron {padded_m.value} vs MindFormers {padded_f.value}")
    notes = []
    for label, raw in (("Megatron", megatron[1]), ("MindFormers", mindformers[1])):
        if raw.known and raw.value != padded_m.value:
            notes.append(f"{label} vocabulary {raw.value} is padded to {padded_m.value}: pad the weights "
                         f"(workbench convert --pad-vocab-to {padded_m.value})")
    if padded_m.value % 16:
        return Outcome(RISK, f"both {padded_m.value}, not a multiple of 16 (recommended)" + "; " .join([""] + notes))
    return Outcome(PASS, f"both {padded_m.value}" + "; ".join([""] + notes))


def _tokenizer_vocabulary(item, ctx, vocab_f: int) -> Outcome | None:
    """Megatron's vocabulary comes from the tokenizer, padded to a multiple of
    --make-vocab-size-divisible-by × TP: decided when MindFormers' size is no such multiple."""
    divisor = ctx.megatron.value("model.make_vocab_size_divisible_by")
    tensor = ctx.megatron.value("parallel.tensor")
    if not divisor or not tensor:
        return None
    multiple = divisor * tensor
    if vocab_f % multiple:
        return fail(item, f"Megatron pads the tokenizer's vocabulary to a multiple of {multiple} "
                          f"(--make-vocab-size-divisible-by {divisor} × TP {tensor}); MindFormers {vocab_f} is not one")
    sizes = f"exactly {vocab_f}" if multiple == 1 else f"{vocab_f - multiple + 1}..{vocab_f}"
    return Outcome(MANUAL, f"Megatron pads the tokenizer's vocabulary to a multiple of {multiple} "
                           f"(--make-vocab-size-divisible-by {divisor} × TP {tensor}): it equals MindFormers' {vocab_f} "
                           f"when the tokenizer given to --tokenizer-model has {sizes} tokens; check its size")


def _dropless(value) -> bool:
    return value is None or value < 0


@rule
def capacity_factor(item, ctx, megatron, mindformers):
    if unknown := unknown_outcome(megatron, mindformers):
        return unknown
    cf_m, cf_f = megatron[0].value, mindformers[0].value
    if _dropless(cf_m) and _dropless(cf_f):
        return Outcome(PASS, "dropless on both sides")
    if _dropless(cf_m) != _dropless(cf_f):
        dropless = "Megatron" if _dropless(cf_m) else "MindFormers"
        return fail(item, f"{dropless} is dropless, the other drops tokens ({pair_text(megatron, mindformers)})")
    if not same(cf_m, cf_f):
        return fail(item, pair_text(megatron, mindformers))
    experts = ctx.mindformers.value("moe.num_experts") or ctx.megatron.value("moe.num_experts")
    topk = ctx.mindformers.value("moe.router_topk") or ctx.megatron.value("moe.router_topk")
    upper = experts / topk if experts and topk else None
    if upper is not None and not 1 <= cf_m <= upper:
        return Outcome(RISK, f"both {fmt(cf_m)}, outside [1, experts/top-k = {fmt(upper)}] recommended for alignment")
    return Outcome(PASS, f"both {fmt(cf_m)}")


@rule
def aux_loss(item, ctx, megatron, mindformers):
    if unknown := unknown_outcome(megatron, mindformers):
        return unknown
    if not same(megatron[0].value, mindformers[0].value):
        return fail(item, pair_text(megatron, mindformers) + "; turn it off (0) on both for alignment")
    value = megatron[0].value
    if value >= item.params.get("max", 0.05):
        return Outcome(RISK, f"both {fmt(value)}: keep it below {fmt(item.params.get('max', 0.05))}, and 0 for alignment")
    if value > 0:
        return Outcome(RISK, f"both {fmt(value)}: set 0 for alignment (the printed losses include it differently)")
    return Outcome(PASS, "off on both sides")


@rule
def softmax_dtype(item, ctx, megatron, mindformers):
    flash_m = ctx.megatron.value("fused.flash_attention")
    flash_f = ctx.mindformers.value("fused.flash_attention")
    if flash_m and flash_f:
        return Outcome(PASS, "FlashAttention on both sides: the softmax runs inside the fused kernel (fp32 "
                             "accumulation), so --attention-softmax-in-fp32 / softmax_compute_type do not apply "
                             f"({pair_text(megatron, mindformers)})")
    return equal(item, ctx, megatron, mindformers)


@rule
def warmup(item, ctx, megatron, mindformers):
    steps_m, fraction_m = megatron
    steps_f, fraction_f = mindformers
    if steps_m.known and steps_f.known:
        if not same(steps_m.value, steps_f.value):
            return fail(item, f"warmup Megatron {fmt(steps_m.value)} steps vs MindFormers {fmt(steps_f.value)} steps")
        return Outcome(PASS, f"both {fmt(steps_m.value)} steps")
    if fraction_m.known and fraction_f.known:
        message = (f"warmup fraction Megatron {fmt(fraction_m.value)} (of decay iters) vs MindFormers "
                   f"{fmt(fraction_f.value)} (of total steps)")
        return fail(item, message) if not same(fraction_m.value, fraction_f.value) else Outcome(PASS, message)
    return unknown_outcome([steps_m], [steps_f]) or Outcome(UNKNOWN, "warmup cannot be compared")


@rule
def lr_schedule(item, ctx, megatron, mindformers):
    from .lr_check import compare_lr_schedules

    return compare_lr_schedules(item, ctx)


@rule
def sft_template(item, ctx, megatron, mindformers):
    if unknown := unknown_outcome(megatron, mindformers):
        return unknown
    if megatron[0].value or mindformers[0].value:
        return Outcome(MANUAL, item.check)
    return Outcome(PASS, "pretraining on both sides: no chat template involved")


@rule
def special_tokens(item, ctx, megatron, mindformers):
    if not any(value.known for value in megatron):
        named = ", ".join(f"{v.key.rsplit('.', 1)[-1]}={fmt(v.value)}" for v in mindformers if v.known)
        return Outcome(MANUAL, f"Megatron takes bos/eos/pad from its tokenizer: check the tokenizer given to "
                               f"--tokenizer-model (tokenizer_config.json) against MindFormers {named or 'defaults'}")
    return equal(item, ctx, megatron, mindformers)


@rule
def position_table(item, ctx, megatron, mindformers):
    """max_position_embeddings bounds the RoPE table: informational unless it is below the sequence length."""
    if unknown := unknown_outcome(megatron, mindformers):
        return unknown
    short = [f"{label} {fmt(value.value)} < seq_length {fmt(config.value('model.seq_length'))}"
             for label, value, config in (("Megatron", megatron[0], ctx.megatron), ("MindFormers", mindformers[0], ctx.mindformers))
             if config.value("model.seq_length") and value.value < config.value("model.seq_length")]
    if short:
        return fail(item, "; ".join(short) + ": the position table does not cover the sequence")
    if not same(megatron[0].value, mindformers[0].value):
        return Outcome(PASS, f"{pair_text(megatron, mindformers)}: informational, it only bounds the RoPE table "
                             "(both cover the sequence length)")
    return Outcome(PASS, f"both {fmt(megatron[0].value)} (informational)")


@rule
def bias_add(item, ctx, megatron, mindformers):
    """Keys: the bias-add dtype, then the switches that create biases; not applicable without biases."""
    switches = megatron[1:] + mindformers[1:]
    if all(value.known and not value.value for value in switches):
        return Outcome(PASS, "not applicable: no linear or q/k/v biases on either side")
    return equal(item, ctx, megatron[:1], mindformers[:1])


@rule
def token_drop(item, ctx, megatron, mindformers):
    """Which tokens drop, and padding to capacity, matter only where tokens can drop."""
    cf_m, cf_f = ctx.megatron.value("moe.capacity_factor"), ctx.mindformers.value("moe.capacity_factor")
    if ctx.megatron["moe.capacity_factor"].known and ctx.mindformers["moe.capacity_factor"].known \
            and _dropless(cf_m) and _dropless(cf_f):
        return Outcome(PASS, "not applicable: dropless on both sides (no capacity, no padding)")
    return equal(item, ctx, megatron, mindformers)


@rule
def min_lr(item, ctx, megatron, mindformers):
    """The decay's end: unused by a schedule that never decays (Megatron constant, MindFormers ConstantWarmUpLR)."""
    constant = [label for label, config in (("Megatron", ctx.megatron), ("MindFormers", ctx.mindformers))
                if config.value("lr.decay_style") == "constant"]
    if constant:
        return Outcome(PASS, f"not applicable: {' and '.join(constant)} never decay{'s' if len(constant) == 1 else ''} "
                             f"(constant schedule), so the minimum lr is unused ({pair_text(megatron, mindformers)}); "
                             "the decay style item compares the schedules")
    return equal(item, ctx, megatron, mindformers)


@rule
def topkrouter_dispatch(item, ctx, megatron, mindformers):
    """Legacy MindFormers' TopKRouter dispatch op: recommended on where tokens can drop."""
    if ctx.mindformers.generation != "legacy":
        return Outcome(PASS, "not applicable: mcore-style MindFormers dispatches like Megatron")
    if _dropless(ctx.mindformers.value("moe.capacity_factor", -1)):
        return Outcome(PASS, "not applicable: MindFormers is dropless (no capacity dispatch)")
    if unknown := unknown_outcome([], mindformers):
        return unknown
    if mindformers[0].value:
        return Outcome(PASS, "use_fused_ops_topkrouter: True (the guide's setting)")
    return fail(item, "MindFormers use_fused_ops_topkrouter: False; set moe_config.use_fused_ops_topkrouter: True "
                      "(with enable_sdrop: True) as the alignment guide recommends")


@rule
def decoupled_lr(item, ctx, megatron, mindformers):
    """Megatron's decoupled lr needs a MindFormers grouped lr schedule; values cannot be compared directly."""
    decoupled, grouped = megatron[0].value, mindformers[0].value
    if decoupled is None and grouped is None:
        return Outcome(PASS, "one learning rate for every parameter on both sides")
    if decoupled is None:
        return fail(item, "MindFormers sets a grouped_lr_schedule, Megatron has no --decoupled-lr")
    if grouped is None:
        return fail(item, f"Megatron --decoupled-lr {fmt(decoupled)} gives the embedding and output layer their own lr; "
                          "MindFormers has no grouped_lr_schedule")
    return Outcome(MANUAL, f"Megatron --decoupled-lr {fmt(decoupled)}: check that MindFormers' grouped_lr_schedule gives "
                           "exactly the embedding and output layer that schedule")


@rule
def equal_where_used(item, ctx, megatron, mindformers):
    """Values that matter only where a feature is on (its first key: MTP depth, MLA's q LoRA rank): PASS
    when neither side uses it, else equal. ``params.feature`` names it in the verdict."""
    if unknown := unknown_outcome(megatron[:1], mindformers[:1]):
        return unknown
    if not megatron[0].value and not mindformers[0].value:
        return Outcome(PASS, f"no {item.params.get('feature', item.title.lower())} on either side")
    return equal(item, ctx, megatron, mindformers)


# The factors each RoPE scaling kind reads, after the kind itself: (factor), (factor, original positions),
# (factor, original positions, beta fast, beta slow, mscale, mscale all dim).
_ROPE_FACTORS = {"linear": 1, "ntk": 1, "llama3": 2, "yarn": 6}


@rule
def rope_scaling(item, ctx, megatron, mindformers):
    """Keys: the scaling kind, then its factors; only the factors the kind reads are compared."""
    if unknown := unknown_outcome(megatron[:1], mindformers[:1]):
        return unknown
    kind_m, kind_f = megatron[0].value, mindformers[0].value
    if kind_m != kind_f:
        return fail(item, f"RoPE scaling Megatron {kind_m} vs MindFormers {kind_f}")
    if kind_m == "none":
        return Outcome(PASS, "no RoPE scaling on either side")
    used = 1 + _ROPE_FACTORS.get(kind_m, 1)
    outcome = equal(item, ctx, megatron[:used], mindformers[:used])
    outcome.message = f"{kind_m}: {outcome.message}"
    return outcome


def _without_last_run(pattern: str) -> str:
    return pattern.rsplit("+", 1)[0] + "+" + pattern.rsplit("+", 1)[-1].split("*")[0] if "+" in pattern \
        else pattern.split("*")[0]


@rule
def layer_pattern(item, ctx, megatron, mindformers):
    """MoE layer patterns (run-length text). Models of different depth compare their shape: the same dense
    prefix and the same last run (the depth itself is the Number of layers item)."""
    outcome = equal(item, ctx, megatron, mindformers)
    if outcome.verdict == PASS or outcome.verdict == UNKNOWN:
        return outcome
    if ctx.megatron.value("model.num_layers") != ctx.mindformers.value("model.num_layers") and \
            _without_last_run(megatron[0].value) == _without_last_run(mindformers[0].value):
        return Outcome(PASS, f"{pair_text(megatron, mindformers)}: the same pattern over a different depth "
                             "(the Number of layers item compares the depth)")
    return outcome
