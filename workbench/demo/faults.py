"""Planting the catalog's faults (``datasets/demo_faults.yaml``) on the MindSpore side.

    fault = find_fault("gate_up_swapped")
    plant_weights_fault(Path("converted.ckpt"), fault)        # rewrites the .ckpt in place (atomically)
    batches = plant_replay_fault(batches, find_fault("data_off_by_one"))
    model, train, faults, optimizer_faults = plant_in_code(find_fault("norm_epsilon"), model, train)

``model``/``precision``/``optimizer``/``schedule`` faults are bugs in the MindSpore code (the config
the user audits stays aligned): :func:`plant_in_code` returns what the runner builds instead
(``workbench reference train --side mindformers --fault NAME``). ``weights`` and ``replay`` faults are
bugs in the files the migration produced: the converted checkpoint (:func:`plant_weights_fault`,
through MindSpore's own load/save) and the replayed batches (:func:`plant_replay_fault`). A fault
whose plant changes the model's shape (``pad_vocab_rows``) also changes the MindSpore side's config:
:func:`mindspore_model` gives it.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .catalog import CODE_KINDS, Fault, find_fault

GATE_UP = ((".w1.weight", ".w3.weight"),)
"""MindFormers legacy SwiGLU names: w1 = gate, w3 = up (w2 = down); fused: w_gate_hidden rows interleaved."""
VOCAB_ROWS = ("model.tok_embeddings.embedding_weight", "lm_head.weight")


def code_fault(name: str, side: str) -> Fault:
    """The fault ``name`` when ``workbench reference train`` can plant it on ``side``; else one InputError."""
    fault = find_fault(name)
    if side != "mindformers":
        raise InputError("--fault", f"faults are planted on the MindSpore side, not on {side}",
                         "pass --side mindformers (the reference side stays clean)")
    if fault.plant.kind not in CODE_KINDS:
        function = "plant_weights_fault" if fault.plant.kind == "weights" else "plant_replay_fault"
        raise InputError("--fault", f"{name} is a {fault.plant.kind} fault, planted in files, not in the model code",
                         f"plant it with workbench.demo.faults.{function}, then train without --fault")
    return fault


def plant_in_code(fault: Fault, model, train):
    """``(model, train, PlantedFaults, OptimizerFaults)`` the MindSpore runner builds for ``fault``."""
    from ..reference.ms_model import NO_FAULTS, PlantedFaults
    from ..reference.ms_train import NO_OPTIMIZER_FAULTS, OptimizerFaults

    values, kind = dict(fault.plant.values), fault.plant.kind
    planted, optimizer = NO_FAULTS, NO_OPTIMIZER_FAULTS
    if kind == "model":
        planted = PlantedFaults(**values)
        _check_model_fault(fault, planted, model)
    elif kind == "precision":
        if getattr(train.precision, values["knob"]) == values["dtype"]:
            raise InputError("--fault", f"{fault.name} computes {values['knob']} in {values['dtype']}, as the "
                             "config already does: it would change nothing", "use a config that differs")
        train = replace(train, precision=replace(train.precision, **{values["knob"]: values["dtype"]}))
    elif kind == "optimizer":
        optimizer = OptimizerFaults(**values)
    elif kind == "schedule" and train.decay_style != "constant":    # a wrong decay: constant-lr runs unchanged
        train = replace(train, **values)
    return mindspore_model(fault, model), train, planted, optimizer


def _check_model_fault(fault: Fault, planted, model) -> None:
    """A model fault must fit the model and change something."""
    for layer in (planted.softmax_fp16_layer, planted.norm_epsilon_layer):
        if layer is not None and layer >= model.num_layers:
            raise InputError("--fault", f"{fault.name} plants a fault in layer {layer}; the model has "
                             f"{model.num_layers} layers", "use a model with more layers")
    same = [name for name, configured in (("rotary_base", model.rotary_base), ("norm_epsilon", model.norm_epsilon))
            if {"rotary_base": planted.rotary_base, "norm_epsilon": planted.wrong_norm_epsilon
                if planted.norm_epsilon_layer is not None else None}[name] == configured]
    if same:
        raise InputError("--fault", f"{fault.name} uses the model's own {same[0]} ({getattr(model, same[0])}): "
                         "it would change nothing", f"use a model whose {same[0]} differs (datasets/demo_model.yaml)")


def mindspore_model(fault: Fault, model):
    """The MindSpore side's model config under ``fault`` (a padded vocabulary is the only shape change)."""
    rows = fault.plant.values.get("pad_vocab_rows", 0) if fault.plant.kind == "weights" else 0
    return replace(model, vocab_size=model.vocab_size + rows) if rows else model


