"""Megatron rank files (``mp_rank_TT[_PPP][_EEE]``) merged into ONE state dict with global names.

Shared by every reader of per-rank Megatron tensors: legacy checkpoints (:mod:`.megatron_legacy`)
and the ``--save-wgrads-interval`` captures (:mod:`.megatron_wgrads`). Given ``{rank: {local name:
tensor}}`` and the Megatron ``args``:

* pipeline stage p holds consecutive layers with local indices restarting at 0; its global
  offset counts the layers found in the earlier stages' files;
* expert-parallel rank e holds ``local_experts.j`` = global expert ``e * E_local + j`` (and
  TEGroupedMLP ``weightj``); other tensors are replicated over expert ranks (rank 0 is read);
* tensor-parallel shards are merged per tensor, only when it is read, by the rules of
  ``converters/megatron_parallel.yaml`` (:mod:`.megatron_rules`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from .base import SourceBase, TensorMeta
from .common import missing_tensor
from .megatron_files import arg
from .megatron_rules import ParallelRule, merge, merged_shape, rule_for
from .torch_io import dtype_name, tensor_to_numpy

RANK_NAME = re.compile(r"^mp_rank_(\d{2})(?:_(\d{3}))?(?:_(\d{3}))?$")
_LAYER = re.compile(r"^(.*?\blayers\.)(\d+)(\..+)$")
_EXPERT = re.compile(r"^(.*\.local_experts\.)(\d+)(\..+)$|^(.*\.experts\.linear_fc[12]\.weight)(\d+)()$")


@dataclass
class RankFile:
    path: Path
    tp: int
    pp: int
    ep: int
    tensors: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def rank_coordinates(digits: tuple, args: Any, where: str) -> tuple[int, int, int]:
    """(tp, pp, ep) from the folder digits; ``mp_rank_TT_XXX`` is pp unless only experts are parallel."""
    if len(digits) <= 1:
        return (digits[0] if digits else 0), 0, 0
    if len(digits) == 3:
        return digits
    pipeline = arg(args, "pipeline_model_parallel_size", int, 0, where)
    experts = arg(args, "expert_model_parallel_size", int, 1, where) or 1
    return (digits[0], 0, digits[1]) if pipeline <= 1 and experts > 1 else (digits[0], digits[1], 0)


# ----------------------------------------------------------------------------- the merged view

class RankMergedSource(SourceBase):
    """Rank files (already loaded: ``files``) as one state dict with global Megatron names.

    ``args`` is the Megatron ``argparse.Namespace`` (or None) the rules and checks read, named in
    messages as ``args_where``; ``lone_file`` says one rank file was passed instead of its folder.
    """

    def __init__(self, path: Path, files: list[RankFile], args: Any, args_where: str,
                 rules: list[ParallelRule], lone_file: bool = False):
        self.path, self.files, self.args, self.rules = Path(path), files, args, rules
        self._args_where = args_where
        self.tensor_parallel = 1 + max(rank.tp for rank in self.files)
        for flag in {name for rule in self.rules for name in (rule.when, rule.unless) if name}:
            self._arg(flag, bool, False)                  # a damaged flag is named here, with the file
        if lone_file:
            self._check_single_file()
        self._check_grid()
        self.skipped: dict[str, str] = {}
        self._pieces: dict[str, list[tuple[RankFile, str]]] = {}
        self._rules: dict[str, ParallelRule] = {}
        self._metas: dict[str, TensorMeta] = {}
        self._index()

    # -- construction
    def _arg(self, key: str, kind: type, default: Any) -> Any:
        return arg(self.args, key, kind, default, self._args_where)

    def _check_single_file(self) -> None:
        import numpy as np

        ranks = [self._arg(key, int, 1) or 1 for key in
                 ("tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size")]
        if np.prod(ranks) > 1:
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
        shards = [self._shard_meta(rank, local) for rank, local in pieces]
        dtypes = {dtype for _, dtype in shards}
        if len(dtypes) != 1:
            raise InputError(f"{self.path} [{name}]", f"ranks disagree on dtype: {sorted(dtypes)}", "damaged rank file")
        shape = merged_shape(rule, name, [shard_shape for shard_shape, _ in shards], str(pieces[0][0].path))
        self._rules[name] = rule
        self._metas[name] = TensorMeta(name, shape, dtypes.pop())

    # -- one shard (torch tensors here; a subclass holding other tensors overrides both)
    def _shard_meta(self, rank: RankFile, local: str) -> tuple[tuple[int, ...], str | None]:
        tensor = rank.tensors[local]
        return tuple(tensor.shape), dtype_name(tensor.dtype)

    def _shard_array(self, rank: RankFile, local: str) -> np.ndarray:
        return tensor_to_numpy(rank.tensors[local])

    # -- the TensorSource interface
    def metas(self) -> dict[str, TensorMeta]:
        return dict(self._metas)

    def read(self, name: str) -> np.ndarray:
        if name not in self._metas:
            raise missing_tensor(self.path, name, self._metas)
        pieces = self._pieces[name]
        arrays = [self._shard_array(rank, local) for rank, local in pieces]
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
