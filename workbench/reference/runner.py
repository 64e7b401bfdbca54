"""Train one reference model and write what the real framework would: log, checkpoints, gradients.

    run(RunSpec(side="megatron", model=..., train=..., out=Path("runs/torch"), save=("megatron", "hf")))

``side`` is ``megatron`` (the torch GPT) or ``mindformers`` (the MindSpore Llama). Each side
starts from its own seed-determined weights or from a checkpoint in its own format (converting
one side's weights into the other's is `workbench convert`'s job), and trains on Megatron-shaped
batches: synthetic from a seed, or an .npz both sides read.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from .config import ModelConfig, TrainConfig, synthetic_batches

SIDES = ("megatron", "mindformers")
SAVE_FORMATS = {"megatron": ("megatron", "hf"), "mindformers": ("mindspore",)}


@dataclass(frozen=True)
class RunSpec:
    side: str
    model: ModelConfig
    train: TrainConfig
    out: Path
    batches: Path | None = None         # .npz with tokens/labels/loss_mask [steps, b, s]; None: synthetic
    micro_batch_size: int = 2
    data_seed: int = 0
    init: Path | None = None             # megatron: legacy checkpoint (TP/PP shards merged); mindformers: .ckpt
    save: tuple[str, ...] = ()
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    grads: bool = False
    qkv_concat: bool = False
    jit: bool = True
    fault: str | None = None             # mindformers: a fault of datasets/demo_faults.yaml planted in code
    inject: Path | None = None           # mindformers: a gradient capture whose update-1 gradients replace the
                                         # run's own in update 1 (the method's step-2 optimizer check)
    inject_config: Path | None = None    # the yaml/script giving the model sizes the capture's names need


@dataclass
class RunResult:
    log: Path | None                     # None: --steps 0 (no training, no log)
    losses: list[float]
    lrs: list[float]
    grad_norms: list[float]
    checkpoints: list[Path] = field(default_factory=list)
    grads_dir: Path | None = None


def load_batches(path: Path, steps: int) -> list[dict[str, np.ndarray]]:
    """Megatron batches from an .npz of ``tokens``, ``labels``, ``loss_mask`` shaped [steps, b, s]."""
    from ..replay.npy_files import load_npz

    arrays = load_npz(path, BATCH_KEYS, "write tokens, labels and loss_mask with np.savez")
    if arrays["tokens"].ndim != 3:
        raise InputError(f"{path} [tokens]", f"tokens shape {list(arrays['tokens'].shape)}, expected [steps, b, s]",
                         "write tokens, labels and loss_mask shaped [steps, b, s]")
    for key, array in arrays.items():
        if array.shape != arrays["tokens"].shape:
            raise InputError(f"{path} [{key}]", f"{key} shape {list(array.shape)} disagrees with tokens shape "
                             f"{list(arrays['tokens'].shape)}; all three are [steps, b, s]",
                             "write tokens, labels and loss_mask of one shape")
    if len(arrays["tokens"]) < steps:
        raise InputError(str(path), f"{len(arrays['tokens'])} batches for {steps} steps", "write more or train fewer steps")
    return [{key: array[step] for key, array in arrays.items()} for step in range(steps)]


BATCH_KEYS = ("tokens", "labels", "loss_mask")


def save_batches(path: Path, batches: list[dict[str, np.ndarray]]) -> None:
    from ..fileio import atomic_file

    with atomic_file(path) as handle:
        np.savez(handle, **{key: np.stack([batch[key] for batch in batches]) for key in ("tokens", "labels", "loss_mask")})


def _check(spec: RunSpec) -> None:
    if spec.side not in SIDES:
        raise InputError("--side", f"expected one of {SIDES}, found {spec.side!r}", "choose megatron or mindformers")
    wrong = [fmt for fmt in spec.save if fmt not in SAVE_FORMATS[spec.side]]
    if wrong:
        raise InputError("--save", f"{wrong} cannot be written by the {spec.side} side",
                         f"use {', '.join(SAVE_FORMATS[spec.side])}")
    if spec.fault is not None:
        from ..demo.faults import code_fault

        code_fault(spec.fault, spec.side)           # unknown name, torch side, or a file-planted kind: refused
    if spec.train.steps == 0 and not spec.save:
        raise InputError("--steps", "--steps 0 trains nothing and, without --save, writes nothing",
                         "add --save to write the initial weights")
    if spec.inject is not None and spec.side != "mindformers":
        raise InputError("--inject-grads", "only the MindSpore side takes injected gradients",
                         "inject into --side mindformers")
    if spec.init is not None and spec.side == "mindformers":
        from ..tensors.mindspore_ckpt_read import MindSporeCkptSource

        with MindSporeCkptSource(spec.init):       # every record checked against the file: truncated -> InputError
            pass


def run(spec: RunSpec) -> RunResult:
    """Train ``spec.train.steps`` updates and write ``out/train.log`` (+ checkpoints, grads).

    The whole folder is written in a staging folder beside ``out`` and renamed into place at the end
    (replacing an existing ``out``): an interrupted or failed run leaves nothing that looks complete.
    """
    from dataclasses import replace

    from ..convert.staging import Staging

    _check(spec)
    steps = spec.train.steps
    batches = (load_batches(spec.batches, steps) if spec.batches else       # bad batches: nothing is created
               synthetic_batches(spec.model, steps, spec.micro_batch_size, spec.data_seed))
    with Staging(spec.out) as staging:
        staging.path.mkdir()
        result = _train(replace(spec, out=staging.path), batches)
        staging.publish([])

    def moved(path: Path | None) -> Path | None:
        return None if path is None else spec.out / path.relative_to(staging.path)

    return RunResult(moved(result.log), result.losses, result.lrs, result.grad_norms,
                     [moved(path) for path in result.checkpoints], moved(result.grads_dir))


def _train(spec: RunSpec, batches: list[dict[str, np.ndarray]]) -> RunResult:
    """``spec.train.steps`` updates (none: the initial weights are saved as they are, and no log is written)."""
    steps = spec.train.steps
    grads_dir = spec.out / "grads" if spec.grads and steps else None
    log = spec.out / "train.log" if steps else None
    make_trainer, net = (_megatron_trainer if spec.side == "megatron" else _mindformers_trainer)(spec)
    extra = {"injected": {1: _injected_gradients(spec)}} if spec.inject is not None and steps else {}
    results = make_trainer().train(steps, batches, log_path=log, grads_dir=grads_dir, **extra) if steps else []
    norms = [getattr(result, "grad_norm", None) or getattr(result, "global_norm", 0.0) for result in results]
    checkpoints = _save(spec, net)
    return RunResult(log, [r.loss for r in results], [r.lr for r in results], norms, checkpoints, grads_dir)


def _megatron_trainer(spec: RunSpec):
    """(a function making the trainer, the network with its initial weights)."""
    from . import torch_model, torch_train

    net = torch_model.build_model(spec.model, spec.train.precision, seed=spec.train.seed)
    if spec.init is not None:
        with _fitting(spec.init):
            torch_train.load_numpy_weights(net, megatron_checkpoint_weights(spec.init))
    return lambda: torch_train.MegatronStyleTrainer(net, spec.train), net


@contextmanager
def _fitting(path: Path):
    """A checkpoint whose names or shapes are not the model's is bad input (e.g. another size, a padded vocabulary)."""
    try:
        yield
    except (KeyError, ValueError) as error:
        raise InputError(str(path), f"does not fit the model ({str(error).strip(chr(39))})",
                         "pass --config with the model the checkpoint was written for") from None


