"""Step-store kinds from ``datasets/step_store.yaml`` (``kind: step_store``): folder and file
templates (``rank_dir``: one tensor-parallel / pipeline rank's shard inside a kind folder), the tensor kinds (grads, params_before/after, exp_avg, exp_avg_sq) and their metadata.

The layout is knowledge, not code; a mistake in the file is a one-line error with file:line.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location
from ..input_files import expect, type_word
from .dtype_words import KINDS as DTYPE_KINDS

STORE_FILE = "step_store.yaml"
META_TYPES = {"integer": int, "number": float, "bool": bool, "string": str}
_TEMPLATE_KEYS = {"step_dir": "{step}", "kind_dir": "{kind}", "tensor_file": "{name}", "rank_dir": "{tp"}
_FIX = f"see the schema at the top of datasets/{STORE_FILE}"


@dataclass(frozen=True)
class StepKind:
    """One kind of per-parameter tensors: the numpy kinds allowed and the metadata it may carry."""

    name: str
    description: str
    dtypes: tuple[str, ...]
    meta: dict[str, str]

    def dtype_ok(self, dtype) -> bool:
        return any(dtype.kind in DTYPE_KINDS[kind] for kind in self.dtypes)


@dataclass(frozen=True)
class StepLayout:
    """Where a step store keeps each tensor (all templates from the yaml)."""

    step_dir: str
    kind_dir: str
    tensor_file: str
    manifest: str
    name_pattern: str
    kinds: dict[str, StepKind]
    source: str
    rank_dir: str = "mp_rank_{tp:02d}_{pp:03d}"

    def folder(self, root: Path, step: int, kind: str) -> Path:
        return Path(root) / self.step_dir.format(step=step) / self.kind_dir.format(kind=kind)

    def file(self, name: str) -> str:
        return self.tensor_file.format(name=name)

    def rank_folder(self, folder: Path, tp: int, pp: int) -> Path:
        """One rank's shard folder inside a kind folder."""
        return Path(folder) / self.rank_dir.format(tp=tp, pp=pp)

    def parse_rank(self, name: str) -> tuple[int, int] | None:
        """(tp, pp) of a rank folder name written by :meth:`rank_folder`; None for any other name."""
        match = _template_regex(self.rank_dir).fullmatch(name)
        if not match:
            return None
        tp, pp = int(match.group("tp")), int(match.group("pp"))
        return (tp, pp) if self.rank_dir.format(tp=tp, pp=pp) == name else None

    def parse_step(self, name: str) -> int | None:
        head, _, tail = self.step_dir.partition("{step}")
        middle = name[len(head):len(name) - len(tail)] if name.startswith(head) and name.endswith(tail) else ""
        return int(middle) if middle.isdigit() else None

    def kind(self, name: str, where: str) -> StepKind:
        if name not in self.kinds:
            raise InputError(where, f"unknown step-store kind {name!r}", f"use one of {', '.join(self.kinds)} "
                             f"(declared in datasets/{STORE_FILE})")
        return self.kinds[name]

    def check_name(self, name, where: str, key: str = "tensor name") -> str:
        """A tensor name that is one file in the kind folder: no ``/``, no ``..``, the declared pattern."""
        expect(name, str, where, key)
        if "/" in name or "\\" in name or ".." in name or not re.fullmatch(self.name_pattern, name):
            raise InputError(where, f"{key} {name[:80]!r} is not a plain parameter name (no '/', no '..'; "
                             f"pattern {self.name_pattern})", "name tensors by their parameter name")
        return name


@lru_cache(maxsize=8)
def _template_regex(template: str) -> re.Pattern:
    """``mp_rank_{tp:02d}_{pp:03d}`` -> a regex with one digit group per field."""
    parts = [re.escape(literal) + (f"(?P<{field}>[0-9]+)" if field else "")
             for literal, field, _, _ in string.Formatter().parse(template)]
    return re.compile("".join(parts))


def _kind(doc, name: str, spec) -> StepKind:
    key = f"kinds.{name}"
    where = location(doc.path, doc.lines.get(key), key)
    expect(spec, dict, where, key, _FIX)
    dtypes = spec.get("dtype")
    dtypes = [dtypes] if isinstance(dtypes, str) else dtypes
    if not isinstance(dtypes, list) or not dtypes or any(d not in DTYPE_KINDS for d in dtypes):
        raise InputError(where, f"dtype must be one or more of {', '.join(DTYPE_KINDS)}, found {dtypes!r}", _FIX)
    meta = expect(spec.get("meta") or {}, dict, where, f"{key}.meta", _FIX)
    for meta_key, word in meta.items():
        if word not in META_TYPES:
            meta_where = location(doc.path, doc.lines.get(f"{key}.meta.{meta_key}"), f"{key}.meta.{meta_key}")
            raise InputError(meta_where, f"type {word!r} is not one of {', '.join(META_TYPES)}", _FIX)
    return StepKind(name, str(spec.get("description", "")).strip(), tuple(dtypes), dict(meta))


def parse_step_layout(doc) -> StepLayout:
    """The ``kind: step_store`` YamlDoc, validated (file:line errors)."""
    def text(key: str) -> str:
        value = doc.get(key, None)
        if not isinstance(value, str) or not value:
            raise InputError(location(doc.path, doc.lines.get(key), key),
                             f"{key} is {type_word(value)}, expected a non-empty string", _FIX)
        return value

    for key, placeholder in _TEMPLATE_KEYS.items():
        if placeholder not in text(key) or "/" in text(key):
            raise InputError(location(doc.path, doc.lines.get(key), key),
                             f"{key} must hold {placeholder} and no '/'", _FIX)
    fields = {field for _, field, _, _ in string.Formatter().parse(text("rank_dir")) if field}
    if fields != {"tp", "pp"}:
        raise InputError(location(doc.path, doc.lines.get("rank_dir"), "rank_dir"),
                         f"rank_dir must hold {{tp}} and {{pp}} and nothing else, found {sorted(fields)}", _FIX)
    try:
        re.compile(text("name_pattern"))
    except re.error as error:
        raise InputError(location(doc.path, doc.lines.get("name_pattern"), "name_pattern"),
                         f"not a regex ({error})", _FIX) from None
    kinds = expect(doc.get("kinds", None), dict, location(doc.path, doc.lines.get("kinds"), "kinds"), "kinds", _FIX)
    return StepLayout(text("step_dir"), text("kind_dir"), text("tensor_file"), text("manifest"), text("name_pattern"),
                      {name: _kind(doc, str(name), spec) for name, spec in kinds.items()}, str(doc.path),
                      text("rank_dir"))


@lru_cache(maxsize=4)
def _load(folder: str) -> StepLayout:
    from ..yamlio import load_yaml

    path = Path(folder) / STORE_FILE
    doc = load_yaml(path)
    if not isinstance(doc.data, dict) or doc.data.get("kind") != "step_store":
        raise InputError(str(path), "not a step-store declaration (kind: step_store)", _FIX)
    return parse_step_layout(doc)


def load_step_layout(folder: Path | str | None = None) -> StepLayout:
    """The step-store layout from ``folder`` (default: the ``datasets/`` knowledge base)."""
    if folder is None:
        from ..knowledge import knowledge_dir

        folder = knowledge_dir("datasets")
    return _load(str(Path(folder).resolve()))
