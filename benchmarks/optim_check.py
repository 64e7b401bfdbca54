"""`workbench optim-check` wall time and peak RSS on a synthetic ~250 M-parameter capture.

The capture is written once (Megatron names of a Llama: 16 layers, hidden 1024, GQA 16/8 heads, ffn 2816,
vocab 32000 = 253 M parameters, fp32): per tensor, random weights and gradients and one torch AdamW step
(Megatron grouping, clipping off) give grads, params_before, params_after, exp_avg, exp_avg_sq (5 GiB).
Then, each in its own process (peak RSS via wait4):
  imports only              python -c "import workbench.grads.optim_result, mindspore"   (the fixed cost)
  load the capture          every tensor of the five kinds in memory at once              (what "the model" costs)
  optim-check, clean        the configured optimizer applied and compared: PASS
  optim-check, lr off 10 %  the same plus the diagnosis pass (every hypothesis scored)   (--skip-fault to leave out)
Target: memory near one parameter's working set, not the model: peak RSS - fixed cost compared with the
largest tensor x 5 kinds (one tensor of each kind) and with the whole capture.

    .venv/bin/python benchmarks/optim_check.py [--workdir DIR] [--layers 16] [--keep] [--skip-fault]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("grads", "params_before", "params_after", "exp_avg", "exp_avg_sq")
LOAD_ALL = """
import sys, glob, numpy as np
arrays = [np.load(path) for path in sorted(glob.glob(sys.argv[1] + "/step_1/*/*.npy"))]   # everything at once
print(sum(a.nbytes for a in arrays))
"""
YAML = """model:
  model_config:
    type: LlamaConfig
    num_layers: {layers}
    hidden_size: {hidden}
    num_heads: {heads}
    n_kv_heads: {kv}
    intermediate_size: {ffn}
    vocab_size: {vocab}
    seq_length: 2048
lr_schedule:
  type: ConstantWarmUpLR
  learning_rate: {lr}
  warmup_steps: 0
  total_steps: -1
optimizer:
  type: AdamW
  betas: [0.9, 0.95]
  eps: 1.0e-8
  weight_decay: 0.1
runner_wrapper:
  type: MFTrainOneStepCell
  use_clip_grad: False
"""


def megatron_shapes(layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int) -> dict[str, tuple]:
    head_dim = hidden // heads
    shapes = {"embedding.word_embeddings.weight": (vocab, hidden)}
    for i in range(layers):
        prefix = f"decoder.layers.{i}."
        shapes.update({prefix + "input_layernorm.weight": (hidden,),
                       prefix + "self_attention.linear_qkv.weight": ((heads + 2 * kv) * head_dim, hidden),
                       prefix + "self_attention.linear_proj.weight": (hidden, hidden),
                       prefix + "pre_mlp_layernorm.weight": (hidden,),
                       prefix + "mlp.linear_fc1.weight": (2 * ffn, hidden),
                       prefix + "mlp.linear_fc2.weight": (hidden, ffn)})
    shapes.update({"decoder.final_layernorm.weight": (hidden,), "output_layer.weight": (vocab, hidden)})
    return shapes


class OneStep(Mapping):
    """Tensors of one kind, each computed when asked for (one torch AdamW step of one parameter)."""

    def __init__(self, shapes: dict[str, tuple], kind: str, lr: float):
        self.shapes, self.kind, self.lr = shapes, kind, lr

    def __iter__(self):
        return iter(self.shapes)

    def __len__(self):
        return len(self.shapes)

    def __getitem__(self, name: str) -> np.ndarray:
        import torch

        index = list(self.shapes).index(name)
        rng = np.random.default_rng(index)
        shape = self.shapes[name]
        p0 = (rng.standard_normal(shape, dtype=np.float32) * 0.02 + (1.0 if len(shape) == 1 else 0.0))
        grad = rng.standard_normal(shape, dtype=np.float32) * 1e-3
        if self.kind == "params_before":
            return p0
        if self.kind == "grads":
            return grad
        param = torch.nn.Parameter(torch.from_numpy(p0))
        optimizer = torch.optim.AdamW([param], lr=self.lr, betas=(0.9, 0.95), eps=1e-8,
                                      weight_decay=0.1 if len(shape) > 1 else 0.0, foreach=False)
        param.grad = torch.from_numpy(grad)
        optimizer.step()
        if self.kind == "params_after":
            return param.detach().numpy()
        return optimizer.state[param][self.kind].numpy()


def write_capture(root: Path, shapes: dict[str, tuple], lr: float) -> None:
    from workbench.replay.step_store import save_step_tensors

    for kind in KINDS:
        save_step_tensors(root, 1, kind, OneStep(shapes, kind, lr), {"iteration": 1, "lr": lr, "side": "megatron",
                                                                      "loss_scale": 1.0})


def measure(command: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one child process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"failed: {' '.join(command)}\n{process.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--skip-fault", action="store_true", help="leave out the run with a diagnosis")
    args = parser.parse_args()
    sizes = dict(layers=args.layers, hidden=1024, heads=16, kv=8, ffn=2816, vocab=32000)
    shapes = megatron_shapes(**sizes)
    numel = sum(int(np.prod(s)) for s in shapes.values())
    largest = max(int(np.prod(s)) for s in shapes.values()) * 4 / 2**20
    work = args.workdir or Path(tempfile.mkdtemp(prefix="wb-optim-bench-"))
    capture, python = work / "capture", sys.executable
    try:
        start = time.perf_counter()
        write_capture(capture, shapes, lr=1e-3)
        print(f"synthetic capture: {numel / 1e6:.0f} M parameters, 5 kinds = {5 * numel * 4 / 2**30:.2f} GiB, "
              f"largest tensor {largest:.0f} MiB (written in {time.perf_counter() - start:.0f} s)")
        yamls = {}
        for name, lr in (("clean", 1e-3), ("lr_off", 1.1e-3)):
            yamls[name] = work / f"{name}.yaml"
            yamls[name].write_text(YAML.format(lr=lr, **sizes))
        runs = {"imports only": ([python, "-c", "import workbench.grads.optim_result, mindspore"], (0,)),
                "load the capture": ([python, "-c", LOAD_ALL, str(capture)], (0,)),
                "optim-check, clean": (_check(python, capture, yamls["clean"], work), (0,))}
        if not args.skip_fault:
            runs["optim-check, lr off 10 %"] = (_check(python, capture, yamls["lr_off"], work), (1,))
        results = {name: measure(command, ok) for name, (command, ok) in runs.items()}
        fixed, capture_mib = results["imports only"][1], 5 * numel * 4 / 2**20
        for name, (seconds, rss) in results.items():
            extra = "" if name in ("imports only", "load the capture") else (
                f"  = imports + {rss - fixed:.0f} MiB: {(rss - fixed) / largest:.2f}x the largest tensor, "
                f"{(rss - fixed) / capture_mib:.1%} of the capture")
            print(f"  {name:26s} {seconds:7.1f} s  peak RSS {rss:7.0f} MiB{extra}")
        clean_seconds = results["optim-check, clean"][0]
        print(f"optim-check: {numel / 1e6 / clean_seconds:.1f} M parameters/s; memory beyond the imports stays "
              f"below one tensor of each kind ({5 * largest:.0f} MiB) while the capture is {capture_mib:.0f} MiB")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _check(python: str, capture: Path, yaml_path: Path, work: Path) -> list[str]:
    return [python, "-m", "workbench", "optim-check", "--capture", str(capture), "--mindformers", str(yaml_path),
            "--format", "json", "--out", str(work / f"{yaml_path.stem}.json"), "--force"]


if __name__ == "__main__":
    main()
