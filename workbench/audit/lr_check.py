"""The LR-schedule item: canonical configs → both schedules → step-by-step comparison."""
from __future__ import annotations

from ..config.canonical import TrainingConfig
from .rules import UNKNOWN, Outcome, fail, PASS, RuleContext

_MF_SCHEDULE_FIELDS = {"type", "learning_rate", "warmup_steps", "warmup_ratio", "total_steps", "lr_end", "warmup_lr_init"}


def _needed(config: TrainingConfig, keys: tuple[str, ...], label: str) -> list[str]:
    return [f"{label} does not say {key}: {config[key].settle}" for key in keys
            if key in config.values and not config[key].known]


def build_megatron_schedule(ctx: RuleContext):
    return megatron_schedule(ctx.megatron, ctx.raw_megatron)


def megatron_schedule(config: TrainingConfig, raw):
    """The Megatron schedule a canonical config (and its raw args, for the WSD extras) describes."""
    from .lr_schedule import MegatronSchedule

    wsd_steps = raw.lookup("lr_wsd_decay_iters") if raw else None
    wsd_style = raw.lookup("lr_wsd_decay_style") if raw else None
    return MegatronSchedule(
        lr=config.value("optimizer.lr"), min_lr=config.value("optimizer.min_lr", 0.0),
        warmup_steps=config.value("lr.warmup_steps", 0), decay_steps=config.value("lr.decay_steps"),
        style=config.value("lr.decay_style", "linear"), warmup_init=config.value("lr.warmup_init", 0.0),
        wsd_decay_steps=float(wsd_steps.value) if wsd_steps and wsd_steps.value is not None else None,
        wsd_decay_style=str(wsd_style.value) if wsd_style and wsd_style.value else "exponential")


def build_mindformers_schedule(ctx: RuleContext):
    return mindformers_schedule(ctx.mindformers, ctx.raw_mindformers)


def mindformers_schedule(config: TrainingConfig, raw, minimum_steps: int = 0):
    """The MindFormers ``lr_schedule`` of a canonical config; ``minimum_steps`` stands in for an unknown
    (or shorter) run length when only the first updates matter."""
    from .lr_schedule import MindFormersSchedule

    section = raw.lookup("lr_schedule") if raw else None
    section = section.value if section and isinstance(section.value, dict) else {}
    options = {key: value for key, value in section.items() if key not in _MF_SCHEDULE_FIELDS}
    lr_end = section.get("lr_end")
    return MindFormersSchedule(
        type=str(section.get("type", "")), learning_rate=config.value("optimizer.lr"),
        warmup_steps=int(config.value("lr.warmup_steps", 0)),
        total_steps=max(int(config.value("train.steps") or 0), minimum_steps),
        lr_end=float(lr_end) if lr_end is not None else None,
        warmup_lr_init=config.value("lr.warmup_init", 0.0), options=options)


def compare_lr_schedules(item, ctx: RuleContext) -> Outcome:
    from .lr_schedule import compare_schedules

    keys_m = ("optimizer.lr", "lr.decay_steps", "lr.warmup_steps", "lr.decay_style")
    keys_f = ("optimizer.lr", "train.steps", "lr.warmup_steps")
    missing = _needed(ctx.megatron, keys_m, "Megatron") + _needed(ctx.mindformers, keys_f, "MindFormers")
    if missing:
        return Outcome(UNKNOWN, "cannot simulate: " + "; ".join(missing))
    updates = ctx.megatron.value("train.steps") or ctx.mindformers.value("train.steps")
    comparison = compare_schedules(build_megatron_schedule(ctx), build_mindformers_schedule(ctx), int(updates),
                                   item.params.get("rtol", 1e-6))
    details = {"updates": comparison.updates, "exact": comparison.exact,
               "max_relative_difference": comparison.max_relative_difference,
               "worst_update": comparison.worst_update, "first_differing_update": comparison.first_differing_update,
               "rtol": comparison.rtol, "comparison": comparison}
    sampled = "" if comparison.exact else f" among {len(comparison.steps)} sampled updates (every breakpoint included)"
    if comparison.first_differing_update is None:
        return Outcome(PASS, f"identical over {updates} updates{sampled} (rtol {comparison.rtol:g})", details)
    first, worst = comparison.first_differing_update, comparison.worst_update
    at_first_m, at_first_f = comparison.first_values
    outcome = fail(item, f"first differs at update {first} (Megatron {at_first_m:.4g}, "
                         f"MindFormers {at_first_f:.4g}); largest relative difference "
                         f"{comparison.max_relative_difference:.3g} at update {worst} of {updates}{sampled}")
    outcome.details = details
    return outcome
