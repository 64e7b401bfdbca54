"""The fix of an item that did not pass: which side, which flag or key, set to what.

Megatron is the reference a migration aligns to, so a difference is fixed on the MindFormers side,
unless that side cannot change (a value fixed by the model code, or no key sets it): then Megatron
changes. Items with a target value (both must be 0, one side must be X, turn a fused kernel off)
name it. Texts read like "MindFormers: set model.model_config.rms_norm_eps: 1e-05" or
"Megatron: remove --use-fused-rotary-pos-emb". Rules without a target fall back to the flag or key.
"""
from __future__ import annotations

import re
from typing import Any

from ..config.canonical import CanonicalValue
from ..config.registry import MISSING, load_framework, load_registry
from .rules import MANUAL, PASS, UNKNOWN, fmt, same

SIDES = ("megatron", "mindformers")
LABEL = {"megatron": "Megatron", "mindformers": "MindFormers"}
EQUALITY_RULES = {"equal", "attention_kind", "equal_where_used", "layer_pattern", "rope_scaling", "min_lr",
                  "token_drop", "bias_add", "softmax_dtype", "special_tokens", "capacity_factor", "warmup"}
YAML_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}
_FLAG = re.compile(r"^(--[A-Za-z0-9][\w-]*)")
Change = tuple[str, CanonicalValue, Any]          # (side, current value, target value)


def item_fix(item, verdict: str, values_m: list[CanonicalValue], values_f: list[CanonicalValue], ctx) -> dict[str, str]:
    """{side: text} for the sides to change; empty when the item passed or is informational."""
    if verdict in (PASS, "INFO"):
        return {}
    if item.fix:
        return {side: str(text) for side, text in item.fix.items()}
    if verdict == UNKNOWN:
        return _settle(values_m, values_f, ctx)
    changes = _changes(item, verdict, values_m, values_f, ctx)
    if changes is None:
        return {} if verdict == MANUAL and item.check else _generic(item, ctx)
    texts: dict[str, list[str]] = {}
    for side, current, target in changes:
        texts.setdefault(side, []).append(_set_text(side, current, target, ctx))
    return {side: "; ".join(dict.fromkeys(parts)) for side, parts in texts.items()}


# ------------------------------------------------------------------------- what to change
def _changes(item, verdict, values_m, values_f, ctx) -> list[Change] | None:
    params = item.params
    if item.rule in EQUALITY_RULES:
        used = _used(item, values_m, values_f)
        pairs = [(m, f) for m, f in zip(values_m[:used], values_f[:used], strict=False)
                 if m.known and f.known and not same(m.value, f.value)]
        if not pairs and params.get("recommend") is not None:
            return [(side, v, params["recommend"]) for side, values in zip(SIDES, (values_m, values_f), strict=True)
                    for v in values[:1] if not same(v.value, params["recommend"])]
        if not pairs:
            return None
        pairs = pairs[:1] if item.rule == "warmup" else pairs      # steps or fraction: one is enough
        if all(_changeable("mindformers", f, ctx) for _, f in pairs):
            return [("mindformers", f, m.value) for m, f in pairs]
        return [("megatron", m, f.value) for m, f in pairs]
    if item.rule == "each_equals":
        return [(side, v, params["value"]) for side, values in zip(SIDES, (values_m, values_f), strict=True)
                for v in values if v.known and not same(v.value, params["value"])] or None
    if item.rule == "side_equals":
        changes = []
        for side, values in zip(SIDES, (values_m, values_f), strict=True):
            allowed = params.get(side)
            allowed = allowed if isinstance(allowed, list) else [allowed] if side in params else []
            if allowed and values[0].known and not any(same(values[0].value, a) for a in allowed):
                changes.append((side, values[0], allowed[0]))
        return changes or None
    if item.rule == "fused_kernel":
        return _unfuse(values_m[0], values_f[0], verdict, ctx)
    if item.rule == "aux_loss":
        return [(side, v, 0.0) for side, v in zip(SIDES, (values_m[0], values_f[0]), strict=True)
                if v.known and v.value] or None
    if item.rule == "topkrouter_dispatch":
        return [("mindformers", values_f[0], True)]
    return None


def _used(item, values_m, values_f) -> int:
    """How many of an item's keys count: RoPE scaling compares only the factors its kind reads."""
    if item.rule != "rope_scaling":
        return len(values_m)
    from .rules_specific import _ROPE_FACTORS

    kind_m, kind_f = values_m[0].value, values_f[0].value
    return 1 if kind_m != kind_f or kind_m == "none" else 1 + _ROPE_FACTORS.get(kind_m, 1)


def _unfuse(fused_m: CanonicalValue, fused_f: CanonicalValue, verdict: str, ctx) -> list[Change]:
    """Turn the fused kernel off where it is on; where that side cannot change, fuse the other one."""
    on = [(side, v) for side, v in (("megatron", fused_m), ("mindformers", fused_f)) if v.known and v.value]
    if verdict == MANUAL or len(on) != 1:
        return [(side, v, False) for side, v in on]
    side, value = on[0]
    if _changeable(side, value, ctx):
        return [(side, value, False)]
    other, other_value = ("mindformers", fused_f) if side == "megatron" else ("megatron", fused_m)
    return [(other, other_value, True)]


def _changeable(side: str, value: CanonicalValue, ctx) -> bool:
    spec = _spec(side, value.key, ctx)
    return value.kind != "fixed" and spec is not None and spec.fixed is MISSING and bool(spec.how_to_set(side))


def _spec(side: str, key: str, ctx):
    config = ctx.megatron if side == "megatron" else ctx.mindformers
    return load_registry()[key].side(side, config.generation) if key in load_registry().keys else None