def plant_weights_fault(ckpt_path: Path | str, fault: Fault, out: Path | str | None = None) -> Path:
    """Rewrite a MindSpore ``.ckpt`` (MindFormers legacy names) with ``fault`` planted; ``out`` (default: in place).

    ``swap_gate_up``: every SwiGLU ``w1`` (gate) and ``w3`` (up) exchanged (fused ``w_gate_hidden``: its
    interleaved rows); ``pad_vocab_rows: N``: N zero rows appended to the embedding and the output layer.
    Read and written by MindSpore's own ``load_checkpoint`` / ``save_checkpoint``; the file is replaced
    atomically, dtypes kept.
    """
    import mindspore as ms

    from ..fileio import atomic_path
    from ..reference.runner import load_mindspore_checkpoint

    if fault.plant.kind != "weights":
        raise ValueError(f"{fault.name} is a {fault.plant.kind} fault, not a weights fault")
    source, target = Path(ckpt_path), Path(out or ckpt_path)
    _checked(source)
    loaded = load_mindspore_checkpoint(source)
    dtypes = {name: param.dtype for name, param in loaded.items()}
    weights = {name: (param.float() if param.dtype == ms.bfloat16 else param).asnumpy() for name, param in loaded.items()}
    planted = _planted_weights(weights, fault.plant.values, source)
    records = [{"name": name, "data": ms.Tensor(value, dtypes[name])} for name, value in planted.items()]
    with atomic_path(target, suffix=".part.ckpt") as temporary:   # save_checkpoint appends .ckpt otherwise
        ms.save_checkpoint(records, str(temporary))
    return target


def _checked(path: Path) -> None:
    """The workbench's own reader checks every record against the file before MindSpore reads it."""
    from ..tensors.mindspore_ckpt_read import MindSporeCkptSource

    with MindSporeCkptSource(path):
        pass


def _planted_weights(weights: dict[str, np.ndarray], values: dict[str, Any], path: Path) -> dict[str, np.ndarray]:
    out = dict(weights)
    if values.get("swap_gate_up"):
        swapped = 0
        for name in weights:
            if name.endswith(".w1.weight") and name[:-len("w1.weight")] + "w3.weight" in weights:
                up = name[:-len("w1.weight")] + "w3.weight"
                out[name], out[up] = weights[up], weights[name]
                swapped += 1
            elif name.endswith(".w_gate_hidden.weight"):
                value = weights[name]
                out[name] = np.stack([value[..., 1::2, :], value[..., 0::2, :]], axis=-2).reshape(value.shape)
                swapped += 1
        if not swapped:
            raise InputError(str(path), "no SwiGLU w1/w3 or w_gate_hidden weights to swap",
                             "pass a MindFormers legacy checkpoint of a SwiGLU model")
    rows = values.get("pad_vocab_rows", 0)
    for name in VOCAB_ROWS if rows else ():
        if name not in weights:
            raise InputError(str(path), f"no {name} to pad", "pass a MindFormers legacy checkpoint")
        value = weights[name]
        out[name] = np.concatenate([value, np.zeros((rows,) + value.shape[1:], value.dtype)])
    return out


def plant_replay_fault(batches: list, fault: Fault) -> list:
    """The batches the MindSpore side replays under ``fault``: ``shift_steps: N`` starts N steps late
    (step k gets batch k + N; the last N steps get the first N batches, so the count is kept)."""
    if fault.plant.kind != "replay":
        raise ValueError(f"{fault.name} is a {fault.plant.kind} fault, not a replay fault")
    shift = fault.plant.values.get("shift_steps", 0) % max(len(batches), 1)
    return list(batches[shift:]) + list(batches[:shift])
