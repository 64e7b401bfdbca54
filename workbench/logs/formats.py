"""The knowledge of ``datasets/log_formats.yaml``: what each printed field of a training log means.

    fmt = load_formats()["megatron"]
    fmt.meaning("grad norm")     # FieldMeaning(metric="grad_norm", step="same", aggregate="last", unit="")
    fmt.meaning("mtp_1 loss")    # from a pattern: metric "mtp_1_loss"

Validated when loaded; every problem names the file, line and key.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location
from .schema import DEFINITIONS, METRICS

FORMATS_FILE = "log_formats.yaml"
STEPS = ("same", "next")
AGGREGATES = ("last", "mean", "count", "total")
WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class FieldMeaning:
    metric: str
    step: str = "same"          # "same": the printed counter's update; "next": the update after it
    aggregate: str = "last"     # over a log interval: last | mean | count | total
    unit: str = ""              # printed after the number (ms, T), stripped before parsing


@dataclass
class LogFormat:
    name: str
    detect: tuple[tuple[str, ...], ...]        # alternatives; all substrings of one must be in a line
    fields: dict[str, FieldMeaning]
    patterns: list[tuple[re.Pattern, FieldMeaning]]
    ignore: frozenset[str]
    extra: dict = field(default_factory=dict)           # format-specific keys (definitions of blocks)
    _cache: dict = field(default_factory=dict, repr=False)

    def meaning(self, key: str) -> FieldMeaning | None:
        """The meaning of a printed key (case and runs of spaces do not matter); ``None``: unknown."""
        if key in self._cache:
            return self._cache[key]
        canonical = WHITESPACE.sub(" ", key.strip().lower())
        found = self.fields.get(canonical)
        if found is None and canonical not in self.ignore:
            for pattern, template in self.patterns:
                match = pattern.match(canonical)
                if match:
                    name = re.sub(r"[\s-]+", "_", match.group("name"))
                    found = FieldMeaning(template.metric.format(name=name), template.step, template.aggregate,
                                         template.unit)
                    break
        self._cache[key] = found
        return found


def normalise(key: str) -> str:
    return WHITESPACE.sub(" ", str(key).strip().lower())


def _field(doc, key: str, value, template: bool = False) -> FieldMeaning:
    where = location(doc.path, doc.lines.get(key), key)
    if not isinstance(value, dict) or not isinstance(value.get("metric"), str):
        raise InputError(where, "expected a mapping with a metric", "e.g. {metric: lr, step: next, aggregate: last}")
    unknown = set(value) - {"metric", "step", "aggregate", "unit"}
    if unknown:
        raise InputError(where, f"unknown keys {', '.join(sorted(map(str, unknown)))}", "use metric, step, aggregate, unit")
    metric = value["metric"]
    if template and "{name}" not in metric:
        raise InputError(where, f"a pattern's metric must contain {{name}}, found {metric!r}", "e.g. '{name}_loss'")
    if not template and metric not in METRICS:
        raise InputError(where, f"unknown metric {metric!r}", f"use one of {', '.join(METRICS)} (schema.py)")
    if value.get("step", "same") not in STEPS:
        raise InputError(where, f"step must be one of {', '.join(STEPS)}, found {value.get('step')!r}",
                         "same: the printed counter's update; next: the one after it")
    if value.get("aggregate", "last") not in AGGREGATES:
        raise InputError(where, f"aggregate must be one of {', '.join(AGGREGATES)}, found {value.get('aggregate')!r}",
                         "see the schema at the top of the file")
    return FieldMeaning(metric, value.get("step", "same"), value.get("aggregate", "last"), str(value.get("unit", "")))


def _strings(doc, key: str, value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise InputError(location(doc.path, doc.lines.get(key), key), "expected a list of non-empty strings",
                         'e.g. ["Epoch:["]')
    return tuple(value)


def _definition(doc, key: str, value) -> str:
    if value not in DEFINITIONS:
        raise InputError(location(doc.path, doc.lines.get(key), key), f"unknown definition {value!r}",
                         f"use one of {', '.join(DEFINITIONS)}")
    return value


def _format(doc, name: str, body) -> LogFormat:
    if not isinstance(body, dict):
        raise InputError(location(doc.path, doc.lines.get(name), name), "expected a mapping", "see the schema")
    fields = body.get("fields")
    if not isinstance(fields, dict) or not fields:
        raise InputError(location(doc.path, doc.lines.get(name), f"{name}.fields"), "expected a mapping of fields",
                         "see the schema at the top of the file")
    meanings = {normalise(key): _field(doc, f"{name}.fields.{key}", value) for key, value in fields.items()}
    patterns = []
    for regex, value in (body.get("pattern_fields") or {}).items():
        key = f"{name}.pattern_fields.{regex}"
        try:
            pattern = re.compile(str(regex))
        except re.error as error:
            raise InputError(location(doc.path, doc.lines.get(key), key), f"bad regular expression ({error})",
                             "fix the pattern") from None
        if "name" not in pattern.groupindex:
            raise InputError(location(doc.path, doc.lines.get(key), key), "the pattern has no (?P<name>...) group",
                             "name the part that goes into the metric")
        patterns.append((pattern, _field(doc, key, value, template=True)))
    extra = {}
    for key, value in (body.get("monitor_local_norms") or {}).items():
        extra.setdefault("monitor_local_norms", {})[str(key)] = _definition(
            doc, f"{name}.monitor_local_norms.{key}", value)
    for key in ("block_definition", "pynative_definition"):
        if key in body:
            extra[key] = _definition(doc, f"{name}.{key}", body[key])
    detect = body.get("detect")
    if not isinstance(detect, list) or not detect:
        raise InputError(location(doc.path, doc.lines.get(f"{name}.detect"), f"{name}.detect"),
                         "expected a list of alternatives, each a list of substrings", '[["Epoch:[", "step:["]]')
    alternatives = tuple(_strings(doc, f"{name}.detect.{index}", item) for index, item in enumerate(detect))
    return LogFormat(name, alternatives, meanings, patterns,
                     frozenset(normalise(k) for k in _strings(doc, f"{name}.ignore", body.get("ignore") or [])), extra)


@lru_cache(maxsize=4)
def load_formats(path: Path | None = None) -> dict[str, LogFormat]:
    """Every format of ``datasets/log_formats.yaml`` (or ``path``), validated."""
    from ..knowledge import load_knowledge

    doc, data = load_knowledge("datasets", FORMATS_FILE, "log_formats", "training-log formats", path)
    formats = {name: _format(doc, name, body) for name, body in data.items() if name != "kind"}
    for required in ("megatron", "mindformers"):
        if required not in formats:
            raise InputError(str(doc.path), f"no {required!r} format", "both frameworks' formats are needed")
    return formats
