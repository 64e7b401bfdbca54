"""Replay column contracts (``datasets/replay_contracts.yaml``): a captured Megatron micro-batch in,
the columns a MindSpore / MindFormers model consumes out. numpy only: no torch, no mindspore.

Schema of the yaml (validated at load time; mistakes are one-line ``InputError``s with file:line)::

    kind: replay_contracts                      # optional; datasets/*.yaml with kind: capture are layouts
    schema: 1
    contracts:
      NAME:
        description: text                       # optional
        transform: legacy_columns               # a key of TRANSFORMS below
        args: {ignore_id: -100}                 # optional keyword arguments of the transform
        columns:                                # output columns, in dataset order
          input_ids: {from: [tokens, labels], dtype: int32, shape: [mbs, s+1]}
          position_ids: {from: position_ids, dtype: int32, shape: [mbs, s], optional: true, default: arange}

``from`` names capture fields (``CAPTURE_FIELDS``); ``shape`` uses ``mbs`` (rows of the micro-batch),
``s`` (captured sequence length; ``seq`` is the same), ``s+1`` / ``s-1`` or integers.

The two named transforms, for one micro-batch of ``mbs`` rows and sequence length ``s``::

    legacy_columns                    (MindFormers legacy: the model slices input_ids itself)

      captured   tokens    t0 t1 t2 ... t(s-1)
                 labels       l0 l1 ... l(s-2) l(s-1)        (pretraining: l(i) = t(i+1))
                 loss_mask    m0 m1 ... m(s-2) m(s-1)
      input_ids  [mbs, s+1]  t0 t1 t2 ... t(s-1) l(s-1)      = tokens ⊕ labels[:, -1:]
      labels     [mbs, s+1]  t0 L0 L1 ... L(s-2) L(s-1)      L(i) = l(i), or -100 where m(i) == 0
      the model: tokens = input_ids[:, :-1] (exactly the captured tokens),
                 labels = labels[:, 1:]     (exactly the captured labels, ignore id where masked),
                 loss   = sum(ce · (labels != -100)) / count(labels != -100)  = Megatron's masked mean
                 (column 0 of labels is never read)

    new_style_columns                 (new-style models take the Megatron tensors as they are)

      input_ids [mbs, s] = tokens, labels [mbs, s] = labels, loss_mask [mbs, s] = loss_mask,
      position_ids [mbs, s] = position_ids (captured) or arange(s) per row when not captured

Exactness of the legacy contract: the model's tokens and labels are the captured ones whatever the
labels are (packed / SFT data whose labels are not the shifted tokens included), because the labels
column is passed. Only a model fed ``input_ids`` alone (labels taken from ``input_ids[:, 1:]``) needs
labels == shifted tokens: :func:`check_shifted_labels` says where they are not. Loss-mask values other
than 0/1 (weights) are not expressible as -100 labels: use the new contract (it carries loss_mask).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import InputError, location
from ..knowledge import knowledge_dir
from ..yamlio import YamlDoc, load_yaml

CONTRACTS_FILE = "replay_contracts.yaml"
IGNORE_TOKEN_ID = -100
CAPTURE_FIELDS = ("tokens", "labels", "loss_mask", "attention_mask", "position_ids")
DTYPES = ("int32", "int64", "float32", "float16", "bool")
_SHAPE_ITEM = re.compile(r"^(mbs|s|seq)\s*(?:([+-])\s*(\d+))?$")
_CONTRACT_KEYS = {"description", "transform", "args", "columns"}
_COLUMN_KEYS = {"from", "dtype", "shape", "optional", "default"}


# ----------------------------------------------------------------------------- transforms
def input_ids_from_megatron(tokens: np.ndarray, labels: np.ndarray, loss_mask: np.ndarray,
                            ignore_id: int = IGNORE_TOKEN_ID) -> tuple[np.ndarray, np.ndarray]:
    """Megatron (tokens, labels, loss_mask) [b, s] -> legacy MindFormers (input_ids, labels) [b, s+1], int32.

    ``input_ids = tokens ⊕ labels[:, -1:]``; the returned labels are ``tokens[:, :1] ⊕ labels`` with
    ``ignore_id`` wherever loss_mask == 0 (column 0 is never read: the model uses ``labels[:, 1:]``).
    """
    tokens, labels = np.asarray(tokens), np.asarray(labels)
    input_ids = np.concatenate([tokens, labels[:, -1:]], axis=1).astype(np.int32)
    full_labels = np.concatenate([tokens[:, :1], labels], axis=1).astype(np.int32)
    full_labels[:, 1:][np.asarray(loss_mask) == 0] = ignore_id
    return input_ids, full_labels


def legacy_columns(batch: Mapping[str, np.ndarray], ignore_id: int = IGNORE_TOKEN_ID) -> dict[str, np.ndarray]:
    """The legacy contract's columns (``input_ids``, ``labels`` [mbs, s+1]); layout in the module docstring."""
    input_ids, labels = input_ids_from_megatron(batch["tokens"], batch["labels"], batch["loss_mask"], ignore_id)
    return {"input_ids": input_ids, "labels": labels}


