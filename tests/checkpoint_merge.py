"""Test-only inverse of a Megatron legacy checkpoint: rank files -> one full state dict.

Written independently of ``workbench.reference.megatron_io`` (none of its helpers are used),
so that save -> merge == original checks the writer against a second reading of the layout:

* pipeline: stage p's local ``decoder.layers.j`` is global layer ``offset_p + j``, where
  ``offset_p`` counts the layers of the earlier stages;
* tensor parallel: vocab / qkv rows concatenate on dim 0 (each rank holds whole query groups,
  so rank order restores group order), row-parallel weights on dim 1, fc1 is regrouped from
  ``[gate_r; up_r]`` per rank to ``[gate_0 .. gate_{tp-1}; up_0 .. up_{tp-1}]``, everything else
  must be identical on every rank.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

from workbench.reference.config import ModelConfig

LAYER_NAME = re.compile(r"^decoder\.layers\.(\d+)\.(.*)$")
RANK_DIR = re.compile(r"^mp_rank_(\d\d)(?:_(\d\d\d))?$")


def read_rank_files(root: Path) -> dict[tuple[int, int], dict]:
    """``{(tp, pp): model state dict}`` of the iteration named in the tracker file."""
    iteration = int((Path(root) / "latest_checkpointed_iteration.txt").read_text())
    found = {}
    for folder in (Path(root) / f"iter_{iteration:07d}").iterdir():
        match = RANK_DIR.match(folder.name)
        assert match, f"unexpected folder {folder}"
        with torch.serialization.safe_globals([argparse.Namespace]):
            payload = torch.load(folder / "model_optim_rng.pt", map_location="cpu", weights_only=True)
        found[(int(match.group(1)), int(match.group(2) or 0))] = payload["model"]
    return found


def merge_tensor_parallel(name: str, pieces: list[torch.Tensor]) -> torch.Tensor:
    if len(pieces) == 1:
        return pieces[0]
    if name in ("embedding.word_embeddings.weight", "output_layer.weight") or ".linear_qkv." in name:
        return torch.cat(pieces, dim=0)
    if name.endswith(("linear_fc1.weight", "linear_fc1.bias")):
        halves = [piece.chunk(2, dim=0) for piece in pieces]
        gates = [gate for gate, _ in halves]
        ups = [up for _, up in halves]
        return torch.cat(gates + ups, dim=0)
    if name.endswith(("linear_proj.weight", "linear_fc2.weight")):
        return torch.cat(pieces, dim=1)
    for piece in pieces[1:]:
        assert torch.equal(piece, pieces[0]), f"replicated {name} differs between tensor-parallel ranks"
    return pieces[0]


def layers_in(stage_model: dict) -> int:
    indices = {int(m.group(1)) for m in map(LAYER_NAME.match, stage_model) if m}
    assert indices == set(range(len(indices))), f"stage-local layer indices are not 0..n-1: {sorted(indices)}"
    return len(indices)


def merge_megatron_legacy(root: Path, model: ModelConfig) -> dict[str, torch.Tensor]:
    """Full state dict with global layer numbers, from every rank file under ``root``."""
    ranks = read_rank_files(Path(root))
    tensor_parallel = 1 + max(tp for tp, _ in ranks)
    pipeline_parallel = 1 + max(pp for _, pp in ranks)
    assert len(ranks) == tensor_parallel * pipeline_parallel, f"missing rank files: {sorted(ranks)}"
    merged: dict[str, torch.Tensor] = {}
    offset = 0
    for stage in range(pipeline_parallel):
        stage_models = [ranks[(tp, stage)] for tp in range(tensor_parallel)]
        for name in stage_models[0]:
            full = merge_tensor_parallel(name, [m[name] for m in stage_models])
            match = LAYER_NAME.match(name)
            global_name = f"decoder.layers.{offset + int(match.group(1))}.{match.group(2)}" if match else name
            merged[global_name] = full
        offset += layers_in(stage_models[0])
    assert offset == model.num_layers, f"found {offset} layers, model has {model.num_layers}"
    return merged
