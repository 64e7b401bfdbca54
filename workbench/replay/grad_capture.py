"""Gradient capture on the torch / Megatron side: one update's gradients, weights and Adam state by name.

Call :func:`capture_gradients` between backward and ``optimizer.step()``, and :func:`capture_after_step`
right after it (``megatron_train_step_snippet`` below). Both write through the step store
(:func:`workbench.replay.step_store.save_step_tensors`, ``datasets/step_store.yaml``)::

    ROOT/step_{N}/grads/            param.main_grad where Megatron keeps one, else param.grad
    ROOT/step_{N}/params_before/    (params=True) the weights the optimizer starts from
    ROOT/step_{N}/params_after/     the weights after the step
    ROOT/step_{N}/exp_avg/ exp_avg_sq/   Adam's moments after the step (meta optimizer_step: Adam's count)

- **N** is the update number as Megatron's log prints it (``iteration N``): in ``train_step`` pass
  ``args.curr_iteration + 1`` (``curr_iteration`` counts the updates already done).
- **Names**: ``model.named_parameters()`` with every leading ``module.`` removed (DDP and
  Float16Module wrap the model once each), so they are the checkpoint's names. Frozen parameters
  (``requires_grad=False``) are left out. A trainable parameter without a gradient is not written and
  is listed in the manifest's ``meta.no_grad`` (and a :class:`GradCaptureWarning` is issued).
- **Weights**: the optimizer's fp32 master copy where it keeps one (Megatron's
  ``Float16OptimizerWithFloat16Params``: ``float16_groups`` ↔ ``fp32_from_float16_groups``), else the
  parameter. Every bf16/fp16 tensor is stored as fp32 (exact); ``meta.widened_to_fp32`` lists them.
- **Metadata**: ``iteration``, ``side: megatron``, ``param_groups`` (per group: ``lr``,
  ``weight_decay``, parameter names), ``lr`` when every group has the same one, and ``loss_scale``,
  ``grad_norm`` (before clipping), ``clip_coeff`` when given. Megatron's gradients are scaled by the
  loss scale at this point (``optimizer.step()`` unscales them).
- **Megatron facts used**: the hook point is ``train_step``'s ``optimizer.step()`` (Megatron-LM
  megatron/training/training.py); the clip coefficient ``clip_grad / (norm + 1e-6)``, applied below 1
  (megatron/core/optimizer/clip_grads.py); fp16/bf16 params paired with fp32 masters in
  ``float16_groups`` / ``fp32_from_float16_groups`` (megatron/core/optimizer/optimizer.py).
- **Tensor / pipeline parallel**: on a TP or PP rank each rank writes its own shard into the kind
  folder's rank folder ``mp_rank_{tp:02d}_{pp:03d}/`` (``rank_dir`` in datasets/step_store.yaml), names
  stage-local as the rank holds them, with ``tp_rank``/``tp_size``/``pp_rank``/``pp_size``/``swiglu``
  in the manifest; readers merge the ranks through ``converters/megatron_parallel.yaml`` like a
  checkpoint. Pass ``args=`` (Megatron's ``get_args()``: sizes and ``swiglu``; ranks from
  ``megatron.core.parallel_state``) or ``tp_rank``/``tp_size``/``pp_rank``/``pp_size``/``swiglu``.
- No torch import at module import time, and no process group: each rank writes what it holds.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Mapping

from .step_store import save_step_tensors

__all__ = ["GradCaptureWarning", "capture_after_step", "capture_gradients", "megatron_train_step_snippet",
           "parallel_ranks", "trainable_parameters", "unwrapped_name"]

PREFIX = "module."
SIDE = "megatron"

megatron_train_step_snippet = '''\
# megatron/training/training.py, train_step(): around "update_successful, grad_norm, num_zeros_in_grad = optimizer.step()"
    from workbench.replay.grad_capture import capture_after_step, capture_gradients
    root, update = os.environ["WORKBENCH_GRADS_DIR"], args.curr_iteration + 1    # update N = log's "iteration N"
    capture_gradients(model[0], root, update, optimizer, params=True, loss_scale=optimizer.get_loss_scale().item(), args=args)
    update_successful, grad_norm, num_zeros_in_grad = optimizer.step()
    capture_after_step(model[0], optimizer, root, update, grad_norm=grad_norm, clip_grad=args.clip_grad, args=args)
'''


class GradCaptureWarning(UserWarning):
    """A trainable parameter had no gradient (or no optimizer state): it is listed, not written."""


def unwrapped_name(name: str) -> str:
    """``module.module.decoder.x`` → ``decoder.x`` (DDP / Float16Module prefixes, repeated)."""
    while name.startswith(PREFIX):
        name = name[len(PREFIX):]
    return name


def trainable_parameters(model) -> dict:
    """Unwrapped name → parameter, model order, trainable parameters only; two wrappers of one name refused."""
    params: dict = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        short = unwrapped_name(name)
        if short in params:
            raise ValueError(f"grad capture: parameters {name!r} and another one both unwrap to {short!r}")
        params[short] = param
    return params


def _inner(optimizer):
    """The torch optimizer inside Megatron's wrappers (``MegatronOptimizer.optimizer``)."""
    import torch

    optimizer = _unchained(optimizer)
    while not isinstance(optimizer, torch.optim.Optimizer) and hasattr(optimizer, "optimizer"):
        optimizer = optimizer.optimizer
    return optimizer


