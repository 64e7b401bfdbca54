"""The knowledge of ``datasets/dump_formats.yaml``: layouts, header spellings and name grammars of
every per-operator dump format, validated at load (each problem names the file, line and key).

    fmt = load_dump_formats()
    fmt.dtype("torch.float32")           # "float32"
    fmt.statistic_columns["NaN Count"]   # "nan_count"
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location
from .schema import COLUMNS

FORMATS_FILE = "dump_formats.yaml"
STAT_TARGETS = frozenset(COLUMNS) | {"op_type", "op_name", "timestamp"}


@dataclass(frozen=True)
class DumpFormats:
    dtypes: dict[str, str]
    statistic_file: str
    statistic_required: tuple[str, ...]
    statistic_columns: dict[str, str]            # header -> table column (or op_type/op_name/timestamp)
    statistic_sums: dict[str, tuple[str, ...]]   # table column -> headers added together
    statistic_ignored: frozenset[str]
    tensor_file: re.Pattern
    order_folder: str
    order_file: re.Pattern
    order_header: str
    backward_prefixes: tuple[str, ...]
    skip_prefixes: tuple[str, ...]
    wrappers: tuple[str, ...]
    op_pattern: re.Pattern
    layer_pattern: re.Pattern
    msprobe: dict
    legacy: dict
    _seen: dict = field(default_factory=dict, compare=False, repr=False)    # dtype spelling -> normalised

    def dtype(self, text: str) -> str:
        """``torch.float32`` / ``Float32`` / ``mindspore.float32`` → ``float32``; unknown: lower-cased."""
        if text in self._seen:
            return self._seen[text]
        key = str(text).strip()
        for prefix in ("torch.", "mindspore.", "ms."):
            if key.lower().startswith(prefix):
                key = key[len(prefix):]
        self._seen[text] = self.dtypes.get(key.lower(), key.lower())
        return self._seen[text]

    def layer(self, module_path: str) -> int | None:
        """The decoder layer index a module path lies in (``model.layers.3.attention`` → 3), else None."""
        found = self.layer_pattern.search(module_path)
        return int(found.group(1)) if found else None


class _Doc:
    """A loaded YAML with helpers that raise InputError at the key's line."""

    def __init__(self, doc):
        self.doc = doc

    def where(self, key: str) -> str:
        return location(self.doc.path, self.doc.lines.get(key), key)

    def get(self, key: str, kind: type | tuple[type, ...]):
        if not self.doc.has(key):
            raise InputError(self.where(key.rsplit(".", 1)[0]) if "." in key else str(self.doc.path),
                             f"missing key {key}", "see the schema at the top of the file")
        value = self.doc.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise InputError(self.where(key), f"expected {_word(kind)}, found {type(value).__name__}",
                             "see the schema at the top of the file")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.get(key, list)
        if not all(isinstance(item, str) and item for item in value):
            raise InputError(self.where(key), "expected a list of non-empty strings", 'e.g. ["Default"]')
        return tuple(value)

    def mapping(self, key: str, values: type = str) -> dict:
        value = self.get(key, dict)
        for name, item in value.items():
            if not isinstance(item, values) or isinstance(item, bool):
                raise InputError(self.where(f"{key}.{name}"), f"expected {_word(values)}, found {type(item).__name__}",
                                 "see the schema at the top of the file")
        return {str(name): item for name, item in value.items()}

    def regex(self, key: str, groups: tuple[str, ...] = ()) -> re.Pattern:
        text = self.get(key, str)
        try:
            pattern = re.compile(text)
        except re.error as error:
            raise InputError(self.where(key), f"bad regular expression ({error})", "fix the pattern") from None
        missing = [group for group in groups if group not in pattern.groupindex]
        if missing:
            raise InputError(self.where(key), f"the pattern lacks the group(s) {', '.join(missing)}",
                             "name them with (?P<name>...)")
        if not groups and pattern.groups < 1:
            raise InputError(self.where(key), "the pattern needs one group", "e.g. '(\\d+)'")
        return pattern


