"""A Megatron legacy checkpoint (``--ckpt-format torch``) presented as ONE state dict with global names.

::

    root/latest_checkpointed_iteration.txt      "<iteration>" or "release"
    root/iter_0000010/mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt
         {"args": Namespace, "iteration": .., "model": {local name: tensor}, "optimizer": ..}

Pipeline stages, expert ranks and tensor-parallel shards are merged by :mod:`.megatron_ranks`
(the same merge serves the ``--save-wgrads-interval`` captures, :mod:`.megatron_wgrads`).

Rank files are opened with ``torch.load(mmap=True, weights_only=True)``: ``argparse.Namespace``
is allow-listed, and Megatron/MindSpeed classes inside ``args`` (enums such as
``AttnBackend``) are replaced by inert :class:`MegatronObject` stand-ins, never imported.
The tracker file and ``args`` values are read through :mod:`.megatron_files` (one tracker reader,
typed values naming the key).
Virtual pipeline checkpoints (``model0``, ``model1``, ..) are not supported.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import InputError
from .megatron_files import TRACKER_FILE, read_tracker
from .megatron_ranks import RANK_NAME, RankFile, RankMergedSource, rank_coordinates
from .megatron_rules import ParallelRule, megatron_parallel_rules
from .torch_io import flatten, load_torch_file, refused_global, split_tensors

CHECKPOINT_FILE = "model_optim_rng.pt"
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
    if any(RANK_NAME.match(child.name) for child in root.iterdir()):
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
        match = RANK_NAME.match(child.name)
        if match and (child / CHECKPOINT_FILE).is_file():
            found.append((child / CHECKPOINT_FILE, tuple(int(g) for g in match.groups() if g is not None)))
    if not found:
        raise InputError(str(folder), f"no mp_rank_*/{CHECKPOINT_FILE} files found", "check the folder and iteration")
    return found


# ----------------------------------------------------------------------------- the merged view

class MegatronLegacySource(RankMergedSource):
    """Every rank file of one iteration as one state dict with global Megatron names.

    ``swiglu`` overrides the checkpoint's ``args.swiglu`` (needed when ``args`` is absent);
    ``rules`` overrides ``converters/megatron_parallel.yaml``.
    """

    def __init__(self, path: Path | str, rules: list[ParallelRule] | None = None, swiglu: bool | None = None):
        path = Path(path)
        found = rank_files(path)
        payloads = [load_rank_file(file) for file, _ in found]
        args_where = str(found[0][0])
        args = with_swiglu(_args_of(payloads[0], found[0][0]), swiglu)
        self.iteration = payloads[0].get("iteration")
        files = []
        for (file, digits), payload in zip(found, payloads, strict=True):
            tensors, skipped = split_tensors(flatten(_model_of(payload, file)), file)
            files.append(RankFile(file, *rank_coordinates(digits, args, args_where), tensors, skipped))
        super().__init__(path, files, args, args_where, rules if rules is not None else megatron_parallel_rules(),
                         lone_file=found[0][1] == ())


def with_swiglu(args: Any, swiglu: bool | None) -> Any:
    """``args`` with ``swiglu`` set (a new Namespace; ``args`` may be None); ``args`` itself when None given."""
    if swiglu is None:
        return args
    return argparse.Namespace(**{**(vars(args) if args is not None else {}), "swiglu": swiglu})
