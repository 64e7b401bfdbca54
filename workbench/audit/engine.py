"""Run the CheckList on a Megatron config and a MindFormers config: the library entry point."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..config import read_config, resolve
from ..config.canonical import CanonicalValue, RawConfig, TrainingConfig, is_critical
from ..config.registry import load_framework
from .checklist import Item, load_checklist
from .fixes import item_fix
from .rules import MISMATCH, PASS, RISK, RULES, UNKNOWN, VERDICTS, RuleContext

HARDWARE_CHOICES = ("auto", "same", "cross")


@dataclass
class ItemResult:
    section: str
    id: str
    title: str
    verdict: str
    severity: str
    message: str
    why: str
    fix: dict[str, str]
    megatron: list[CanonicalValue]
    mindformers: list[CanonicalValue]
    details: dict = field(default_factory=dict)


@dataclass
class AuditReport:
    megatron: TrainingConfig
    mindformers: TrainingConfig
    items: list[ItemResult]
    hardware: str                     # "same" | "cross"
    hardware_source: str
    assumptions: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counter = Counter(item.verdict for item in self.items)
        return {verdict: counter.get(verdict, 0) for verdict in VERDICTS}

    def exit_code(self, strict: bool = False) -> int:
        counts = self.counts()
        return 1 if counts[MISMATCH] or (strict and counts[RISK]) else 0

    def critical(self) -> list[str]:
        """What the reader must know first: assumed values and the notes that can change a verdict."""
        notes = [f"Megatron: {note}" for note in self.megatron.notes if is_critical(note)]
        notes += [f"MindFormers: {note}" for note in self.mindformers.notes if is_critical(note)]
        return [f"assumed: {text}" for text in self.assumptions] + notes

    def item(self, item_id: str) -> ItemResult:
        return next(result for result in self.items if result.id == item_id)


def _assume_run_length(mindformers_raw: RawConfig, megatron: TrainingConfig, mindformers: TrainingConfig,
                       assumptions: list[str]) -> TrainingConfig:
    """MindFormers total_steps -1 is only known at run time: simulate Megatron's run length, and say so."""
    steps = megatron.values.get("train.steps")
    if mindformers["train.steps"].known or steps is None or not steps.known:
        return mindformers
    assumed = CanonicalValue("train.steps", steps.value, "assumed",
                             f"assumed = Megatron train iters {steps.value} ({steps.source}); "
                             f"lr_schedule.total_steps is only known at run time")
    assumptions.append(f"MindFormers total_steps taken as Megatron's {steps.value} train iterations "
                       "(lr_schedule.total_steps is -1 or absent): set it explicitly to check the real run length")
    return resolve(mindformers_raw, overrides={"train.steps": assumed})


def _not_interpreted(raw: RawConfig) -> list[str]:
    """Arguments the CheckList did not read, left out where they hold Megatron's own default (or nothing)."""
    if raw.form not in ("shell", "flat-yaml", "json", "yaml-cfg"):
        return []
    ignored = set(load_framework("megatron").get("ignored", []))
    defaults = load_framework("megatron_defaults").get("defaults", {})
    return sorted(name for name, value in raw.values.items() if name not in raw.accessed and name not in ignored
                  and value.value not in (None, "", "None", "null")
                  and not (name in defaults and _is_default(value.value, defaults[name])))


def _is_default(value, default) -> bool:
    if isinstance(value, bool) or isinstance(default, bool) or default is None:
        return str(value).lower() == str(default).lower()
    try:
        return float(value) == float(default)
    except (TypeError, ValueError):
        return str(value) == str(default)


def _hardware(megatron: TrainingConfig, mindformers: TrainingConfig, choice: str) -> tuple[str, str]:
    if choice in ("same", "cross"):
        return choice, "--hardware " + choice
    hw_m, hw_f = megatron.value("runtime.hardware"), mindformers.value("runtime.hardware")
    if hw_m and hw_f and hw_m == hw_f:
        return "same", f"both on {hw_m}"
    return "cross", f"Megatron on {hw_m or 'unknown'}, MindFormers on {hw_f or 'unknown'}"


def _side_values(config: TrainingConfig, keys: tuple[str, ...]) -> list[CanonicalValue]:
    return [config.values.get(key) or CanonicalValue(key, None, "unknown", "", f"not available in {config.framework}")
            for key in keys]


def _is_moe(megatron: TrainingConfig, mindformers: TrainingConfig) -> bool:
    return any((config.value("moe.num_experts") or 1) > 1 for config in (megatron, mindformers))


def _assumed_run_length(verdict: str, message: str, values_f: list[CanonicalValue],
                        mindformers: TrainingConfig) -> tuple[str, str]:
    """A verdict resting on the assumed MindFormers run length (total_steps -1) says so, and is never PASS."""
    steps = mindformers.values.get("train.steps")
    if steps is None or steps.kind != "assumed" or verdict not in (PASS, MISMATCH, RISK):
        return verdict, message
    if not any(v.key == "train.steps" or "total_steps" in (v.source or "") for v in values_f):
        return verdict, message
    note = (f"MindFormers run length assumed {steps.value} steps (lr_schedule.total_steps -1 is known only at "
            "run time): set total_steps to check it")
    if verdict == PASS:
        return UNKNOWN, f"{message}, if MindFormers runs {steps.value} steps; {note}"
    return verdict, f"{message}; {note}"


def evaluate(item: Item, ctx: RuleContext) -> ItemResult:
    values_m, values_f = _side_values(ctx.megatron, item.keys), _side_values(ctx.mindformers, item.keys)
    if item.when == "moe" and not _is_moe(ctx.megatron, ctx.mindformers):
        verdict, message, details = PASS, "not applicable: dense model on both sides", {}
    else:
        outcome = RULES[item.rule](item, ctx, values_m, values_f)
        verdict, message, details = outcome.verdict, outcome.message, outcome.details
    verdict, message = _assumed_run_length(verdict, message, values_f, ctx.mindformers)
    return ItemResult(item.section, item.id, item.title, verdict, item.severity, message, item.why,
                      item_fix(item, verdict, values_m, values_f, ctx), values_m, values_f, details)


def run_checklist(megatron_path: Path | str, mindformers_path: Path | str, hardware: str = "auto") -> AuditReport:
    """Read both configs, resolve them to canonical values, and evaluate every CheckList item."""
    raw_m = read_config(megatron_path, "megatron")
    raw_f = read_config(mindformers_path, "mindformers")
    megatron = resolve(raw_m)
    assumptions: list[str] = []
    mindformers = _assume_run_length(raw_f, megatron, resolve(raw_f), assumptions)
    megatron.not_interpreted = _not_interpreted(raw_m)
    same_or_cross, hardware_source = _hardware(megatron, mindformers, hardware)
    ctx = RuleContext(megatron, mindformers, same_or_cross == "same", raw_m, raw_f)
    items = [evaluate(item, ctx) for section in load_checklist() for item in section.items]
    return AuditReport(megatron, mindformers, items, same_or_cross, hardware_source, assumptions)
