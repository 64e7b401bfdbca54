"""REAL dumps of the two reference models for the dump-comparison tests (import as ``dump_pairs``).

The torch (Megatron-style) and MindSpore (MindFormers-style) reference models get identical weights
(the torch model's state dict converted to MindFormers names through the spec) and the same tokens;
then, each in its own process (msprobe patches the framework's APIs process-wide and its debugger is
a singleton; MindSpore reads ``MINDSPORE_DUMP_CONFIG`` once):

- :func:`msprobe_pairs`: mindstudio-probe dumps (``PrecisionDebugger``; task statistics or tensor, level
  mix/L1/L0, one forward step: loss included) of the torch model and of the MindSpore model, clean and
  with each planted fault of ``FAULTS`` (``ms_model.PlantedFaults``). MindSpore runs in PyNative mode,
  as msprobe's API dump needs; on CPU msprobe's statistics call ``mint.norm``, which has no CPU kernel,
  so the worker gives msprobe's processor a ``norm`` computed as sqrt(sum(x*x)) in fp32 (the only change).
  ``backward=True`` adds the backward rows (MindSpore then takes ~20 s instead of ~4 s).
- :func:`graph_dump_pair`: a MindSpore Dump of the MindSpore model in graph mode (``saved_data: tensor``:
  one ``.npy`` per op, input and output; CPU refuses ``statistic``) beside an msprobe tensor dump of the
  torch model.
- :func:`logits_pair`: fp32 logits ``[tokens, vocab]`` of both models as ``.npy``; the MindSpore side
  reads one different token id at ``LOGITS_FAULT_TOKEN`` (a tokenizer-style fault): logits agree before
  that token and differ from it on.

Each result is generated once per folder (a ``.complete`` marker; generation goes to a ``_partial``
folder renamed at the end): session fixtures pass :func:`session_folder` and every test file of the
session shares the dumps.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIG_FIELDS = dict(num_layers=2, hidden_size=32, num_attention_heads=4, num_kv_heads=2, ffn_hidden_size=64,
                     vocab_size=64, seq_length=8)
SEED = 11
FAULTS = {"softmax_fp16": {"softmax_fp16_layer": 1}, "norm_epsilon": {"norm_epsilon_layer": 0}}
FAULT_LAYER = {"softmax_fp16": 1, "norm_epsilon": 0}
LOGITS_FAULT_TOKEN = 5
WORKER_TIMEOUT_S = 300


@dataclass(frozen=True)
class DumpPair:
    """The torch side (reference) and the MindSpore side (candidate) of one comparison."""

    torch: Path
    mindspore: Path


def model_config():
    from workbench.reference.config import ModelConfig
    return ModelConfig(**CONFIG_FIELDS)


def input_ids() -> np.ndarray:
    """[1, seq + 1] int64: MindFormers' ``input_ids``; torch reads tokens = ids[:, :-1], labels = ids[:, 1:]."""
    return np.random.default_rng(SEED).integers(0, CONFIG_FIELDS["vocab_size"], (1, CONFIG_FIELDS["seq_length"] + 1))


def session_folder(tmp_path_factory) -> Path:
    """The one folder of this test session's dumps (session fixtures of every test file share it)."""
    folder = tmp_path_factory.getbasetemp() / "dump_pairs"
    folder.mkdir(exist_ok=True)
    return folder


def dump_json(root: Path) -> Path:
    """The one ``dump.json`` msprobe wrote under ``root`` (``step0/proc*/`` or ``step0/rank*/``)."""
    found = sorted(Path(root).glob("step*/*/dump.json"))
    if len(found) != 1:
        raise AssertionError(f"expected one dump.json under {root}, found {found}")
    return found[0]


# ---------------------------------------------------------------- weights and inputs -----------------