# ------------------------------------------------------------------------- how to say it
def _set_text(side: str, current: CanonicalValue, target: Any, ctx) -> str:
    spec = _spec(side, current.key, ctx)
    how = spec.how_to_set(side) if spec is not None else ""
    if side == "megatron":
        return _megatron_text(current, target, spec, how, ctx)
    names = [source.name for source in spec.sources] if spec is not None else []
    stated = current.source.split(" (")[0] if current.kind == "set" else ""
    first_alternative = how.split(" / ")[0].strip()
    same_setting = isinstance(spec.derive, dict) or first_alternative.rsplit(".", 1)[-1] == current.key.rsplit(".", 1)[-1] \
        if spec is not None else False   # the flag's key holds this very value (not an input of a formula)
    path = stated if stated in names else names[0] if names else \
        first_alternative if same_setting and re.fullmatch(r"[\w.]+", first_alternative) else ""
    if not path:
        return f"make {current.key} {fmt(target)} ({how or 'its model code'})"
    return f"set {path}: {_yaml_value(target, spec, path)}"


def _megatron_text(current: CanonicalValue, target: Any, spec, how: str, ctx) -> str:
    stated = _FLAG.match(current.source or "")
    if stated and current.kind == "set" and (target is None or isinstance(target, bool) and _bare_flag(stated.group(1), ctx)):
        return f"remove {stated.group(1)}"
    key_name = current.source.split(" (")[0] if current.kind == "set" else ""
    if re.fullmatch(r"[a-z][\w.]*", key_name) and ctx.megatron.form in ("flat-yaml", "yaml-cfg", "json"):
        return f"remove {key_name}" if target is None else f"set {key_name}: {_megatron_value(target, spec)}"
    how = _for_hardware(how, ctx)
    single = how if re.fullmatch(r"--[\w-]+", how or "") else ""
    if isinstance(target, bool) and single:
        entry = load_framework("megatron").get("flags", {}).get(single)
        on_value = entry.get("value", True) if isinstance(entry, dict) else True
        return f"add {single}" if target == on_value else f"remove {single}"
    if single and target is not None:
        return f"set {single} {_megatron_value(target, spec)}"
    return f"make {current.key} {fmt(target)} ({how or 'the launch arguments'})"


def _for_hardware(how: str, ctx) -> str:
    """``--a (MindSpeed) / --b (GPU)``: the alternative for the hardware the Megatron side runs on."""
    tag = {"ascend": "(MindSpeed)", "gpu": "(GPU)"}.get(ctx.megatron.value("runtime.hardware"))
    chosen = [alt.strip()[: -len(tag)].strip() for alt in how.split(" / ") if tag and alt.strip().endswith(tag)]
    return chosen[0] if len(chosen) == 1 else how


def _megatron_value(target: Any, spec) -> str:
    """The argument's own spelling of a canonical value (--normalization RMSNorm, not rmsnorm)."""
    raw = next((k for k, v in (spec.value_map or {}).items() if same(v, target)), None) if spec is not None else None
    return str(raw) if raw is not None else fmt(target)


def _bare_flag(flag: str, ctx) -> bool:
    """A flag written without a value (store_true / store_false) in the Megatron input."""
    raw = ctx.raw_megatron
    if raw is None:
        return False
    entry = load_framework("megatron").get("flags", {}).get(flag)
    dest = entry["dest"] if isinstance(entry, dict) and "dest" in entry else flag[2:].replace("-", "_")
    value = raw.values.get(dest)
    return value is not None and isinstance(value.value, bool)


def _yaml_value(target: Any, spec, path: str) -> str:
    source = next((s for s in spec.sources if s.name == path), None) if spec is not None else None
    if source is not None and source.negate and isinstance(target, bool):
        target = not target
    for value_map in (source.value_map if source else None, spec.value_map if spec else None):
        if value_map:
            raw = next((k for k, v in value_map.items() if same(v, target)), None)
            if raw is not None:
                target = raw
                break
    if isinstance(target, bool):
        return "True" if target else "False"
    if target is None:
        return "null"
    return YAML_DTYPES.get(target, fmt(target)) if isinstance(target, str) else fmt(target)


def _assumed(side: str, value: CanonicalValue, ctx) -> str:
    spec = _spec(side, value.key, ctx)
    return f"set {spec.how_to_set(side) if spec is not None and spec.how_to_set(side) else value.key} explicitly"


def _settle(values_m: list[CanonicalValue], values_f: list[CanonicalValue], ctx) -> dict[str, str]:
    texts = {}
    for side, values in zip(SIDES, (values_m, values_f), strict=True):
        missing = [f"state it: {v.settle}" for v in values if not v.known and v.settle]
        missing += [_assumed(side, v, ctx) for v in values if v.kind == "assumed"]
        if missing:
            texts[side] = "; ".join(dict.fromkeys(missing))
    return texts


def _generic(item, ctx) -> dict[str, str]:
    """No target value: the flags and keys that set the item's values."""
    fixes = {}
    for side, config in (("megatron", ctx.megatron), ("mindformers", ctx.mindformers)):
        parts = []
        for key in item.keys:
            spec = load_registry()[key].side(side, config.generation)
            if spec is not None and spec.fixed is MISSING and spec.how_to_set(side):
                parts += [part.strip() for part in spec.how_to_set(side).split(" / ")]
        if parts:
            fixes[side] = "check " + " / ".join(dict.fromkeys(parts))
    return fixes


def fix_line(fix: dict[str, str], separator: str = "; ") -> str:
    """``Megatron: remove --x; MindFormers: set a.b: 1`` (sides in this order)."""
    return separator.join(f"{LABEL[side]}: {fix[side]}" for side in SIDES if fix.get(side))
