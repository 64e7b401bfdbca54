"""Write and read Megatron *legacy* (``--ckpt-format torch``) checkpoints of the reference model.

Layout on disk (megatron/training/checkpointing.py ``get_checkpoint_name``, ``save_checkpoint``)::

    root/latest_checkpointed_iteration.txt            "<iteration>"
    root/iter_0000010/mp_rank_00/model_optim_rng.pt   pipeline_parallel == 1
    root/iter_0000010/mp_rank_01_003/model_optim_rng.pt   tp rank 1, pp rank 3 (pp > 1)

Each file is ``torch.save({"args": Namespace, "checkpoint_version": 3.0, "iteration": it,
"model": shard, ...})``. Tensor parallel (megatron/core/tensor_parallel/layers.py):

* dim 0 (VocabParallelEmbedding, ColumnParallelLinear): ``word_embeddings``, ``output_layer``,
  ``linear_qkv`` (+bias; whole query groups per rank), ``linear_fc1`` (dense, experts, shared
  experts; each rank its own ``[gate_r; up_r]``);
* dim 1 (RowParallelLinear): ``linear_proj``, ``linear_fc2``; their biases are replicated;
* replicated: norms, ``q/k_layernorm``, ``mlp.router`` (a plain Parameter in moe/router.py).

Pipeline stages hold consecutive layer ranges with local indices restarting at 0; the
embedding lives on the first stage, the final norm and the output layer on the last.
torch is imported inside the functions (this module imports without it).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..tensors.megatron_files import TRACKER_FILE
from .config import ModelConfig
from .layouts import fuse_gate_up, split_gate_up

CHECKPOINT_FILE = "model_optim_rng.pt"
CHECKPOINT_VERSION = 3.0
_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")
_RANK_FOLDER = re.compile(r"^mp_rank_(\d{2})(?:_(\d{3}))?$")


# ----------------------------------------------------------------------------- names and args

def iteration_folder(root: Path | str, iteration: int) -> Path:
    return Path(root) / f"iter_{iteration:07d}"


def checkpoint_path(root: Path | str, iteration: int, tensor_rank: int, pipeline_rank: int,
                    pipeline_parallel: bool) -> Path:
    """``root/iter_{:07d}/mp_rank_{tp:02d}[_{pp:03d}]/model_optim_rng.pt`` as Megatron names it."""
    folder = f"mp_rank_{tensor_rank:02d}"
    if pipeline_parallel:
        folder += f"_{pipeline_rank:03d}"
    return iteration_folder(root, iteration) / folder / CHECKPOINT_FILE


def megatron_args(model: ModelConfig, padded_vocab_size: int, tensor_parallel: int = 1,
                  pipeline_parallel: int = 1, iteration: int = 0, params_dtype: Any = None) -> argparse.Namespace:
    """The Megatron argument names (``arguments.py``) that describe ``model`` and the layout."""
    import torch

    params_dtype = params_dtype or torch.float32
    return argparse.Namespace(
        num_layers=model.num_layers, hidden_size=model.hidden_size,
        num_attention_heads=model.num_attention_heads, kv_channels=model.head_dim,
        group_query_attention=model.num_kv_heads != model.num_attention_heads,
        num_query_groups=model.num_kv_heads, ffn_hidden_size=model.ffn_hidden_size,
        seq_length=model.seq_length, max_position_embeddings=model.seq_length,
        vocab_size=model.vocab_size, padded_vocab_size=padded_vocab_size, make_vocab_size_divisible_by=1,
        swiglu=True, normalization="RMSNorm", norm_epsilon=model.norm_epsilon,
        position_embedding_type="rope", rotary_base=model.rotary_base, rotary_percent=1.0,
        untie_embeddings_and_output_weights=True, add_bias_linear=False, add_qkv_bias=model.qkv_bias,
        qk_layernorm=model.qk_norm, init_method_std=model.init_std,
        num_experts=model.num_experts or None, moe_router_topk=model.moe_router_topk,
        moe_ffn_hidden_size=model.expert_ffn_size if model.num_experts else None,
        moe_shared_expert_intermediate_size=model.shared_expert_size or None,
        moe_grouped_gemm=False, moe_router_load_balancing_type="none", moe_aux_loss_coeff=0.0,
        tensor_model_parallel_size=tensor_parallel, pipeline_model_parallel_size=pipeline_parallel,
        expert_model_parallel_size=1, virtual_pipeline_model_parallel_size=None, sequence_parallel=False,
        params_dtype=params_dtype, fp16=params_dtype == torch.float16, bf16=params_dtype == torch.bfloat16,
        iteration=iteration, ckpt_format="torch", use_dist_ckpt=False, no_save_optim=False, no_save_rng=True,
        transformer_impl="local", use_legacy_models=False, world_size=tensor_parallel * pipeline_parallel)


# ----------------------------------------------------------------------------- shard transforms

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

def _default_args(state_dict: dict, model: ModelConfig, tensor_parallel: int, pipeline_parallel: int,
                  iteration: int) -> argparse.Namespace:
    """Args from the model; padded vocab = rows of the embedding as given, dtype = the tensors' dtype."""
    embedding = state_dict.get("embedding.word_embeddings.weight")
    vocab_rows = int(embedding.shape[0]) if embedding is not None else model.vocab_size
    dtype = next(iter(state_dict.values())).dtype if state_dict else None
    return megatron_args(model, vocab_rows, tensor_parallel, pipeline_parallel, iteration, dtype)


