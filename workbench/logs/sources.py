"""The knowledge of ``datasets/series_sources.yaml`` and the table-shaped sources it describes:
msprobe monitor CSVs and plain CSV / JSONL series.

    read_msprobe_monitor("monitor_output/Nov24_02-30-00-rank0-abc/")   # every {prefix}_{a}-{b}.csv
    read_table("loss.csv")                                               # step,loss,... or step,metric,value
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location
from ..input_files import parse_json, read_text
from .schema import DEFINITIONS, LOCAL_NORM_COLUMNS, METRICS, SERIES_COLUMNS, LogSeries
from .tables import frame

SOURCES_FILE = "series_sources.yaml"
MONITOR_FILE = re.compile(r"^(?P<prefix>[a-z_]+?)_(?P<start>\d+)-(?P<end>\d+)\.csv$")
MONITOR_RANK = re.compile(r"-rank(\d+)-")
MAX_TABLE_BYTES = 2 << 30


@dataclass(frozen=True)
class TagMeaning:
    metric: str | None            # canonical metric, or a template with {param}
    definition: str | None        # a local-norm definition (per-parameter values)
    step: str = "same"            # "same" | "next"


@dataclass(frozen=True)
class SeriesSources:
    tensorboard: dict[str, dict[str, TagMeaning]]      # framework -> tag -> meaning
    msprobe_monitor: dict[str, TagMeaning]             # prefix -> meaning
    columns: dict[str, str]                            # column alias (lower case) -> canonical metric


def _meaning(doc, key: str, value) -> TagMeaning:
    where = location(doc.path, doc.lines.get(key), key)
    if not isinstance(value, dict) or ("metric" in value) == ("definition" in value):
        raise InputError(where, "expected a mapping with exactly one of metric / definition", "see the schema at the top")
    if value.get("definition") is not None and value["definition"] not in DEFINITIONS:
        raise InputError(where, f"unknown definition {value['definition']!r}", f"use one of {', '.join(DEFINITIONS)}")
    metric = value.get("metric")
    if metric is not None and "{param}" not in str(metric) and metric not in METRICS:
        raise InputError(where, f"unknown metric {metric!r}", f"use one of {', '.join(METRICS)}")
    if value.get("step", "same") not in ("same", "next"):
        raise InputError(where, f"step must be same or next, found {value.get('step')!r}", "same: the event's step")
    return TagMeaning(metric, value.get("definition"), value.get("step", "same"))


@lru_cache(maxsize=4)
def load_sources(path: Path | None = None) -> SeriesSources:
    from ..knowledge import load_knowledge

    doc, data = load_knowledge("datasets", SOURCES_FILE, "series_sources", "series sources", path)
    boards = {framework: {tag: _meaning(doc, f"tensorboard.{framework}.{tag}", meaning) for tag, meaning in tags.items()}
              for framework, tags in (data.get("tensorboard") or {}).items()}
    monitor = {prefix: _meaning(doc, f"msprobe_monitor.{prefix}", meaning)
               for prefix, meaning in (data.get("msprobe_monitor") or {}).items()}
    columns = {}
    for metric, aliases in (data.get("columns") or {}).items():
        if metric != "step" and metric not in METRICS or not isinstance(aliases, list):
            raise InputError(location(doc.path, doc.lines.get(f"columns.{metric}"), f"columns.{metric}"),
                             "expected a known metric with a list of column names", "e.g. lr: [lr, learning_rate]")
        columns.update({str(alias).lower(): metric for alias in aliases})
    return SeriesSources(boards, monitor, columns)


def _rows(path: Path):
    """CSV rows as dicts, with one-line errors for what a CSV file can do wrong."""
    if path.stat().st_size > MAX_TABLE_BYTES:
        raise InputError(str(path), f"{path.stat().st_size} bytes is more than a series table holds", "split it")
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            yield from csv.DictReader(handle)
    except UnicodeDecodeError as error:
        raise InputError(str(path), f"not UTF-8 text ({error.reason} at byte {error.start})", "pass the CSV file") from None
    except csv.Error as error:
        raise InputError(str(path), f"malformed CSV ({error})", "pass the file the tool wrote") from None


def _number(text, where: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise InputError(where, f"expected a number, found {str(text)[:40]!r}", "fix or remove the row") from None


def read_msprobe_monitor(path: Path | str, run: str | None = None) -> LogSeries:
    """A monitor output folder (or one CSV): per-parameter norms as local norms or metrics."""
    path = Path(path)
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    knowledge = load_sources().msprobe_monitor
    rank_match = MONITOR_RANK.search(str(path))
    rank = int(rank_match.group(1)) if rank_match else -1
    series, norms, notes = [], [], []
    for file in files:
        match = MONITOR_FILE.match(file.name)
        if not match or match.group("prefix") not in knowledge:
            notes.append(f"{file.name}: not a monitor file this reader knows (prefixes: {', '.join(knowledge)})")
            continue
        meaning = knowledge[match.group("prefix")]
        positions: dict[int, int] = {}
        for number, row in enumerate(_rows(file), start=2):
            where = location(file, number)
            for key in ("name", "step", "norm"):
                if key not in row:
                    raise InputError(where, f"no {key!r} column", "pass a CSV written by msprobe monitor")
            step = int(_number(row["step"], where)) + 1          # the monitor counts steps from 0
            value = _number(row["norm"], where)
            if meaning.definition:
                position = positions.get(step, 0)
                positions[step] = position + 1
                micro = int(_number(row.get("micro_step") or -1, where))
                norms.append((run or path.name, rank, step, micro, position, row["name"], -1, value,
                              meaning.definition, number))
            else:
                series.append((run or path.name, rank, step, meaning.metric.format(param=row["name"]), value, number))
    if not files:
        raise InputError(str(path), "no CSV files", "pass the monitor's output folder of one rank")
    return LogSeries(str(path), "msprobe_monitor", frame(series, SERIES_COLUMNS), frame(norms, LOCAL_NORM_COLUMNS),
                     {"step_base": "monitor step 0 = update 1"}, notes)


def read_table(path: Path | str, run: str | None = None) -> LogSeries:
    """A CSV or JSONL series: wide (a step column and one column per metric) or long
    (step, metric, value). Column names are matched through ``columns`` of the sources file."""
    path = Path(path)
    aliases = load_sources().columns
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        records = []
        text = read_text(path, what="JSONL series")          # bounded, UTF-8 checked with the line
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                record = parse_json(line, location(path, number), what="JSON line")   # nesting bounded
                if not isinstance(record, dict):
                    raise InputError(location(path, number), f"expected a JSON object, found {type(record).__name__}",
                                     "one JSON object per line")
                records.append((number, record))
    else:
        records = list(enumerate(_rows(path), start=2))
    rows = []
    for number, record in records:
        keys = {str(k).lower(): k for k in record}
        step_key = next((keys[a] for a, m in aliases.items() if m == "step" and a in keys), None)
        if step_key is None:
            raise InputError(location(path, number), f"no step column (have: {', '.join(map(str, record))[:120]})",
                             "name one column step or iteration")
        step = int(_number(record[step_key], location(path, number)))
        if "metric" in keys and "value" in keys:
            metric = aliases.get(str(record[keys["metric"]]).lower(), str(record[keys["metric"]]))
            rows.append((run or path.stem, -1, step, metric, _number(record[keys["value"]], location(path, number)), number))
            continue
        for lower, key in keys.items():
            if key != step_key and lower in aliases and record[key] not in ("", None):
                rows.append((run or path.stem, -1, step, aliases[lower], _number(record[key], location(path, number)),
                             number))
    return LogSeries(str(path), "table", frame(rows, SERIES_COLUMNS))
