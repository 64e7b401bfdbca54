"""Cost of ``BatchCapture.record`` per micro-batch, against the compute of one micro-batch.

Records Megatron-shaped micro-batches (torch CPU tensors: tokens/labels int64 [mbs, s], loss_mask
float32, position_ids int64, optionally the bool attention mask [1, 1, s, s]) and prints the median
time per micro-batch and the bytes written. As a yardstick it times, on the same machine, the
forward + backward of ONE transformer-sized MLP block (h=1024, ffn=4096) on the same tokens in torch
(a real micro-batch runs dozens of such blocks plus attention), and prints the GPU time of a whole
micro-batch estimated as 6·N·tokens FLOPs at 400 TFLOP/s (an H100 in bf16 at ~40 % MFU) for
N = 1B and 7B parameters: the capture should be a small fraction of either.

    .venv/bin/python benchmarks/capture_overhead.py [--seq 4096] [--mbs 1] [--runs 20]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.replay.capture import BatchCapture  # noqa: E402


def capture_seconds(torch, root: Path, mbs: int, seq: int, runs: int, mask: bool) -> tuple[float, int]:
    capture = BatchCapture(root, dp_rank=0, dp_world=1, micro_batches=4)
    text = torch.randint(0, 32000, (mbs, seq + 1))
    tokens, labels = text[:, :-1].contiguous(), text[:, 1:].contiguous()
    loss_mask = torch.ones(mbs, seq)
    position_ids = torch.arange(seq).unsqueeze(0).expand(mbs, seq)
    attention_mask = torch.tril(torch.ones(1, 1, seq, seq)) < 0.5 if mask else None
    times = []
    for call in range(runs):
        start = time.perf_counter()
        capture.record(call // 4, tokens, labels, loss_mask, attention_mask, position_ids)
        times.append(time.perf_counter() - start)
    capture.close()
    inodes = {p.stat().st_ino: p.stat().st_size for p in root.rglob("*.npy")}  # hard links count once
    written = sum(inodes.values()) // runs
    return statistics.median(times), written


def block_seconds(torch, mbs: int, seq: int, runs: int) -> float:
    torch.manual_seed(0)
    hidden = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024))
    x = torch.randn(mbs * seq, 1024, requires_grad=True)
    times = []
    for _ in range(max(3, runs // 4)):
        start = time.perf_counter()
        hidden(x).sum().backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--mbs", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    block = block_seconds(torch, args.mbs, args.seq, args.runs)
    print(f"yardstick: one MLP block (h 1024, ffn 4096) forward+backward on {args.mbs}x{args.seq} tokens, "
          f"torch CPU: {1e3 * block:.1f} ms")
    estimates = {size: 6 * size * args.mbs * args.seq / 400e12 for size in (1e9, 7e9)}
    print("estimate: one micro-batch on an H100 (6·N·tokens FLOPs at 400 TFLOP/s): "
          + ", ".join(f"{size / 1e9:.0f}B {1e3 * t:.0f} ms" for size, t in estimates.items()))
    for mask in (False, True):
        root = Path(tempfile.mkdtemp(prefix="capture_overhead."))
        try:
            seconds, written = capture_seconds(torch, root, args.mbs, args.seq, args.runs, mask)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"capture {'with' if mask else 'without'} attention_mask: {1e3 * seconds:.2f} ms per micro-batch, "
              f"{written / 2**20:.2f} MiB written per micro-batch; {seconds / block:.1%} of the one-block yardstick, "
              f"{seconds / estimates[1e9]:.1%} of a 1B and {seconds / estimates[7e9]:.1%} of a 7B micro-batch")


if __name__ == "__main__":
    main()