def _unchained(optimizer):
    """Megatron's ``ChainedOptimizer`` holding one optimizer → that optimizer."""
    chained = getattr(optimizer, "chained_optimizers", None)
    if chained is not None:
        if len(chained) != 1:
            raise ValueError(f"grad capture: a ChainedOptimizer of {len(chained)} optimizers; capture with one")
        return chained[0]
    return optimizer


def _masters(params: Mapping[str, object], optimizer) -> dict[str, object]:
    """Name → the tensor the optimizer updates: Megatron's fp32 master copy where it keeps one, else the param."""
    optimizer = _unchained(optimizer)
    if type(optimizer).__name__.startswith("DistributedOptimizer"):
        raise ValueError("grad capture: Megatron's DistributedOptimizer keeps each DP rank's shard of the weights and "
                         "Adam state: capture this step without --use-distributed-optimizer (docs/step-store.md)")
    masters = dict(params)
    names = {id(param): name for name, param in params.items()}
    for model_group, master_group in zip(getattr(optimizer, "float16_groups", ()),
                                         getattr(optimizer, "fp32_from_float16_groups", ()), strict=True):
        for param, master in zip(model_group, master_group, strict=True):
            if id(param) in names:
                masters[names[id(param)]] = master
    return masters


def _group_meta(masters: Mapping[str, object], optimizer) -> dict:
    """``param_groups`` (lr, weight_decay, names per group) and ``lr`` when all groups agree."""
    names = {id(tensor): name for name, tensor in masters.items()}
    groups = [{"lr": float(group["lr"]), "weight_decay": float(group.get("weight_decay", 0.0)),
               "params": [names.get(id(p), "?") for p in group["params"]]} for group in _inner(optimizer).param_groups]
    meta: dict = {"param_groups": groups}
    if len({group["lr"] for group in groups}) == 1:
        meta["lr"] = groups[0]["lr"]
    return meta


class _Deferred:
    """A tensor to copy (detached, widened to fp32 when half) only when the writer converts it: ``dtype``
    answers without copying, ``detach()`` makes the copy (:func:`workbench.replay.npy_writer.to_numpy`)."""

    def __init__(self, tensor, widen: bool):
        self.tensor, self.widen = tensor, widen

    @property
    def dtype(self):
        import torch

        return torch.float32 if self.widen else self.tensor.dtype

    def detach(self):
        tensor = self.tensor.detach()
        return tensor.float() if self.widen else tensor