def prepare(folder: Path) -> Path:
    """``inputs.npz``: the Megatron weights of the torch model, the same converted to MindFormers names
    through the spec (``mf.`` prefix), and ``input_ids``. Written once per folder."""
    path = Path(folder) / "inputs.npz"
    if path.exists():
        return path
    import torch  # noqa: F401  (the Megatron side)

    from workbench import spec
    from workbench.reference import torch_model
    from workbench.reference.config import PrecisionConfig
    from workbench.tensors.base import TensorMeta

    config = model_config()
    model = torch_model.build_model(config, PrecisionConfig(), seed=SEED)
    weights = {name: tensor.detach().numpy().copy() for name, tensor in model.state_dict().items()}
    arch = spec.load_arch("llama")
    metas = {name: TensorMeta(name, tuple(array.shape), "fp32") for name, array in weights.items()}
    params = spec.infer_params(metas, "megatron", arch, {"num_heads": config.num_attention_heads})
    plan = spec.build_plan(metas, "megatron", "mindformers", arch, params)
    converted = {f"mf.{step.target.name}": spec.materialize(step, weights.__getitem__) for step in plan.steps}
    partial = path.with_name("inputs.partial.npz")
    np.savez(partial, input_ids=input_ids(), **{f"mg.{k}": v for k, v in weights.items()}, **converted)
    partial.replace(path)
    return path


def load_inputs(path: Path) -> tuple[np.ndarray, dict, dict]:
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    side = {prefix: {k[3:]: v for k, v in arrays.items() if k.startswith(prefix + ".")} for prefix in ("mg", "mf")}
    return arrays["input_ids"], side["mg"], side["mf"]


# ---------------------------------------------------------------- generation ------------------------

def _job(kind: str, out: Path, inputs: Path, **options) -> tuple[Path, list[str]]:
    return out, [sys.executable, __file__, kind, str(out), str(inputs), json.dumps(options)]


