"""What each prepared run sets on each side (:mod:`.prepare`): the settings of datasets/align_runs.yaml a side
can take, then, round by round, the settings that move every value the CheckList still finds different to
the reference's (MindFormers follows Megatron; where MindFormers fixes a value, Megatron follows it), and
what is left different on purpose or unresolved."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .prepare_keys import Request, Unsettable, setting_for

if TYPE_CHECKING:
    from .prepare import Context
    from .prepare_runs import Run


def side_settings(ctx: Context, settings: dict[str, Any], side: str) -> list[Request]:
    """The settings a side can take (one fixed to another value is left to the audit, which says so)."""
    requests = []
    for key, value in settings.items():
        if isinstance(value, dict):
            if side not in value:
                continue
            value = value[side]
        if value is not None and _reads_as(ctx.inputs[side], key, value):
            continue                                    # the input already says so (or its default does)
        request = Request(key, value, _why(key, value))
        if _probe(ctx, side, request):
            requests.append(request)
    return requests


def _reads_as(config, key: str, value: Any) -> bool:
    current = config.values.get(key)
    return (current is not None and current.known and current.value == value
            and isinstance(current.value, bool) == isinstance(value, bool))


def _probe(ctx: Context, side: str, request: Request) -> bool:
    try:
        setting_for(request.key, request.value, side, ctx.generation, _side_hardware(ctx, side), lambda name: False,
                    ctx.runs.set_through, request.why)
    except Unsettable as reason:
        request.reason = str(reason)
        return False
    return True


def _side_hardware(ctx: Context, side: str) -> str:
    return ctx.hardware if side == "megatron" else ctx.mf_hardware


def _why(key: str, value: Any) -> str:
    return f"{key} = {value!r} for alignment (datasets/align_runs.yaml)" if value is not None else \
        f"{key} removed for alignment (datasets/align_runs.yaml)"


def audit_fixes(ctx: Context, report, settings: dict[str, Any]) -> dict[str, list[Request]]:
    """Settings that move each value the CheckList still finds different to the reference's."""
    from ..audit.rules import INFO, MISMATCH, RISK

    fixes: dict[str, list[Request]] = {"megatron": [], "mindformers": []}
    for item in report.items:   # INFO: parallel sizes differ (informational, issue 12): aligned here all the same
        if item.verdict not in (MISMATCH, RISK, INFO) or item.id in ctx.runs.differences:
            continue
        for value_m, value_f in zip(item.megatron, item.mindformers, strict=True):
            if not (value_m.known and value_f.known) or value_m.value == value_f.value or value_m.key in settings:
                continue
            for side, request in _fix_value(ctx, value_m.key, value_m.value, value_f.value, item.title):
                fixes[side].append(request)
                fixes[side].extend(Request(key, value, f"{key} removed with {request.key} ({request.why})"
                                           if value is None else f"{key} = {value!r} with {request.key}")
                                   for key, value in ctx.runs.set_with.get(request.key, {}).items())
    for side, requests in fixes.items():            # once per key; a key set with another goes its way
        withs = {key for request in requests for key in ctx.runs.set_with.get(request.key, {})}
        kept: dict[str, Request] = {}
        for request in requests:
            if request.key not in kept and (request.key not in withs or request.why.startswith(request.key)):
                kept[request.key] = request
        fixes[side] = list(kept.values())
    return fixes


def _fix_value(ctx: Context, key: str, megatron_value: Any, mindformers_value: Any, title: str):
    request = Request(key, megatron_value, f"{title}: as the reference (Megatron {megatron_value!r})")
    if _probe(ctx, "mindformers", request):
        return [("mindformers", request)]
    if "fixed" not in request.reason:
        return []                                        # derived on MindFormers: follows the other settings
    request = Request(key, mindformers_value, f"{title}: MindFormers cannot change it ({mindformers_value!r})")
    return [("megatron", request)] if _probe(ctx, "megatron", request) else []


def leftovers(ctx: Context, report, run: Run) -> tuple[dict[str, str], list[str]]:
    from ..audit.rules import INFO, MISMATCH, RISK

    planned, unresolved = {}, []
    for item in report.items:
        if item.verdict not in (MISMATCH, RISK, INFO):
            continue
        if item.id in ctx.runs.differences:
            planned[item.id] = ctx.runs.differences[item.id]
        elif ctx.keep_parallel and item.section.lower().startswith("parallel"):
            planned[item.id] = "kept as in the inputs (align prepare --keep-parallel)"
        elif item.verdict != INFO and "mindformers" in run.sides:
            unresolved.append(f"{item.id} {item.verdict}: {item.message}")
    return planned, unresolved
