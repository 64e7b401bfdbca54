"""Find the three YAML knowledge bases (checklists/, converters/, datasets/).

From a checkout they sit beside the package; an installed wheel carries them inside the
package as ``workbench/_knowledge/<name>`` (hatchling ``force-include``).
``WORKBENCH_KNOWLEDGE`` points at another root (a user's own knowledge folders).
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError

KNOWLEDGE_BASES = ("checklists", "converters", "datasets")
_PACKAGE_DIR = Path(__file__).resolve().parent


def knowledge_dir(name: str) -> Path:
    """The folder of knowledge base ``name``, searched in override, checkout, wheel order."""
    if name not in KNOWLEDGE_BASES:
        raise ValueError(f"unknown knowledge base {name!r}")
    candidates = []
    override = os.environ.get("WORKBENCH_KNOWLEDGE")
    if override:
        candidates.append(Path(override) / name)
    candidates += [_PACKAGE_DIR.parent / name, _PACKAGE_DIR / "_knowledge" / name]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise InputError(str(candidates[0]), f"knowledge base '{name}/' not found",
                     "reinstall workbench or set WORKBENCH_KNOWLEDGE to a folder holding it")


def knowledge_roots() -> list[str]:
    """The real paths of the knowledge bases found (what :func:`knowledge_dir` would return for each)."""
    roots = []
    for name in KNOWLEDGE_BASES:
        try:
            roots.append(os.path.realpath(knowledge_dir(name)))
        except InputError:
            continue
    return roots


def load_knowledge(base: str, file: str, kind: str, what: str, path: Path | None = None):
    """``(doc, data)`` of knowledge file ``base/file`` (or ``path``): parsed with line numbers, its top level a
    mapping whose ``kind:`` is ``kind``; otherwise one InputError saying ``what`` the file declares."""
    from .yamlio import load_yaml

    doc = load_yaml(path or knowledge_dir(base) / file)
    data = doc.data if isinstance(doc.data, dict) else {}
    if data.get("kind") != kind:
        raise InputError(str(doc.path), f"expected kind: {kind}", f"this file declares {what}")
    return doc, data