def _layout_args(args: argparse.Namespace, tensor_parallel: int, pipeline_parallel: int,
                 iteration: int) -> argparse.Namespace:
    """A copy of the caller's args whose parallel sizes match the files written."""
    return argparse.Namespace(**{**vars(args), "tensor_model_parallel_size": tensor_parallel,
                                 "pipeline_model_parallel_size": pipeline_parallel, "iteration": iteration})


def _atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """``write`` a temporary file beside ``path``, then rename it into place."""
    from ..fileio import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary:
        write(temporary)


def save_megatron_legacy(state_dict: dict, model: ModelConfig, root: Path, iteration: int = 0,
                         tensor_parallel: int = 1, pipeline_parallel: int = 1,
                         args: argparse.Namespace | None = None, optimizer_state: dict | None = None) -> list[Path]:
    """Write ``state_dict`` (Megatron-core local-spec names, full tensors) as a legacy checkpoint.

    Returns the written ``model_optim_rng.pt`` paths, ordered by (pp rank, tp rank).
    ``optimizer_state``, when given, is stored as is under ``"optimizer"`` in every file.
    """
    import torch

    root = Path(root)
    args = _layout_args(args or _default_args(state_dict, model, tensor_parallel, pipeline_parallel, iteration),
                        tensor_parallel, pipeline_parallel, iteration)
    written = []
    for pipeline_rank, stage in enumerate(split_pipeline(state_dict, model.num_layers, pipeline_parallel)):
        for tensor_rank, shard in enumerate(shard_tensor_parallel(stage, model, tensor_parallel)):
            payload = {"args": args, "checkpoint_version": CHECKPOINT_VERSION, "iteration": iteration,
                       "model": shard, "num_floating_point_operations_so_far": 0}
            if optimizer_state is not None:
                payload["optimizer"] = optimizer_state
            path = checkpoint_path(root, iteration, tensor_rank, pipeline_rank, pipeline_parallel > 1)
            _atomic_write(path, lambda temporary, payload=payload: torch.save(payload, temporary))
            written.append(path)
    _atomic_write(root / TRACKER_FILE, lambda temporary: temporary.write_text(str(iteration)))
    return written


def _tracked_iteration(root: Path) -> int:
    from ..tensors.megatron_files import read_tracker

    tracked = read_tracker(root)
    if tracked is None:
        raise InputError(str(root / TRACKER_FILE), "missing: not a Megatron checkpoint folder",
                         "pass the --save folder that holds latest_checkpointed_iteration.txt")
    if tracked.iteration is None:
        raise InputError(str(root / TRACKER_FILE), "names the release checkpoint",
                         "release checkpoints are not supported here: pass iteration=")
    return tracked.iteration


def load_checkpoint_file(path: Path | str) -> dict:
    """``torch.load`` one ``model_optim_rng.pt`` safely: weights only, mmap, Namespace allow-listed;
    a damaged or refused file is one InputError naming it."""
    from ..tensors.torch_io import load_torch_file

    return load_torch_file(Path(path), [argparse.Namespace])


def load_megatron_legacy_shards(root: Path | str, iteration: int | None = None) -> dict[tuple[int, int], dict]:
    """Every rank file of a legacy checkpoint, keyed by ``(tp_rank, pp_rank)``."""
    root = Path(root)
    iteration = _tracked_iteration(root) if iteration is None else iteration
    folder = iteration_folder(root, iteration)
    shards = {}
    for rank_folder in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = _RANK_FOLDER.match(rank_folder.name)
        if match and (rank_folder / CHECKPOINT_FILE).is_file():
            key = (int(match.group(1)), int(match.group(2) or 0))
            shards[key] = load_checkpoint_file(rank_folder / CHECKPOINT_FILE)
    if not shards:
        raise InputError(str(folder), "no mp_rank_*/model_optim_rng.pt files found",
                         "check the folder and the iteration")
    return shards