def megatron_checkpoint_weights(path: Path) -> dict[str, np.ndarray]:
    """Full tensors of a Megatron legacy checkpoint (TP/PP shards merged by MegatronLegacySource), as fp32."""
    from ..tensors.base import cast
    from ..tensors.megatron_legacy import MegatronLegacySource

    with MegatronLegacySource(path) as source:
        return {name: cast(np.asarray(source.read(name)), meta.dtype, "fp32")
                for name, meta in source.metas().items()}


def _mindformers_trainer(spec: RunSpec):
    """(a function making the trainer, the network with its initial weights), the --fault planted."""
    from . import ms_model, ms_train

    model, train, faults, optimizer_faults = spec.model, spec.train, ms_model.NO_FAULTS, ms_train.NO_OPTIMIZER_FAULTS
    if spec.fault is not None:
        from ..demo.faults import code_fault, plant_in_code

        model, train, faults, optimizer_faults = plant_in_code(code_fault(spec.fault, spec.side), model, train)
    net = ms_model.build_model(model, train.precision, seed=train.seed, qkv_concat=spec.qkv_concat, faults=faults)
    if spec.init is not None:
        with _fitting(spec.init):
            ms_model.set_weights(net, mindspore_checkpoint_weights(spec.init))
    return lambda: ms_train.MindFormersStyleTrainer(net, train, jit=spec.jit, faults=optimizer_faults), net


def _injected_gradients(spec: RunSpec) -> dict[str, np.ndarray]:
    """Update 1's gradients of the capture ``spec.inject`` under MindFormers names, unscaled by its loss scale."""
    from ..grads.captured import GRADS, open_captured_step

    with open_captured_step(spec.inject, 1, config=spec.inject_config, kinds=()) as captured:
        scale = np.float32(captured.loss_scale)
        return {name: captured.read(GRADS, name) / scale for name in captured.names}


def mindspore_checkpoint_weights(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a MindSpore ``.ckpt`` (already checked by the workbench's reader in :func:`_check`)."""
    return {name: value.asnumpy() for name, value in load_mindspore_checkpoint(path).items()}


def load_mindspore_checkpoint(path: Path) -> dict:
    """``mindspore.load_checkpoint`` (name -> Parameter) with its failures as one-line InputErrors; check the
    file with the workbench's reader first (``MindSporeCkptSource``): this one trusts the record sizes."""
    import mindspore as ms

    try:
        return ms.load_checkpoint(str(path))
    except (ValueError, RuntimeError, TypeError, OSError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(str(path), f"MindSpore cannot load this checkpoint ({first})",
                         "pass a .ckpt written by mindspore.save_checkpoint") from None


def _save(spec: RunSpec, net) -> list[Path]:
    written: list[Path] = []
    if "megatron" in spec.save:
        from .megatron_io import save_megatron_legacy

        written += save_megatron_legacy(net.state_dict(), spec.model, spec.out / "megatron_checkpoint",
                                        iteration=spec.train.steps, tensor_parallel=spec.tensor_parallel,
                                        pipeline_parallel=spec.pipeline_parallel)
    if "hf" in spec.save:
        from .hf_io import save_hf_safetensors

        written += save_hf_safetensors(net.state_dict(), spec.model, spec.out / "hf")
    if "mindspore" in spec.save:
        import mindspore as ms

        from ..fileio import atomic_path

        target = spec.out / "mindspore.ckpt"
        with atomic_path(target, suffix=".part.ckpt") as temporary:   # save_checkpoint appends .ckpt otherwise
            ms.save_checkpoint(net, str(temporary))
        written.append(target)
    return written