def _word(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    words = {str: "a string", list: "a list", dict: "a mapping", int: "an integer", bool: "true/false"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


def _statistic(doc: _Doc) -> dict:
    columns = doc.mapping("mindspore_statistic.columns")
    for header, target in columns.items():
        if target not in STAT_TARGETS:
            raise InputError(doc.where(f"mindspore_statistic.columns.{header}"), f"unknown column {target!r}",
                             "use a column of workbench/dumps/schema.py, or op_type, op_name, timestamp")
    sums = {}
    for target in doc.mapping("mindspore_statistic.sum_columns", list):
        if target not in COLUMNS:
            raise InputError(doc.where(f"mindspore_statistic.sum_columns.{target}"), f"unknown column {target!r}",
                             "use a column of workbench/dumps/schema.py")
        sums[target] = doc.strings(f"mindspore_statistic.sum_columns.{target}")
    required = doc.strings("mindspore_statistic.required")
    unknown = [name for name in required if name not in columns]
    if unknown:
        raise InputError(doc.where("mindspore_statistic.required"), f"{', '.join(unknown)} not in columns",
                         "a required header must be declared under columns")
    return {"statistic_file": doc.get("mindspore_statistic.file", str), "statistic_required": required,
            "statistic_columns": columns, "statistic_sums": sums,
            "statistic_ignored": frozenset(doc.strings("mindspore_statistic.ignored"))}


def _msprobe(doc: _Doc) -> dict:
    out = {name: doc.get(f"msprobe.{name}", str) for name in ("dump_file", "stack_file", "construct_file")}
    out["step_folder"] = doc.regex("msprobe.step_folder", ("step",))
    out["rank_folder"] = doc.regex("msprobe.rank_folder", ("rank",))
    out["pid_folder"] = re.compile(doc.get("msprobe.pid_folder", str))
    out["stats"] = doc.mapping("msprobe.stats")
    for column in out["stats"]:
        if column not in COLUMNS:
            raise InputError(doc.where(f"msprobe.stats.{column}"), f"unknown column {column!r}",
                             "use a column of workbench/dumps/schema.py")
    out["md5_fields"] = doc.strings("msprobe.md5_fields")
    out["wrappers"] = frozenset(doc.strings("msprobe.wrappers"))
    out["tensor_types"] = frozenset(doc.strings("msprobe.tensor_types"))
    out["scalar_types"] = doc.mapping("msprobe.scalar_types")
    out["scalar_rows"] = doc.get("msprobe.scalar_rows", bool) if doc.doc.has("msprobe.scalar_rows") else False
    for key in ("forward_keys", "backward_keys"):
        out[key] = doc.mapping(f"msprobe.{key}")
        for name, io in out[key].items():
            if io not in ("input", "output", "parameter"):
                raise InputError(doc.where(f"msprobe.{key}.{name}"), f"unknown io {io!r}",
                                 "use input, output or parameter")
    out["module_pattern"] = doc.regex("msprobe.module_pattern", ("path", "cls", "pass", "index"))
    out["api_pattern"] = doc.regex("msprobe.api_pattern", ("kind", "api", "index", "pass"))
    return out


def _legacy(doc: _Doc) -> dict:
    lengths = doc.get("legacy_pkl.summary_lengths", list)
    if not lengths or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in lengths):
        raise InputError(doc.where("legacy_pkl.summary_lengths"), "expected a list of positive integers", "[3, 4]")
    return {"tensor_pattern": doc.regex("legacy_pkl.tensor_pattern", ("kind", "api", "index", "pass", "io", "slot")),
            "stack_suffix": doc.get("legacy_pkl.stack_suffix", str), "summary_lengths": tuple(lengths),
            "line_items": doc.get("legacy_pkl.line_items", int)}


@lru_cache(maxsize=4)
def load_dump_formats(path: Path | None = None) -> DumpFormats:
    """``datasets/dump_formats.yaml`` (or ``path``), validated."""
    from ..knowledge import knowledge_dir
    from ..yamlio import load_yaml

    raw = load_yaml(path or knowledge_dir("datasets") / FORMATS_FILE)
    if not isinstance(raw.data, dict) or raw.data.get("kind") != "dump_formats":
        raise InputError(str(raw.path), "expected kind: dump_formats", "this file declares per-operator dump formats")
    doc = _Doc(raw)
    return DumpFormats(
        dtypes={key.lower(): value for key, value in doc.mapping("dtypes").items()},
        **_statistic(doc),
        tensor_file=doc.regex("mindspore_tensor.file_pattern", ("op_type", "op_name", "io", "slot", "dtype")),
        order_folder=doc.get("execution_order.folder", str),
        order_file=doc.regex("execution_order.file_pattern", ("graph",)),
        order_header=doc.get("execution_order.header", str),
        backward_prefixes=doc.strings("scope.backward_prefixes"), skip_prefixes=doc.strings("scope.skip_prefixes"),
        wrappers=doc.strings("scope.wrappers"), op_pattern=doc.regex("scope.op_pattern", ("op",)),
        layer_pattern=doc.regex("layer_pattern"), msprobe=_msprobe(doc), legacy=_legacy(doc))