class _AsFp32(Mapping):
    """Name → a :class:`_Deferred` copy (the writer converts one tensor at a time: the capture never holds a
    second copy of the model); bf16/fp16 widened to fp32 (exact), their names in ``widened``."""

    def __init__(self, tensors: Mapping[str, object]):
        self.tensors = dict(tensors)
        self.widened = [name for name, tensor in self.tensors.items()
                        if str(tensor.dtype) in ("torch.bfloat16", "torch.float16")]

    def __getitem__(self, name: str) -> _Deferred:
        return _Deferred(self.tensors[name], name in self.widened)

    def __iter__(self):
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)


def _gradient(param):
    main = getattr(param, "main_grad", None)
    return main if main is not None else param.grad


def parallel_ranks(args=None, *, tp_rank=None, tp_size=None, pp_rank=None, pp_size=None, swiglu=None) -> dict:
    """This process's shard: ``tp_rank``, ``tp_size``, ``pp_rank``, ``pp_size``, ``swiglu``; {} on a TP=1, PP=1 run.

    Explicit keywords win over ``args`` (a Megatron args Namespace); ranks not given are asked of
    ``megatron.core.parallel_state``.
    """
    if args is not None:
        tp_size = tp_size if tp_size is not None else getattr(args, "tensor_model_parallel_size", None)
        pp_size = pp_size if pp_size is not None else getattr(args, "pipeline_model_parallel_size", None)
        swiglu = swiglu if swiglu is not None else bool(getattr(args, "swiglu", False))
    tp_size, pp_size = int(tp_size or 1), int(pp_size or 1)
    if tp_size == 1 and pp_size == 1 and not tp_rank and not pp_rank:
        return {}
    tp_rank = _rank(tp_rank, tp_size, "get_tensor_model_parallel_rank")
    pp_rank = _rank(pp_rank, pp_size, "get_pipeline_model_parallel_rank")
    if swiglu is None and tp_size > 1:
        raise ValueError("grad capture: on a tensor-parallel rank pass swiglu= (Megatron's --swiglu) or args=: "
                         "linear_fc1's shards merge differently with it")
    for name, rank, size in (("tp", tp_rank, tp_size), ("pp", pp_rank, pp_size)):
        if not 0 <= rank < size:
            raise ValueError(f"grad capture: {name}_rank {rank} is outside 0..{size - 1}")
    return {"tp_rank": tp_rank, "tp_size": tp_size, "pp_rank": pp_rank, "pp_size": pp_size, "swiglu": bool(swiglu)}


def _rank(rank, size: int, getter: str) -> int:
    if rank is not None:
        return int(rank)
    if size == 1:
        return 0
    try:
        from megatron.core import parallel_state
    except ImportError:
        raise ValueError(f"grad capture: a parallel size of {size} and no rank given, and megatron.core is not "
                         "importable: pass tp_rank= and pp_rank=") from None
    return int(getattr(parallel_state, getter)())


def _write(root, iteration: int, kind: str, tensors: Mapping, meta: dict, ranks: dict) -> Path:
    tensors = _AsFp32(tensors)
    if tensors.widened:
        meta = {**meta, "widened_to_fp32": tensors.widened}
    rank = (ranks["tp_rank"], ranks["pp_rank"]) if ranks else None
    return save_step_tensors(root, iteration, kind, tensors, {**meta, **ranks}, rank=rank)


def _report(what: str, names: list[str], iteration: int) -> None:
    if names:
        warnings.warn(f"grad capture, update {iteration}: {len(names)} trainable parameter(s) without {what} "
                      f"(not written, listed in the manifest): {', '.join(names[:5])}", GradCaptureWarning, stacklevel=3)


def _base_meta(iteration: int, loss_scale, grad_norm, clip_coeff) -> dict:
    meta = {"iteration": iteration, "side": SIDE}
    for key, value in (("loss_scale", loss_scale), ("grad_norm", grad_norm), ("clip_coeff", clip_coeff)):
        if value is not None:
            meta[key] = float(value)
    return meta


