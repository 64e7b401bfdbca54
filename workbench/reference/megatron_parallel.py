"""A full state dict cut the way Megatron's tensor and pipeline parallel ranks hold it (the reference's
legacy checkpoint writer, :mod:`.megatron_io`, and the tests' gradient captures use it).

Tensor parallel (megatron/core/tensor_parallel/layers.py), for ``tensor_parallel`` = 2::

    dim 0, ColumnParallel          dim 1, RowParallel            replicated
    [ rank 0 rows ]                [ rank 0 | rank 1 ]           [ whole ]  [ whole ]
    [ rank 1 rows ]                 columns    columns            rank 0     rank 1

* dim 0: ``word_embeddings``, ``output_layer``, ``linear_qkv`` (+bias; whole query groups per rank),
  ``linear_fc1`` (dense, experts, shared experts; each rank its own ``[gate_r; up_r]``);
* dim 1: ``linear_proj``, ``linear_fc2``; their biases are replicated;
* replicated: norms, ``q/k_layernorm``, ``mlp.router`` (a plain Parameter in moe/router.py).

Pipeline stages hold consecutive layer ranges with local indices restarting at 0; the embedding lives on
the first stage, the final norm and the output layer on the last.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from ..errors import InputError
from .config import ModelConfig
from .layouts import fuse_gate_up, split_gate_up

_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")


def _fresh(tensor: Any) -> Any:
    """A copy with its own storage: ``torch.save`` of a view would write the whole base tensor."""
    return tensor.detach().clone()


def _check_divisible(name: str, size: int, parts: int, what: str) -> None:
    if size % parts:
        raise InputError(name, f"{what} {size} is not divisible by tensor_parallel {parts}",
                         "choose a tensor-parallel size that divides it")


def replicate(tensor: Any, tensor_parallel: int) -> list:
    """Every rank holds the full tensor (norms, router, row-parallel biases)."""
    return [_fresh(tensor) for _ in range(tensor_parallel)]


def shard_rows(tensor: Any, tensor_parallel: int, name: str = "tensor") -> list:
    """Column-parallel / vocab-parallel: consecutive blocks of dim 0.

    ::

        [ rows 0 .. n/tp-1    ]  -> rank 0
        [ rows n/tp .. 2n/tp-1 ]  -> rank 1
        ...
    """
    _check_divisible(name, tensor.shape[0], tensor_parallel, "dim 0")
    return [_fresh(part) for part in tensor.chunk(tensor_parallel, dim=0)]


def shard_columns(tensor: Any, tensor_parallel: int, name: str = "tensor") -> list:
    """Row-parallel (``linear_proj``, ``linear_fc2``): consecutive blocks of dim 1 (the input dim).

    ::

        [ cols 0..m/tp-1 | cols m/tp..2m/tp-1 | ... ]
             rank 0             rank 1
    """
    _check_divisible(name, tensor.shape[1], tensor_parallel, "dim 1")
    return [_fresh(part) for part in tensor.chunk(tensor_parallel, dim=1)]


def shard_gate_up(fc1: Any, tensor_parallel: int, name: str = "linear_fc1") -> list:
    """SwiGLU ``linear_fc1`` = ``[gate; up]``: rank r gets its own ``[gate_r; up_r]``.

    ::

        full [2F, h]            rank 0 [2F/tp, h]     rank 1 [2F/tp, h]
        +-----------+           +---------+           +---------+
        | gate_0    |           | gate_0  |           | gate_1  |
        | gate_1    |   --->    | up_0    |           | up_1    |
        +-----------+           +---------+           +---------+
        | up_0      |
        | up_1      |           (not a plain dim-0 chunk: that would give
        +-----------+            rank 0 all of gate and rank 1 all of up)
    """
    gate, up = split_gate_up(fc1)
    _check_divisible(name, gate.shape[0], tensor_parallel, "ffn size")
    return [_fresh(fuse_gate_up(g, u)) for g, u in zip(gate.chunk(tensor_parallel, 0), up.chunk(tensor_parallel, 0), strict=True)]


def shard_grouped_qkv(qkv: Any, num_groups: int, tensor_parallel: int, name: str = "linear_qkv") -> list:
    """Grouped ``linear_qkv`` (weight or bias): rank r holds query groups ``[r·ng/tp, (r+1)·ng/tp)``.

    The fused layout is already grouped (per group: its nh/ng query heads, then k_g, then v_g),
    so whole groups are consecutive row blocks; Megatron requires ``ng % tp == 0``::

        full (ng = 2, tp = 2)              rank 0            rank 1
        +----------------------+           +-------------+   +-------------+
        | q heads of group 0   |           | q group 0   |   | q group 1   |
        | k_0                  |   --->    | k_0         |   | k_1         |
        | v_0                  |           | v_0         |   | v_1         |
        +----------------------+           +-------------+   +-------------+
        | q heads of group 1   |
        | k_1                  |
        | v_1                  |
        +----------------------+
    """
    _check_divisible(name, num_groups, tensor_parallel, "num_query_groups")
    _check_divisible(name, qkv.shape[0], num_groups, "fused rows")
    return [_fresh(part) for part in qkv.chunk(tensor_parallel, dim=0)]


def shard_rule(name: str, model: ModelConfig) -> Callable[[Any, int], list]:
    """How parameter ``name`` splits across tensor-parallel ranks: the rule that
    ``converters/megatron_parallel.yaml`` declares for merging it (one source of truth)."""
    from types import SimpleNamespace

    from ..tensors.megatron_rules import megatron_parallel_rules, rule_for

    rule = rule_for(name, megatron_parallel_rules(), SimpleNamespace(swiglu=True)).rule
    if rule == "column" and ".self_attention.linear_qkv." in name:
        return lambda t, tp: shard_grouped_qkv(t, model.num_kv_heads, tp, name)  # whole query groups per rank
    splitters = {"column": lambda t, tp: shard_rows(t, tp, name), "row": lambda t, tp: shard_columns(t, tp, name),
                 "gate_up": lambda t, tp: shard_gate_up(t, tp, name), "replicated": replicate}
    if rule not in splitters:
        raise InputError(name, f"tensor-parallel rule {rule!r} cannot be written by the reference checkpoint writer",
                         "save this checkpoint without tensor parallelism")
    return splitters[rule]


def shard_tensor_parallel(state_dict: dict, model: ModelConfig, tensor_parallel: int) -> list[dict]:
    """One state dict per tensor-parallel rank, same keys in the same order."""
    shards: list[dict] = [{} for _ in range(tensor_parallel)]
    for name, tensor in state_dict.items():
        for rank, part in enumerate(shard_rule(name, model)(tensor, tensor_parallel)):
            shards[rank][name] = part
    return shards


# ----------------------------------------------------------------------------- pipeline stages

def stage_layer_ranges(num_layers: int, pipeline_parallel: int) -> list[range]:
    """Consecutive, equal layer ranges per stage (Megatron's default even split)."""
    if num_layers % pipeline_parallel:
        raise InputError("pipeline_parallel", f"num_layers {num_layers} is not divisible by "
                         f"pipeline_parallel {pipeline_parallel}", "choose a divisor of num_layers")
    per_stage = num_layers // pipeline_parallel
    return [range(stage * per_stage, (stage + 1) * per_stage) for stage in range(pipeline_parallel)]


def _stage_of(name: str, layer_ranges: list[range]) -> tuple[int, str]:
    """(stage, name local to that stage) for one global parameter name."""
    match = _LAYER.match(name)
    if match:
        index = int(match.group(1))
        for stage, layers in enumerate(layer_ranges):
            if index in layers:
                return stage, f"decoder.layers.{index - layers.start}.{match.group(2)}"
        raise InputError(name, f"layer {index} is outside the model's {layer_ranges[-1].stop} layers",
                         "pass the ModelConfig the state dict was built from")
    if name.startswith("embedding."):
        return 0, name
    return len(layer_ranges) - 1, name      # decoder.final_layernorm, output_layer


def split_pipeline(state_dict: dict, num_layers: int, pipeline_parallel: int) -> list[dict]:
    """One state dict per pipeline stage with stage-local layer indices."""
    layer_ranges = stage_layer_ranges(num_layers, pipeline_parallel)
    stages: list[dict] = [{} for _ in range(pipeline_parallel)]
    for name, tensor in state_dict.items():
        stage, local_name = _stage_of(name, layer_ranges)
        stages[stage][local_name] = tensor
    return stages


# ----------------------------------------------------------------------------- save and load
