"""Capture layouts from ``datasets/*.yaml`` (``kind: capture``): folder and file templates, fields.

The layouts are knowledge, not code: ``datasets/megatron_capture.yaml`` declares the field's
layout (``step_{step}/rank_{rank}/{field}.npy``, no manifest) and the one BatchCapture writes
(the same for micro-batch 0, ``mb_{m}/`` folders for the others, ``manifest.json`` per step and
rank). Templates use ``{step}``, ``{rank}``, ``{micro_batch}`` (optionally with a format spec such
as ``{step:07d}``) and ``{field}``; the same template formats a path and parses a folder name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location
from ..input_files import expect
from .dtype_words import KINDS

_PLACEHOLDER = re.compile(r"\{(step|rank|micro_batch|field)(?::[^}]*)?\}")
LAYOUT_KEYS = ("marker", "step_dir", "rank_dir", "micro_batch_0", "micro_batch_m", "manifest")


@dataclass(frozen=True)
class FieldSpec:
    """One batch field: required or not, the numpy kinds allowed, the symbolic shape."""

    name: str
    required: bool
    kinds: tuple[str, ...]
    expected: str
    shape: tuple[str, ...]

    def dtype_ok(self, dtype) -> bool:
        return any(dtype.kind in KINDS[kind] for kind in self.kinds)


def template_regex(template: str) -> re.Pattern:
    """``step_{step:07d}`` → ``^step_(?P<step>\\d+)$`` (``{field}`` matches a name)."""
    parts, last = [], 0
    for match in _PLACEHOLDER.finditer(template):
        parts.append(re.escape(template[last:match.start()]))
        name = match.group(1)
        parts.append(f"(?P<{name}>[A-Za-z0-9_]+)" if name == "field" else f"(?P<{name}>\\d+)")
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("^" + "".join(parts) + "$")


@dataclass
class Layout:
    """A capture layout: how steps, ranks, micro-batches and fields map to paths."""

    name: str
    description: str
    marker: str | None
    step_dir: str
    rank_dir: str
    micro_batch_0: str
    micro_batch_m: str | None
    manifest: str | None
    source: str = ""
    _regex: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._regex = {"step": template_regex(self.step_dir), "rank": template_regex(self.rank_dir)}
        if self.micro_batch_m:  # the first path component that carries {micro_batch}
            head = self.micro_batch_m.split("/")[0]
            self._regex["mb"] = template_regex(head)
            self._regex["mb_is_dir"] = "/" in self.micro_batch_m

    def step_name(self, step: int) -> str:
        return self.step_dir.format(step=step)

    def rank_name(self, rank: int) -> str:
        return self.rank_dir.format(rank=rank)

    def file(self, field_name: str, micro_batch: int = 0) -> str:
        """A field's file for a micro-batch, relative to the rank folder."""
        if micro_batch == 0:
            return self.micro_batch_0.format(field=field_name)
        if not self.micro_batch_m:
            raise ValueError(f"layout {self.name} holds one micro-batch per step")
        return self.micro_batch_m.format(field=field_name, micro_batch=micro_batch)

    def parse_step(self, name: str) -> int | None:
        match = self._regex["step"].match(name)
        return int(match.group("step")) if match else None

    def parse_rank(self, name: str) -> int | None:
        match = self._regex["rank"].match(name)
        return int(match.group("rank")) if match else None

    def parse_micro_batch(self, name: str) -> int | None:
        """Micro-batch index m >= 1 of a rank-folder entry (folder or file), else None."""
        if "mb" not in self._regex:
            return None
        match = self._regex["mb"].match(name)
        return int(match.group("micro_batch")) if match else None