def capture_gradients(model, root: Path | str, iteration: int, optimizer=None, *, params: bool = False,
                      loss_scale=None, grad_norm=None, clip_coeff=None, **parallel) -> dict[str, Path]:
    """Write update ``iteration``'s gradients (and, with ``params``, the weights before the step).

    Call after backward (and Megatron's DP reduce, done inside ``forward_backward_func``), before
    ``optimizer.step()``. ``parallel``: ``args=`` or ``tp_rank``, ``tp_size``, ``pp_rank``, ``pp_size``,
    ``swiglu`` (:func:`parallel_ranks`). Returns kind → folder written.
    """
    ranks = parallel_ranks(**parallel)
    named = trainable_parameters(model)
    masters = _masters(named, optimizer) if optimizer is not None else named
    meta = _base_meta(iteration, loss_scale, grad_norm, clip_coeff)
    if optimizer is not None:
        meta.update(_group_meta(masters, optimizer))
    grads, missing = {}, []
    for name, param in named.items():
        grad = _gradient(param)
        if grad is None:
            missing.append(name)
        else:
            grads[name] = grad
    _report("a gradient", missing, iteration)
    written = {"grads": _write(root, iteration, "grads", grads, {**meta, "no_grad": missing}, ranks)}
    if params:
        written["params_before"] = _write(root, iteration, "params_before", masters, meta, ranks)
    return written


def _adam_state(masters: Mapping[str, object], optimizer) -> tuple[dict, dict, list[str], int | None]:
    """(exp_avg, exp_avg_sq, names without state, Adam's step count) from the torch optimizer's state."""
    state = _inner(optimizer).state
    first, second, missing, steps = {}, {}, [], set()
    for name, tensor in masters.items():
        entry = state.get(tensor, {})
        if "exp_avg" not in entry or "exp_avg_sq" not in entry:
            missing.append(name)
            continue
        first[name], second[name] = entry["exp_avg"], entry["exp_avg_sq"]
        if "step" in entry:
            steps.add(int(float(entry["step"])))
    if len(steps) > 1:
        raise ValueError(f"grad capture: Adam step counts differ across parameters: {sorted(steps)[:5]}")
    return first, second, missing, (steps.pop() if steps else None)


def capture_after_step(model, optimizer, root: Path | str, iteration: int, *, loss_scale=None, grad_norm=None,
                       clip_coeff=None, clip_grad: float | None = None, **parallel) -> dict[str, Path]:
    """Write the weights after the step (``params_after``) and Adam's moments (``exp_avg``, ``exp_avg_sq``).

    ``clip_grad`` (Megatron's ``--clip-grad``) with ``grad_norm`` gives ``clip_coeff`` as Megatron
    computes it: ``clip_grad / (grad_norm + 1e-6)``, applied only below 1 (recorded as 1.0 otherwise).
    ``parallel`` as for :func:`capture_gradients`.
    """
    ranks = parallel_ranks(**parallel)
    if clip_coeff is None and clip_grad and grad_norm is not None:
        clip_coeff = min(1.0, float(clip_grad) / (float(grad_norm) + 1.0e-6))
    masters = _masters(trainable_parameters(model), optimizer)
    meta = {**_base_meta(iteration, loss_scale, grad_norm, clip_coeff), **_group_meta(masters, optimizer)}
    written = {"params_after": _write(root, iteration, "params_after", masters, meta, ranks)}
    first, second, missing, step = _adam_state(masters, optimizer)
    _report("Adam state", missing, iteration)
    state_meta = {**meta, "no_state": missing, **({"optimizer_step": step} if step is not None else {})}
    for kind, tensors in (("exp_avg", first), ("exp_avg_sq", second)):
        written[kind] = _write(root, iteration, kind, tensors, state_meta, ranks)
    return written