def _run(jobs: list[tuple[Path, list[str]]]) -> None:
    """Runs the workers not yet complete, all at once; each writes ``out_partial`` renamed to ``out``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    running = []
    for out, command in jobs:
        if (out / ".complete").exists():
            continue
        partial = out.with_name(out.name + "_partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        command = command[:3] + [str(partial)] + command[4:]
        log = open(partial.parent / f"{out.name}.log", "w")  # noqa: SIM115  (closed below)
        running.append((out, partial, log, subprocess.Popen(command, cwd=partial, env=env, stdout=log,
                                                            stderr=subprocess.STDOUT)))
    failures = []
    for out, partial, log, process in running:
        try:
            code = process.wait(timeout=WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        log.close()
        if code:
            tail = Path(log.name).read_text(errors="replace")[-3000:]
            failures.append(f"{out.name}: exit {code}\n{tail}")
            continue
        (partial / ".complete").write_text("")
        shutil.rmtree(out, ignore_errors=True)
        partial.rename(out)
    if failures:
        raise RuntimeError("dump generation failed:\n" + "\n".join(failures))


def msprobe_pairs(folder: Path, task: str = "statistics", level: str = "mix", backward: bool = False,
                  faults: tuple[str, ...] = tuple(FAULTS)) -> dict[str, DumpPair]:
    """``{"clean": pair, fault: pair, ...}``; one torch dump serves every pair (torch has no fault)."""
    folder = Path(folder) / f"msprobe_{task}_{level}{'_backward' if backward else ''}"
    folder.mkdir(parents=True, exist_ok=True)
    inputs = prepare(folder.parent)
    options = {"task": task, "level": level, "backward": backward}
    jobs = [_job("msprobe_torch", folder / "torch", inputs, **options)]
    jobs += [_job("msprobe_mindspore", folder / f"mindspore_{name}", inputs, **options, faults=FAULTS.get(name, {}))
             for name in ("clean", *faults)]
    _run(jobs)
    return {name: DumpPair(folder / "torch", folder / f"mindspore_{name}") for name in ("clean", *faults)}


def graph_dump_pair(folder: Path, fault: str | None = None) -> DumpPair:
    """MindSpore graph-mode tensor dump (``rank_0/<net>/0/0/*.npy``) and msprobe torch tensor dump (mix)."""
    folder = Path(folder) / "graph_dump"
    folder.mkdir(parents=True, exist_ok=True)
    inputs = prepare(folder.parent)
    name = fault or "clean"
    _run([_job("msprobe_torch", folder / "torch", inputs, task="tensor", level="mix", backward=False),
          _job("graph_mindspore", folder / f"mindspore_{name}", inputs, faults=FAULTS.get(name, {}))])
    return DumpPair(folder / "torch", folder / f"mindspore_{name}")


def logits_pair(folder: Path) -> DumpPair:
    """``torch/logits.npy`` and ``mindspore/logits.npy`` (fp32 ``[tokens, vocab]``); the MindSpore side's
    input differs at ``LOGITS_FAULT_TOKEN`` only."""
    folder = Path(folder) / "logits"
    pair = DumpPair(folder / "torch" / "logits.npy", folder / "mindspore" / "logits.npy")
    if pair.torch.exists() and pair.mindspore.exists():
        return pair
    ids, megatron, mindformers = load_inputs(prepare(folder.parent))
    pair.torch.parent.mkdir(parents=True, exist_ok=True)
    pair.mindspore.parent.mkdir(parents=True, exist_ok=True)
    tokens = ids[:, :-1]
    faulty = tokens.copy()
    faulty[0, LOGITS_FAULT_TOKEN] = (faulty[0, LOGITS_FAULT_TOKEN] + 1) % CONFIG_FIELDS["vocab_size"]
    np.save(pair.torch, _torch_model(megatron)(_torch_tensor(tokens)).detach().numpy()[0])
    np.save(pair.mindspore, _mindspore_logits(mindformers, faulty))
    return pair


# ---------------------------------------------------------------- the models (also in workers) ------

def _torch_tensor(array):
    import torch
    return torch.from_numpy(np.ascontiguousarray(array)).long()


def _torch_model(megatron: dict):
    import torch

    from workbench.reference import torch_model
    from workbench.reference.config import PrecisionConfig
    model = torch_model.build_model(model_config(), PrecisionConfig(), seed=SEED)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in megatron.items()})
    return model


def _mindspore_model(mindformers: dict, faults: dict | None = None):
    from workbench.reference import ms_model
    from workbench.reference.config import PrecisionConfig
    net = ms_model.build_model(model_config(), PrecisionConfig(), seed=SEED,
                               faults=ms_model.PlantedFaults(**(faults or {})))
    ms_model.set_weights(net, mindformers)
    return net


def _mindspore_logits(mindformers: dict, tokens: np.ndarray) -> np.ndarray:
    import mindspore as ms
    return _mindspore_model(mindformers).logits(ms.Tensor(tokens.astype(np.int32))).asnumpy()[0]


def _worker_msprobe_torch(out: Path, inputs: Path, task: str, level: str, backward: bool) -> None:
    from workbench.demo.msprobe_dump import dump_torch
    ids, megatron, _ = load_inputs(inputs)
    dump_torch(_torch_model(megatron), ids[:, :-1], ids[:, 1:], out, task, level, backward)


def _worker_msprobe_mindspore(out: Path, inputs: Path, task: str, level: str, backward: bool, faults: dict) -> None:
    import mindspore as ms
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    from workbench.demo.msprobe_dump import dump_mindspore
    ids, _, mindformers = load_inputs(inputs)
    dump_mindspore(_mindspore_model(mindformers, faults), ids, out, task, level, backward)


def _worker_graph_mindspore(out: Path, inputs: Path, faults: dict) -> None:
    config = out.parent / f"{out.name}.dump.json"
    config.write_text(json.dumps({
        "common_dump_settings": {"op_debug_mode": 0, "dump_mode": 0, "path": str(out), "net_name": "LlamaForCausalLM",
                                 "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
                                 "support_device": [0, 1, 2, 3, 4, 5, 6, 7]},
        "e2e_dump_settings": {"enable": True, "trans_flag": True}}))
    os.environ["MINDSPORE_DUMP_CONFIG"] = str(config)
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ids, _, mindformers = load_inputs(inputs)
    _mindspore_model(mindformers, faults)(ms.Tensor(ids.astype(np.int32)))


WORKERS = {"msprobe_torch": _worker_msprobe_torch, "msprobe_mindspore": _worker_msprobe_mindspore,
           "graph_mindspore": _worker_graph_mindspore}

if __name__ == "__main__":
    kind, out_dir, inputs_path, options = sys.argv[1:5]
    WORKERS[kind](Path(out_dir), Path(inputs_path), **json.loads(options))
