"""Per-parameter gradient norms on the Megatron side, from what Megatron users have.

* ``--save-wgrads-interval N`` (Megatron >= core_v0.17) saves ``param.main_grad`` after the
  data-parallel reduce and before unscale/clip to
  ``{save}/wgrads/iter_{iteration+1:07d}/mp_rank_{tp:02d}[_{pp:03d}][_{ep:03d}].pth`` as
  ``{"model_chunk0": {name: tensor}}`` (tensor-parallel shards, fused tensors as stored). Each
  parameter's sum of squares is summed over the ranks that split it (``converters/megatron_parallel.yaml``),
  taken once where it is replicated; pipeline stages are renumbered to global layer indices.
  The folder's iteration is the 1-based update. Definition ``sum_sq_reduced``.
* The local-norm patch of the alignment method: ``print_rank_0(grad_norm_list)`` in the optimizer
  step prints ``[tensor(1.2e-05, device='cuda:0'), ...]``: squared norms of the reduced main
  gradients in optimizer order, without names, before that iteration's log line. Each list
  belongs to the next ``iteration N/`` line's update. Definition ``sum_sq_reduced``.
"""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace


from ..errors import InputError, location
from .schema import LOCAL_NORM_COLUMNS, SERIES_COLUMNS, LogSeries
from .tables import frame

WGRADS_ITERATION = re.compile(r"^iter_(\d{7})$")
WGRADS_RANK = re.compile(r"^mp_rank_(\d{2})(?:_(\d{3}))?(?:_(\d{3}))?\.pth$")
PATCH_VALUE = re.compile(r"tensor\(\[?\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))")
ITERATION = re.compile(r"\biteration\s+(\d+)/")
LAYER = re.compile(r"^(.*?\blayers\.)(\d+)(\..+)$")
DEFINITION = "sum_sq_reduced"


def strip_ddp(name: str) -> str:
    while name.startswith("module."):
        name = name[len("module."):]
    return name


def _rank_files(folder: Path) -> dict[tuple[int, int, int], Path]:
    files = {}
    for file in folder.iterdir():
        match = WGRADS_RANK.match(file.name)
        if match:
            files[tuple(int(g or 0) for g in match.groups())] = file
    if not files:
        raise InputError(str(folder), "no mp_rank_*.pth files", "pass the wgrads/ folder Megatron wrote")
    return files


def _sums_of_squares(file: Path) -> dict[str, float]:
    from ..tensors.torch_io import load_torch_file

    tree = load_torch_file(file)
    chunks = tree if isinstance(tree, dict) else None
    if not chunks or not all(isinstance(chunk, dict) for chunk in chunks.values()):
        raise InputError(str(file), "expected {'model_chunk0': {name: tensor}}", "pass a file written by --save-wgrads-interval")
    sums = {}
    for chunk in chunks.values():
        for name, tensor in chunk.items():
            if not hasattr(tensor, "double"):
                raise InputError(location(file, key=str(name)), f"not a tensor ({type(tensor).__name__})",
                                 "pass a file written by --save-wgrads-interval")
            sums[strip_ddp(str(name))] = float(tensor.double().pow(2).sum())
    return sums


def _global_layers(stages: list[dict[str, float]]) -> list[dict[str, float]]:
    """Pipeline stages number their layers from 0: shift each by the layers of the stages before."""
    offset, out = 0, []
    for stage in stages:
        indices = {int(m.group(2)) for name in stage if (m := LAYER.match(name))}
        out.append({(f"{m.group(1)}{int(m.group(2)) + offset}{m.group(3)}" if (m := LAYER.match(name)) else name): value
                    for name, value in stage.items()})
        offset += len(indices)
    return out


def read_wgrads(path: Path | str, run: str | None = None) -> LogSeries:
    """A ``wgrads/`` folder (or one ``iter_*`` in it): one step per iteration folder."""
    from ..tensors.megatron_rules import megatron_parallel_rules, rule_for

    path = Path(path)
    iterations = [path] if WGRADS_ITERATION.match(path.name) else sorted(
        p for p in path.iterdir() if p.is_dir() and WGRADS_ITERATION.match(p.name))
    if not iterations:
        raise InputError(str(path), "no iter_XXXXXXX folders", "pass {save}/wgrads written by --save-wgrads-interval")
    rules, args = megatron_parallel_rules(), SimpleNamespace(swiglu=True)
    rows = []
    for folder in iterations:
        step = int(WGRADS_ITERATION.match(folder.name).group(1))
        files = _rank_files(folder)
        stages = []
        for pipeline in sorted({pp for _, pp, _ in files}):
            merged: dict[str, float] = {}
            for (tensor_rank, pp, _), file in sorted(files.items()):
                if pp != pipeline:
                    continue
                for name, value in _sums_of_squares(file).items():
                    split = rule_for(name, rules, args).rule not in ("replicated", "skip")
                    if split or tensor_rank == 0 or name not in merged:
                        merged[name] = merged.get(name, 0.0) + value if split else merged.get(name, value)
            stages.append(merged)
        for position, (name, value) in enumerate(((n, v) for stage in _global_layers(stages) for n, v in stage.items())):
            rows.append((run or path.name, -1, step, -1, position, name, -1, value, DEFINITION, 0))
    return LogSeries(str(path), "megatron_wgrads", frame([], SERIES_COLUMNS), frame(rows, LOCAL_NORM_COLUMNS),
                     {"step_base": "iter_N folder = update N"},
                     ["sums of squares of the DP-reduced main gradients (before unscale and clipping), "
                      "tensor-parallel shards summed"])


def read_patch_lists(path: Path | str, run: str | None = None) -> LogSeries:
    """Every ``[tensor(x, device=...), ...]`` list of a Megatron log, nameless, in optimizer order."""
    path = Path(path)
    pending: list[tuple[int, list[float]]] = []
    rows, last_iteration, notes = [], 0, []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.decode("utf-8", errors="replace")
            if "tensor(" in line and "[" in line:
                values = [float(v) for v in PATCH_VALUE.findall(line)]
                if values:
                    pending.append((number, values))
                continue
            match = ITERATION.search(line)
            if match:
                last_iteration = int(match.group(1))
                for where, values in pending:
                    rows += [(run or path.stem, -1, last_iteration, -1, i, "", -1, v, DEFINITION, where)
                             for i, v in enumerate(values)]
                pending = []
    if pending:
        notes.append(f"{len(pending)} local-norm list(s) after the last iteration line: taken as update "
                     f"{last_iteration + 1}")
        for where, values in pending:
            rows += [(run or path.stem, -1, last_iteration + 1, -1, i, "", -1, v, DEFINITION, where)
                     for i, v in enumerate(values)]
    if not rows:
        raise InputError(str(path), "no [tensor(...), ...] local-norm lists", "print grad_norm_list in the optimizer step")
    return LogSeries(str(path), "megatron_patch", frame([], SERIES_COLUMNS), frame(rows, LOCAL_NORM_COLUMNS),
                     {}, notes + ["nameless local norms in optimizer order: names come from a checkpoint (--names-...)"])


