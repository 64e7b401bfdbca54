"""The CheckList report as plain data: the stable JSON schema and the rows every renderer uses.

JSON schema ``workbench.checklist/1`` (documented in docs/checklist-json.md): keys are added,
never renamed or removed, within a schema version.
"""
from __future__ import annotations

from typing import Any

from .. import __version__
from ..audit.engine import AuditReport, ItemResult
from ..audit.rules import fmt
from ..config.canonical import CanonicalValue, TrainingConfig

SCHEMA = "workbench.checklist/1"


def _input(config: TrainingConfig) -> dict[str, Any]:
    return {"path": str(config.path), "form": config.form, "generation": config.generation or None,
            "notes": list(config.notes), "not_interpreted": list(config.not_interpreted)}


def _values(values: list[CanonicalValue]) -> dict[str, Any]:
    return {value.key: value.to_dict() for value in values}


def _details(details: dict) -> dict[str, Any]:
    return {key: value for key, value in details.items() if isinstance(value, (int, float, str, bool, type(None)))}


def item_to_dict(item: ItemResult) -> dict[str, Any]:
    return {"section": item.section, "id": item.id, "title": item.title, "verdict": item.verdict,
            "severity": item.severity, "message": item.message, "why": item.why, "fix": dict(item.fix),
            "megatron": _values(item.megatron), "mindformers": _values(item.mindformers),
            "details": _details(item.details)}


def report_to_dict(report: AuditReport, strict: bool = False) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "workbench_version": __version__,
        "inputs": {"megatron": _input(report.megatron), "mindformers": _input(report.mindformers)},
        "hardware": {"relation": report.hardware, "source": report.hardware_source},
        "assumptions": list(report.assumptions),
        "critical": report.critical(),
        "summary": report.counts(),
        "strict": strict,
        "exit_code": report.exit_code(strict),
        "items": [item_to_dict(item) for item in report.items],
        "canonical": {"megatron": {k: v.to_dict() for k, v in report.megatron.values.items()},
                      "mindformers": {k: v.to_dict() for k, v in report.mindformers.values.items()}},
    }


def side_cell(values: list[CanonicalValue]) -> tuple[str, str]:
    """(value text, provenance text) for one side of one item."""
    if not values:
        return "", ""
    texts = [fmt(v.value) if v.known else "?" for v in values]
    sources = [v.source or v.settle for v in values]
    if len(values) > 1:
        texts = [f"{v.key.rsplit('.', 1)[-1]}={text}" for v, text in zip(values, texts, strict=True)]
    return ", ".join(texts), "; ".join(dict.fromkeys(s for s in sources if s))


def sections(report: AuditReport, only: set[str] | None = None) -> list[tuple[str, list[ItemResult]]]:
    """Items grouped by section in CheckList order, optionally only some verdicts."""
    grouped: dict[str, list[ItemResult]] = {}
    for item in report.items:
        if only is None or item.verdict in only:
            grouped.setdefault(item.section, []).append(item)
    return list(grouped.items())


def summary_line(report: AuditReport) -> str:
    counts = report.counts()
    return ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