@dataclass
class CaptureKnowledge:
    """Everything the ``kind: capture`` files declare."""

    fields: dict[str, FieldSpec]
    layouts: dict[str, Layout]
    writer: str

    def writer_layout(self) -> Layout:
        return self.layouts[self.writer]

    def match(self, names: set[str]) -> Layout | None:
        """The first layout whose marker is present (or that needs none) and names a step folder."""
        for layout in self.layouts.values():
            if layout.marker is not None:
                if layout.marker in names:
                    return layout
            elif any(layout.parse_step(name) is not None for name in names):
                return layout
        return None


def _require(doc, key: str, kind):
    value = doc.get(key, None)
    if not isinstance(value, kind):
        raise InputError(location(doc.path, doc.lines.get(key), key),
                         f"expected {getattr(kind, '__name__', kind)}, found {type(value).__name__}",
                         "see the schema at the top of datasets/megatron_capture.yaml")
    return value


def parse_knowledge(docs) -> CaptureKnowledge:
    """Merge parsed ``kind: capture`` YamlDocs (first file first)."""
    fields: dict[str, FieldSpec] = {}
    layouts: dict[str, Layout] = {}
    writer = None
    for doc in docs:
        for name, spec in (_require(doc, "fields", dict) if doc.has("fields") else {}).items():
            key = f"fields.{name}"
            where = location(doc.path, doc.lines.get(key), key)
            kinds = spec.get("dtype") if isinstance(spec, dict) else None
            kinds = [kinds] if isinstance(kinds, str) else kinds
            if not kinds or any(kind not in KINDS for kind in kinds):
                raise InputError(where, f"dtype must be one or more of {', '.join(KINDS)}, found {kinds!r}",
                                 "fix the field's dtype")
            shape = expect(spec.get("shape") or [], list, where, f"{key}.shape", "e.g. shape: [b, s]")
            fields[name] = FieldSpec(name, bool(spec.get("required", False)), tuple(kinds),
                                     str(spec.get("expected", "")), tuple(str(dim) for dim in shape))
        for name, spec in (_require(doc, "layouts", dict) if doc.has("layouts") else {}).items():
            key = f"layouts.{name}"
            where = location(doc.path, doc.lines.get(key), key)
            if not isinstance(spec, dict) or any(k not in spec for k in LAYOUT_KEYS):
                missing = [k for k in LAYOUT_KEYS if not isinstance(spec, dict) or k not in spec]
                raise InputError(where, f"layout lacks {', '.join(missing)}", "declare every layout key (null allowed)")
            for required in ("step_dir", "rank_dir", "micro_batch_0"):
                if not isinstance(spec[required], str) or not spec[required]:
                    raise InputError(where, f"{required} must be a template string", "e.g. step_dir: step_{step}")
            layouts[name] = Layout(name, str(spec.get("description", "")).strip(),
                                   *(spec[k] for k in LAYOUT_KEYS), source=where)
        writer = writer or doc.get("writer", None)
    if not fields or not layouts:
        raise InputError("datasets/", "no capture fields or layouts declared",
                         "restore datasets/megatron_capture.yaml or set WORKBENCH_KNOWLEDGE")
    if writer not in layouts:
        raise InputError("datasets/megatron_capture.yaml", f"writer {writer!r} is not a declared layout",
                         "set writer: to one of " + ", ".join(layouts))
    return CaptureKnowledge(fields, layouts, writer)


@lru_cache(maxsize=4)
def _load(folder: str) -> CaptureKnowledge:
    from ..yamlio import load_yaml

    root = Path(folder)
    paths = sorted(root.glob("*.yaml"), key=lambda p: (p.name != "megatron_capture.yaml", p.name))
    docs = [doc for doc in map(load_yaml, paths) if isinstance(doc.data, dict) and doc.data.get("kind") == "capture"]
    return parse_knowledge(docs)


def load_knowledge(folder: Path | str | None = None) -> CaptureKnowledge:
    """The capture knowledge from ``folder`` (default: the ``datasets/`` knowledge base)."""
    if folder is None:
        from ..knowledge import knowledge_dir

        folder = knowledge_dir("datasets")
    return _load(str(Path(folder).resolve()))
