"""Megatron's own per-parameter captures (``--save-wgrads-interval N``, ``--save-params-interval N``)
presented as ONE state dict with global names, shards merged like a legacy checkpoint's.

Layout (Megatron-LM ``megatron/training/checkpointing.py`` ``save_grads``, called from
``megatron/training/training.py`` ``train_step`` ``_save_state_dict``)::

    {--save}/wgrads/iter_{iteration+1:07d}/mp_rank_{tp:02d}[_{pp:03d}][_{ep:03d}].pth
    {--save}/params/iter_{iteration+1:07d}/...      same names; ``param.data`` after optimizer.step()

* each ``.pth`` is ``torch.save(dict(state_dict))`` of ``{"model_chunk0": {param name: tensor}}``
  (one ``model_chunkK`` per virtual-pipeline chunk), names from
  ``unwrap_model(chunk).named_parameters()`` (no ``module.`` prefixes), tensors moved to CPU;
* ``wgrads`` holds ``param.main_grad``: on that iteration ``force_all_reduce`` makes the DP
  all-reduce run, and the save happens before ``optimizer.step()``, i.e. before unscaling and clipping;
* ``_{pp:03d}`` only when pipeline size > 1, ``_{ep:03d}`` only when expert size > 1; only expert
  data-parallel rank 0 writes; non-expert tensors repeat on every expert rank;
* ``dgrads`` (``--save-dgrads-interval``) are activation gradients keyed by module, not parameters:
  refused here.

The files carry no Megatron ``args``; the merge rules with ``when: swiglu`` need them. They come
from the checkpoint in the same ``--save`` folder (legacy or torch_dist: the tracker's iteration,
else the newest ``iter_*``; ``args`` read without unpickling tensors by
:mod:`workbench.config.megatron_checkpoint`), with ``config=`` (a training script, log or yaml:
``--config``: its ``swiglu`` and the sizes it states) and ``swiglu=`` over them when given. Without any, a tensor-parallel
capture is a one-line error naming the flag.
Rank files are loaded with ``torch.load(weights_only=True, mmap=True)`` (:func:`.torch_io.load_torch_file`).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from .folder_kinds import ITERATION as _ITER, LABELS, RANK_FILE as _RANK_FILE, REFUSED_LABELS
from .folder_kinds import is_megatron_capture, iterations as _iterations, rank_files as _rank_files  # noqa: F401
from .megatron_files import read_tracker
from .megatron_ranks import RankFile, RankMergedSource, rank_coordinates
from .megatron_rules import ParallelRule, megatron_parallel_rules
from .torch_io import flatten, load_torch_file, split_tensors

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")
_CHUNK = "model_chunk0"
_FIX_DAMAGED = "the capture file is damaged or not Megatron's: save this iteration again"


# ----------------------------------------------------------------------------- finding the files

def _lone_file(path: Path) -> list[tuple[Path, tuple]]:
    """One ``.pth`` passed alone: its rank digits from its name (none for a renamed file)."""
    match = _RANK_FILE.match(path.name)
    return [(path, tuple(int(g) for g in match.groups() if g is not None) if match else ())]


def capture_folder(path: Path) -> Path:
    """The iteration folder for ``path``: itself, or the newest ``iter_*`` of a label root."""
    if not _ITER.match(path.name):
        iterations = _iterations(path)
        if not iterations:
            raise InputError(str(path), "no iter_*/mp_rank_*.pth files", "pass Megatron's {--save}/wgrads folder")
        path = iterations[-1][1]
    label = path.parent.name
    if label in REFUSED_LABELS:
        raise InputError(str(path), f"{label} are {REFUSED_LABELS[label]}", "pass the wgrads or params folder")
    return path


# ----------------------------------------------------------------------------- one rank file

def _chunk(path: Path) -> dict:
    payload = load_torch_file(path)
    if not isinstance(payload, dict):
        raise InputError(str(path), f"holds a {type(payload).__name__}, expected {{'{_CHUNK}': {{name: tensor}}}}",
                         _FIX_DAMAGED)
    if _CHUNK not in payload:
        raise InputError(str(path), f"no '{_CHUNK}' entry (keys: {sorted(map(str, payload))[:6]})", _FIX_DAMAGED)
    if len(payload) > 1:
        raise InputError(str(path), f"{len(payload)} model chunks: virtual pipeline captures are not supported",
                         "capture without --num-layers-per-virtual-pipeline-stage")
    chunk = payload[_CHUNK]
    if not isinstance(chunk, dict):
        raise InputError(f"{path} [{_CHUNK}]", f"expected a mapping of parameter name to tensor, found "
                         f"{type(chunk).__name__}", _FIX_DAMAGED)
    for name, value in chunk.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(f"{path} [{ascii(name)[:80]}]", "not a Megatron parameter name (expected "
                             f"{_NAME.pattern})", _FIX_DAMAGED)
        if isinstance(value, dict):
            raise InputError(f"{path} [{name}]", "a nested mapping, expected a tensor", _FIX_DAMAGED)
    return chunk


def _rank_file(path: Path, digits: tuple, args: Any) -> RankFile:
    tensors, skipped = split_tensors(flatten(_chunk(path)), path)
    if skipped:
        name, why = next(iter(skipped.items()))
        raise InputError(f"{path} [{name}]", why, _FIX_DAMAGED)
    return RankFile(path, *rank_coordinates(digits, args, str(path)), tensors, skipped)


# ----------------------------------------------------------------------------- Megatron args

def _checkpoint_args(save_root: Path) -> tuple[Any, str] | None:
    """(args, file) from the checkpoint (legacy or torch_dist) in the same ``--save`` folder, if one is there."""
    from ..config.megatron_checkpoint import find_checkpoint_file, read_checkpoint_args

    has_checkpoint = read_tracker(save_root) is not None or any(
        any(folder.glob("mp_rank_*/model_optim_rng.pt")) or (folder / "common.pt").is_file()
        for folder in save_root.glob("iter_*") if folder.is_dir())
    if not has_checkpoint:
        return None
    return argparse.Namespace(**read_checkpoint_args(save_root)), str(find_checkpoint_file(save_root))


_CONFIG_ARGS = {"parallel.tensor": "tensor_model_parallel_size", "parallel.pipeline": "pipeline_model_parallel_size",
                "parallel.expert": "expert_model_parallel_size", "model.num_layers": "num_layers"}


def args_from_config(config: Path) -> argparse.Namespace:
    """The Megatron arguments the merge reads, from a training script, log or yaml: ``swiglu`` (its
    activation), and the parallel sizes and layer count the config states (not its defaults)."""
    from ..spec.config_params import read_model_config

    canonical = read_model_config(config, "megatron").canonical
    activation = canonical.value("model.activation")
    args = {"swiglu": activation == "swiglu"} if isinstance(activation, str) else {}
    for key, name in _CONFIG_ARGS.items():
        item = canonical.values.get(key)
        if item is not None and item.kind == "set" and isinstance(item.value, int):
            args[name] = item.value
    return argparse.Namespace(**args)


def _needs_args(rules: list[ParallelRule]) -> list[str]:
    return sorted({name for rule in rules for name in (rule.when, rule.unless) if name})


# ----------------------------------------------------------------------------- the merged view

class MegatronCaptureSource(RankMergedSource):
    """One ``wgrads``/``params`` iteration of Megatron's capture as one state dict with global names."""

    framework = "megatron"

    def __init__(self, path: Path | str, rules: list[ParallelRule] | None = None, swiglu: bool | None = None,
                 config: Path | str | None = None):
        from .megatron_legacy import with_swiglu

        given = Path(path)
        rules = rules if rules is not None else megatron_parallel_rules()
        folder = given.parent if given.is_file() else capture_folder(given)
        found = _lone_file(given) if given.is_file() else _rank_files(folder)
        if given.is_file() and len(_rank_files(folder)) > 1:
            raise InputError(str(given), f"one of the {len(_rank_files(folder))} rank files of this iteration: "
                             "a shard, not the full tensors", f"pass the folder {folder}")
        self.kind = folder.parent.name if folder.parent.name in LABELS else "wgrads"
        match = _ITER.match(folder.name)
        self.iteration = int(match.group(1)) if match else None
        args, where = self._args(folder, found, rules, config)
        args = with_swiglu(args, swiglu)
        files = [_rank_file(file, digits, args) for file, digits in found]
        super().__init__(given, files, args, where, rules, lone_file=given.is_file())

    @staticmethod
    def _args(folder: Path, found: list, rules: list[ParallelRule], config) -> tuple[Any, str]:
        """Args from the save folder's checkpoint (sizes, swiglu), ``config``'s swiglu over them."""
        save_root = folder.parent.parent
        carried = _checkpoint_args(save_root) if folder.parent.name in LABELS and save_root.is_dir() else None
        args, where = carried if carried is not None else (None, str(folder))
        if config is not None:
            args = argparse.Namespace(**{**(vars(args) if args is not None else {}),
                                         **vars(args_from_config(Path(config)))})
            where = where if carried is not None else str(config)
        if args is not None:
            return args, where
        tensor_ranks = {digits[0] for _, digits in found if digits}
        if len(tensor_ranks) <= 1:
            return argparse.Namespace(), where          # nothing is merged: the rules' flags do not matter
        raise InputError(str(folder), f"{len(tensor_ranks)} tensor-parallel ranks to merge, and the rules need "
                         f"Megatron's {', '.join('--' + f.replace('_', '-') for f in _needs_args(rules))} setting, "
                         "which the capture files do not carry (no checkpoint in the same --save folder)",
                         "pass --config with the training script or log")
