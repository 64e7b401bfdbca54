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
embedding lives on the first stage, the final norm and the output layer on the last. The shards are
cut by :mod:`.megatron_parallel`. torch is imported inside the functions (this module imports without it).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..tensors.megatron_files import TRACKER_FILE
from .config import ModelConfig
from .megatron_parallel import shard_tensor_parallel, split_pipeline

CHECKPOINT_FILE = "model_optim_rng.pt"
CHECKPOINT_VERSION = 3.0
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