def new_style_columns(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The new contract's columns: the captured tensors as they are (position_ids = arange when absent)."""
    tokens = np.asarray(batch["tokens"])
    position_ids = batch.get("position_ids")
    if position_ids is None:
        position_ids = np.broadcast_to(np.arange(tokens.shape[1]), tokens.shape)
    position_ids = np.asarray(position_ids)
    if position_ids.shape[0] == 1 and tokens.shape[0] > 1:  # broadcast form [1, s]
        position_ids = np.broadcast_to(position_ids, tokens.shape)
    return {"input_ids": tokens, "labels": np.asarray(batch["labels"]), "loss_mask": np.asarray(batch["loss_mask"]),
            "position_ids": position_ids}


TRANSFORMS: dict[str, Callable[..., dict[str, np.ndarray]]] = {
    "legacy_columns": legacy_columns,
    "new_style_columns": new_style_columns,
}


@dataclass(frozen=True)
class ShiftCheck:
    """Are labels the tokens shifted by one? ``mismatches`` counts positions i < s-1 with
    ``labels[:, i] != tokens[:, i+1]``; ``first`` is the first one as (row, column) or None."""

    ok: bool
    mismatches: int
    first: tuple[int, int] | None


def check_shifted_labels(batch: Mapping[str, np.ndarray]) -> ShiftCheck:
    """Compare ``labels[:, :-1]`` with ``tokens[:, 1:]`` (the last label has no token to compare with)."""
    tokens, labels = np.asarray(batch["tokens"]), np.asarray(batch["labels"])
    differ = labels[:, :-1] != tokens[:, 1:]
    count = int(differ.sum())
    first = tuple(int(v) for v in np.argwhere(differ)[0]) if count else None
    return ShiftCheck(count == 0, count, first)


# ----------------------------------------------------------------------------- contracts
@dataclass(frozen=True)
class ColumnSpec:
    name: str
    sources: tuple[str, ...]
    dtype: str
    shape: tuple[Any, ...]  # ints or (symbol, offset)
    optional: bool = False
    default: str | None = None


@dataclass(frozen=True)
class Contract:
    """One validated contract; ``apply(batch)`` returns the columns in order, cast and shape-checked."""

    name: str
    transform: str
    args: dict
    columns: tuple[ColumnSpec, ...]
    description: str = ""
    where: str = ""

    @property
    def column_names(self) -> list[str]:
        return [column.name for column in self.columns]

    def apply(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = TRANSFORMS[self.transform](batch, **self.args)
        if list(out) != self.column_names:
            raise AssertionError(f"{self.where}: transform {self.transform} returned columns {list(out)}, "
                                 f"the contract declares {self.column_names}")
        tokens = np.asarray(batch["tokens"])
        sizes = {"mbs": tokens.shape[0], "s": tokens.shape[1]}
        result = {}
        for column in self.columns:
            value = np.asarray(out[column.name])
            expected = tuple(d if isinstance(d, int) else sizes[d[0]] + d[1] for d in column.shape)
            if value.shape != expected:
                raise ValueError(f"{self.where}: column {column.name}: expected shape {expected}, got {value.shape}")
            result[column.name] = _cast(value, column.dtype, column.name)
        return result


def _cast(value: np.ndarray, dtype: str, name: str) -> np.ndarray:
    target = np.dtype(dtype)
    if value.dtype == target:
        return np.ascontiguousarray(value)
    if np.issubdtype(target, np.integer) and value.size:
        info = np.iinfo(target)
        low, high = value.min(), value.max()
        if not np.issubdtype(value.dtype, np.integer) or low < info.min or high > info.max:
            raise ValueError(f"column {name}: values of dtype {value.dtype} in [{low}, {high}] do not fit {dtype}")
    return np.ascontiguousarray(value.astype(target))


def contracts_path(folder: Path | str | None = None) -> Path:
    return Path(folder or knowledge_dir("datasets")) / CONTRACTS_FILE


def load_contracts(path: Path | str | None = None) -> dict[str, Contract]:
    """All contracts of ``path`` (default: ``datasets/replay_contracts.yaml`` of the knowledge base)."""
    path = Path(path) if path is not None else contracts_path()
    doc = load_yaml(path)
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("contracts"), dict) or not data["contracts"]:
        raise InputError(_where(doc, "contracts"), "expected a mapping with `schema: 1` and a non-empty `contracts:`",
                         "see the schema in workbench/replay/contracts.py")
    if data.get("schema", 1) != 1:
        raise InputError(_where(doc, "schema"), f"schema {data.get('schema')!r} is not supported", "write schema: 1")
    if data.get("kind", "replay_contracts") != "replay_contracts":
        raise InputError(_where(doc, "kind"), f"kind {data.get('kind')!r} is not replay_contracts",
                         "pass the replay contracts file")
    unknown = set(data) - {"kind", "schema", "contracts"}
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(_where(doc, key), f"unknown top-level key {key!r}", "allowed: kind, schema, contracts")
    return {name: _contract(doc, name, body) for name, body in data["contracts"].items()}


def get_contract(name: str, path: Path | str | None = None) -> Contract:
    """The contract ``name`` (``legacy`` or ``new`` in the shipped file)."""
    contracts = load_contracts(path)
    if name not in contracts:
        raise InputError(str(path or contracts_path()), f"no replay contract {name!r}",
                         f"use one of {', '.join(contracts)}")
    return contracts[name]


def _where(doc: YamlDoc, dotted: str) -> str:
    return location(doc.path, doc.lines.get(dotted), key=dotted)


def _contract(doc: YamlDoc, name: str, body: Any) -> Contract:
    key = f"contracts.{name}"
    if not isinstance(body, dict):
        raise InputError(_where(doc, key), "expected a mapping with transform and columns", "see the schema")
    _check_keys(doc, key, body, _CONTRACT_KEYS)
    transform = body.get("transform")
    if transform not in TRANSFORMS:
        raise InputError(_where(doc, f"{key}.transform"), f"unknown transform {transform!r}",
                         f"use one of {', '.join(TRANSFORMS)}")
    args = body.get("args") or {}
    if not isinstance(args, dict):
        raise InputError(_where(doc, f"{key}.args"), "expected a mapping of keyword arguments",
                         "e.g. {ignore_id: -100}")
    columns = body.get("columns")
    if not isinstance(columns, dict) or not columns:
        raise InputError(_where(doc, f"{key}.columns"), "expected a non-empty mapping column -> {from, dtype, shape}",
                         "see the schema")
    specs = tuple(_column(doc, f"{key}.columns.{column}", column, spec) for column, spec in columns.items())
    return Contract(name, transform, dict(args), specs, str(body.get("description", "")), _where(doc, key))


def _column(doc: YamlDoc, key: str, name: str, spec: Any) -> ColumnSpec:
    if not isinstance(spec, dict):
        raise InputError(_where(doc, key), "expected {from, dtype, shape}", "see the schema")
    _check_keys(doc, key, spec, _COLUMN_KEYS)
    sources = spec.get("from")
    sources = [sources] if isinstance(sources, str) else sources
    if not sources or not isinstance(sources, list) or any(s not in CAPTURE_FIELDS for s in sources):
        raise InputError(_where(doc, f"{key}.from"), f"from: {spec.get('from')!r} is not capture fields",
                         f"use names among {', '.join(CAPTURE_FIELDS)}")
    if spec.get("dtype") not in DTYPES:
        raise InputError(_where(doc, f"{key}.dtype"), f"dtype {spec.get('dtype')!r} is not supported",
                         f"use one of {', '.join(DTYPES)}")
    shape = spec.get("shape")
    if not isinstance(shape, list) or not shape:
        raise InputError(_where(doc, f"{key}.shape"), "expected a list such as [mbs, s+1]", "fix the shape")
    dims = []
    for item in shape:
        match = _SHAPE_ITEM.match(str(item).strip()) if not isinstance(item, int) else None
        if isinstance(item, int) and not isinstance(item, bool):
            dims.append(item)
        elif match:
            offset = int(match.group(3) or 0) * (-1 if match.group(2) == "-" else 1)
            dims.append(({"seq": "s"}.get(match.group(1), match.group(1)), offset))
        else:
            raise InputError(_where(doc, f"{key}.shape"), f"shape item {item!r} is not mbs, s, s+N or an integer",
                             "fix the shape")
    return ColumnSpec(name, tuple(sources), spec["dtype"], tuple(dims), bool(spec.get("optional", False)),
                      spec.get("default"))


def _check_keys(doc: YamlDoc, key: str, body: dict, allowed: set[str]) -> None:
    for item in body:
        if item not in allowed:
            raise InputError(_where(doc, f"{key}.{item}"), f"unknown key {item!r}",
                             f"allowed: {', '.join(sorted(allowed))}")
