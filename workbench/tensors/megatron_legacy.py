"""A Megatron legacy checkpoint (``--ckpt-format torch``) presented as ONE state dict with global names.

::

    root/latest_checkpointed_iteration.txt      "<iteration>" or "release"
    root/iter_0000010/mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt
         {"args": Namespace, "iteration": .., "model": {local name: tensor}, "optimizer": ..}

* pipeline stage p holds consecutive layers with local indices restarting at 0; its global
  offset counts the layers found in the earlier stages' files;
* expert-parallel rank e holds ``local_experts.j`` = global expert ``e * E_local + j`` (and
  TEGroupedMLP ``weightj``); other tensors are replicated over expert ranks (rank 0 is read);
* tensor-parallel shards are merged per tensor, only when it is read, by the rules of
  ``converters/megatron_parallel.yaml`` (:mod:`.megatron_rules`).

Rank files are opened with ``torch.load(mmap=True, weights_only=True)``: ``argparse.Namespace``
is allow-listed, and Megatron/MindSpeed classes inside ``args`` (enums such as
``AttnBackend``) are replaced by inert :class:`MegatronObject` stand-ins, never imported.
The tracker file and ``args`` values are read through :mod:`.megatron_files` (one tracker reader,
typed values naming the key).
Virtual pipeline checkpoints (``model0``, ``model1``, ..) are not supported.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .base import SourceBase, TensorMeta
from .common import missing_tensor
from .megatron_files import TRACKER_FILE, arg, read_tracker
from .megatron_rules import ParallelRule, megatron_parallel_rules, merge, merged_shape, rule_for
from .torch_io import dtype_name, flatten, load_torch_file, refused_global, split_tensors, tensor_to_numpy

CHECKPOINT_FILE = "model_optim_rng.pt"
_RANK_DIR = re.compile(r"^mp_rank_(\d{2})(?:_(\d{3}))?(?:_(\d{3}))?$")
_LAYER = re.compile(r"^(.*?\blayers\.)(\d+)(\..+)$")
_EXPERT = re.compile(r"^(.*\.local_experts\.)(\d+)(\..+)$|^(.*\.experts\.linear_fc[12]\.weight)(\d+)()$")
_STAND_IN_MODULES = ("megatron.", "mindspeed.", "mindspeed_llm.", "modellink.", "transformer_engine.")


# ----------------------------------------------------------------------------- loading one rank file

class MegatronObject:
    """Inert stand-in for a Megatron class pickled inside ``args``: keeps its arguments, runs nothing."""

    qualified_name = ""

    def __init__(self, *args: Any, **kwargs: Any):
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"{self.qualified_name}{self.args!r}"


def load_rank_file(path: Path) -> dict:
    """One ``model_optim_rng.pt``, weights only, with stand-ins for Megatron classes in ``args``."""
    allowed: list[Any] = [argparse.Namespace]
    while True:
        try:
            payload = load_torch_file(path, allowed)
            break
        except InputError as error:
            name = refused_global(error.problem)
            if not name or not name.startswith(_STAND_IN_MODULES) or len(allowed) > 64:
                raise
            allowed.append((type(name.rsplit(".", 1)[-1], (MegatronObject,), {"qualified_name": name}), name))
    if not isinstance(payload, dict):
        raise InputError(str(path), f"holds a {type(payload).__name__}, not a Megatron checkpoint dict",
                         "pass a model_optim_rng.pt written by Megatron")
    return payload


@dataclass
class RankFile:
    path: Path
    tp: int
    pp: int
    ep: int
    tensors: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def _model_of(payload: dict, path: Path) -> dict:
    if "model" not in payload:
        if "model0" in payload:
            raise InputError(str(path), "virtual pipeline checkpoint (model0, model1, ..) is not supported",
                             "re-save without --num-layers-per-virtual-pipeline-stage, or convert with Megatron")
        raise InputError(str(path), f"no 'model' entry (keys: {sorted(map(str, payload))[:8]})",
                         "pass a Megatron checkpoint")
    model = payload["model"]
    if not isinstance(model, dict):
        raise InputError(f"{path} [model]", f"expected a state dict of tensors, found {type(model).__name__}",
                         "the rank file is damaged: pass a model_optim_rng.pt written by Megatron")
    return model


def _args_of(payload: dict, path: Path) -> argparse.Namespace | None:
    args = payload.get("args")
    if args is not None and not isinstance(args, argparse.Namespace):
        raise InputError(f"{path} [args]", f"expected an argparse.Namespace, found {type(args).__name__}",
                         "the rank file is damaged: pass a model_optim_rng.pt written by Megatron")
    return args


# ----------------------------------------------------------------------------- finding the rank files

def iteration_dir(root: Path) -> Path:
    """The folder that holds the ``mp_rank_*`` folders for ``root`` (a save root or an ``iter_*``)."""
    tracked = read_tracker(root)
    if tracked is not None:
        return root / tracked.folder
    if any(_RANK_DIR.match(child.name) for child in root.iterdir()):
        return root
    raise InputError(str(root), f"not a Megatron legacy checkpoint: no {TRACKER_FILE} and no mp_rank_* folders",
                     "pass the --save folder, an iter_* folder or a model_optim_rng.pt")


def rank_files(path: Path) -> list[tuple[Path, tuple]]:
    """(file, rank-folder digits) for every rank file under ``path``; a lone file has digits ()."""
    if path.is_file():
        return [(path, ())]
    if not path.is_dir():
        raise InputError(str(path), "not found", "check the path")
    folder = iteration_dir(path)
    found = []
    for child in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = _RANK_DIR.match(child.name)
        if match and (child / CHECKPOINT_FILE).is_file():
            found.append((child / CHECKPOINT_FILE, tuple(int(g) for g in match.groups() if g is not None)))
    if not found:
        raise InputError(str(folder), f"no mp_rank_*/{CHECKPOINT_FILE} files found", "check the folder and iteration")
    return found


def _ranks(digits: tuple, args: Any, where: str) -> tuple[int, int, int]:
    """(tp, pp, ep) from the folder digits; ``mp_rank_TT_XXX`` is pp unless only experts are parallel."""
    if len(digits) <= 1:
        return (digits[0] if digits else 0), 0, 0
    if len(digits) == 3:
        return digits
    pipeline = arg(args, "pipeline_model_parallel_size", int, 0, where)
    experts = arg(args, "expert_model_parallel_size", int, 1, where) or 1
    return (digits[0], 0, digits[1]) if pipeline <= 1 and experts > 1 else (digits[0], digits[1], 0)


# ----------------------------------------------------------------------------- the merged view

class MegatronLegacySource(SourceBase):
    """Every rank file of one iteration as one state dict with global Megatron names.

    ``swiglu`` overrides the checkpoint's ``args.swiglu`` (needed when ``args`` is absent);
    ``rules`` overrides ``converters/megatron_parallel.yaml``.
    """

    def __init__(self, path: Path | str, rules: list[ParallelRule] | None = None, swiglu: bool | None = None):
        self.path = Path(path)
        self.rules = rules if rules is not None else megatron_parallel_rules()
        found = rank_files(self.path)
        payloads = [load_rank_file(file) for file, _ in found]
        self._args_where = str(found[0][0])
        self.args = self._args(_args_of(payloads[0], found[0][0]), swiglu)
        self.iteration = payloads[0].get("iteration")
        self.files = [self._rank_file(file, digits, payload) for (file, digits), payload in zip(found, payloads, strict=True)]
        self.tensor_parallel = 1 + max(rank.tp for rank in self.files)
        for flag in {name for rule in self.rules for name in (rule.when, rule.unless) if name}:
            self._arg(flag, bool, False)                  # a damaged flag is named here, with the file
        self._check_single_file(found)
        self._check_grid()
        self.skipped: dict[str, str] = {}
        self._pieces: dict[str, list[tuple[RankFile, str]]] = {}
        self._rules: dict[str, ParallelRule] = {}
        self._metas: dict[str, TensorMeta] = {}
        self._index()

    # -- construction
    def _arg(self, key: str, kind: type, default: Any) -> Any:
        return arg(self.args, key, kind, default, self._args_where)

    @staticmethod
    def _args(args: Any, swiglu: bool | None) -> Any:
        if swiglu is None:
            return args
        return argparse.Namespace(**{**(vars(args) if args is not None else {}), "swiglu": swiglu})

    def _rank_file(self, file: Path, digits: tuple, payload: dict) -> RankFile:
        tp, pp, ep = _ranks(digits, self.args, self._args_where)
        tensors, skipped = split_tensors(flatten(_model_of(payload, file)), file)
        return RankFile(file, tp, pp, ep, tensors, skipped)

    def _check_single_file(self, found: list) -> None:
        ranks = [self._arg(key, int, 1) or 1 for key in
                 ("tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size")]
        if found[0][1] == () and np.prod(ranks) > 1:
            raise InputError(str(self.path), f"one rank file of a tp/pp/ep = {ranks[0]}/{ranks[1]}/{ranks[2]} "
                             "checkpoint", "pass the iter_* folder that holds every mp_rank_* folder")

    def _check_grid(self) -> None:
        present = {(r.tp, r.pp, r.ep) for r in self.files}
        sizes = [1 + max(key[axis] for key in present) for axis in range(3)]
        missing = [(t, p, e) for t in range(sizes[0]) for p in range(sizes[1]) for e in range(sizes[2])
                   if (t, p, e) not in present]
        if missing:
            raise InputError(str(self.path), f"rank files missing for (tp, pp, ep) {missing[:4]}",
                             "copy every mp_rank_* folder of the iteration")
        expected = self._arg("tensor_model_parallel_size", int, 0) or sizes[0]
        if expected != sizes[0]:
            raise InputError(str(self.path), f"args say tensor_model_parallel_size {expected}, found {sizes[0]} "
                             "tensor-parallel rank folders", "copy every mp_rank_* folder of the iteration")

    def _layer_offsets(self) -> dict[int, int]:
        """Global index of each pipeline stage's local layer 0 (counting the layers of earlier stages)."""
        offsets, total = {}, 0
        for stage in sorted({r.pp for r in self.files}):
            first = next(r for r in self.files if r.pp == stage and r.tp == 0 and r.ep == 0)
            layers = {int(m.group(2)) for m in map(_LAYER.match, first.tensors) if m}
            if layers != set(range(len(layers))):
                raise InputError(str(first.path), f"local layer indices are not 0..n-1: {sorted(layers)}",
                                 "virtual pipeline or a damaged rank file")
            offsets[stage], total = total, total + len(layers)
        expected = self._arg("num_layers", int, None)
        if expected and total != expected:
            raise InputError(str(self.path), f"found {total} layers in the pipeline stages, args say {expected}",
                             "copy every pipeline stage's rank folders")
        return offsets

    def _expert_tp(self) -> int:
        expert_tp = self._arg("expert_tensor_parallel_size", int, 0) or self.tensor_parallel
        if expert_tp not in (1, self.tensor_parallel):
            raise InputError(str(self.path), f"expert_tensor_parallel_size {expert_tp} differs from "
                             f"tensor_model_parallel_size {self.tensor_parallel}",
                             "not supported: re-save with equal sizes")
        return expert_tp

    def _index(self) -> None:
        offsets, expert_tp = self._layer_offsets(), self._expert_tp()
        local_experts = {key: _local_expert_count(r) for r in self.files for key in [(r.pp, r.ep)]}
        for rank in sorted(self.files, key=lambda r: (r.pp, r.ep, r.tp)):
            for key, reason in rank.skipped.items():
                self.skipped.setdefault(key, reason)
            for local in rank.tensors:
                name, is_expert = _global_name(local, offsets[rank.pp], rank.ep * local_experts[(rank.pp, rank.ep)])
                if (rank.ep and not is_expert) or (is_expert and expert_tp == 1 and rank.tp):
                    continue                                  # replicated over expert / tensor ranks
                pieces = self._pieces.setdefault(name, [])
                if pieces and pieces[0][0].pp != rank.pp:
                    self.skipped[f"{name} (stage {rank.pp})"] = "copy on a later pipeline stage (tied weights)"
                    continue
                pieces.append((rank, local))
        for name in list(self._pieces):
            self._add_meta(name, expert_tp)

    def _add_meta(self, name: str, expert_tp: int) -> None:
        pieces = self._pieces[name]
        rule = rule_for(name, self.rules, self.args)
        if rule.rule == "skip":
            del self._pieces[name]
            self.skipped[name] = f"skipped by rule at {rule.where}"
            return
        expected = expert_tp if _EXPERT.match(pieces[0][1]) else self.tensor_parallel
        if [rank.tp for rank, _ in pieces] != list(range(expected)):
            raise InputError(f"{self.path} [{name}]", f"held by tensor-parallel ranks {[r.tp for r, _ in pieces]}, "
                             f"expected 0..{expected - 1}", "a rank file is damaged or from another run")
        tensors = [rank.tensors[local] for rank, local in pieces]
        dtypes = {dtype_name(tensor.dtype) for tensor in tensors}
        if len(dtypes) != 1:
            raise InputError(f"{self.path} [{name}]", f"ranks disagree on dtype: {sorted(dtypes)}", "damaged rank file")
        shape = merged_shape(rule, name, [tuple(t.shape) for t in tensors], str(pieces[0][0].path))
        self._rules[name] = rule
        self._metas[name] = TensorMeta(name, shape, dtypes.pop())

    # -- the TensorSource interface
    def metas(self) -> dict[str, TensorMeta]:
        return dict(self._metas)

    def read(self, name: str) -> np.ndarray:
        if name not in self._metas:
            raise missing_tensor(self.path, name, self._metas)
        pieces = self._pieces[name]
        arrays = [tensor_to_numpy(rank.tensors[local]) for rank, local in pieces]
        return merge(self._rules[name], name, arrays, str(pieces[0][0].path))

    def close(self) -> None:
        for rank in self.files:
            rank.tensors.clear()


def _local_expert_count(rank: RankFile) -> int:
    indices = set()
    for local in rank.tensors:
        match = _EXPERT.match(local)
        if match:
            indices.add(int(match.group(2) if match.group(2) is not None else match.group(5)))
    return len(indices)


def _global_name(local: str, layer_offset: int, expert_offset: int) -> tuple[str, bool]:
    """(global name, is an expert tensor) of a stage-local, expert-local name."""
    name = local
    layer = _LAYER.match(name)
    if layer:
        name = f"{layer.group(1)}{layer_offset + int(layer.group(2))}{layer.group(3)}"
    expert = _EXPERT.match(name)
    if not expert:
        return name, False
    if expert.group(1) is not None:
        return f"{expert.group(1)}{expert_offset + int(expert.group(2))}{expert.group(3)}", True
    return f"{expert.group(4)}{expert_offset + int(expert.group(5))}", True
