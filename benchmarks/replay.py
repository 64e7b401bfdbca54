"""Capture-store index build time (target: 100k steps x 8 ranks in <= 2 s, no tensor read) and read rate.

1. Builds a capture tree in a temp folder: every ``step_{N}/rank_{R}/`` folder (100k x 8 by
   default), with empty ``{tokens,labels,loss_mask,attention_mask}.npy`` and a stub ``manifest.json``
   in the rank folders of the first --file-steps steps (every step: ``--file-steps 0``; the
   constructor lists only the root and the first step, so files deeper down cannot change its
   time, and 4.8M files take most filesystems the better part of an hour to create and delete),
   plus the workbench layout's marker. Then times ``CaptureStore(path)`` (median of --repeats,
   page cache warm after creation) and checks that the constructor opened no file.
2. Writes a small real capture with ``BatchCapture`` (--read-steps x 8 ranks, mbs 1, seq --seq)
   and times ``store.read`` per micro-batch (plain and with sha256), in global order.
3. Fetch rate of the replayers on that capture, regrouped to one card (D=8 -> D'=1): the
   ``ReplayIndex`` itself, MindSpore ``GeneratorDataset`` (legacy contract) and the torch
   ``DataLoader``, beside the store's plain read rate measured above.

    .venv/bin/python benchmarks/replay.py [--steps 100000] [--ranks 8] [--files 4]
"""
from __future__ import annotations

import argparse
import builtins
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.replay.capture import BatchCapture  # noqa: E402
from workbench.replay.store import CaptureStore  # noqa: E402

TARGET_SECONDS = 2.0
FILES = ("tokens.npy", "labels.npy", "loss_mask.npy", "attention_mask.npy", "manifest.json")


def build_tree(root: Path, steps: int, ranks: int, files: int, file_steps: int) -> float:
    start = time.perf_counter()
    (root / "workbench_capture.json").write_text('{"format": "workbench.capture/1", "dp_world": %d}' % ranks)
    names = FILES[:min(files, 4)] + (("manifest.json",) if files else ())
    for step in range(steps):
        step_dir = root / f"step_{step}"
        step_dir.mkdir()
        for rank in range(ranks):
            rank_dir = step_dir / f"rank_{rank}"
            rank_dir.mkdir()
            for name in names if (not file_steps or step < file_steps) else ():
                handle = os.open(rank_dir / name, os.O_CREAT | os.O_WRONLY, 0o644)
                if name == "manifest.json":  # enough for micro_batches(); the .npy files stay empty
                    os.write(handle, b'{"micro_batches": 1, "files": {}}')
                os.close(handle)
    return time.perf_counter() - start


def time_index(root: Path, repeats: int) -> tuple[float, CaptureStore, int]:
    opened = []
    real_open, real_io_open = builtins.open, io.open

    def spy(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    times = []
    builtins.open = io.open = spy
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            store = CaptureStore(root)
            times.append(time.perf_counter() - start)
    finally:
        builtins.open, io.open = real_open, real_io_open
    return statistics.median(times), store, len([f for f in opened if f.endswith((".npy", ".json"))])


def read_rate(root: Path, steps: int, ranks: int, seq: int) -> None:
    rng = np.random.default_rng(0)
    for rank in range(ranks):
        capture = BatchCapture(root, dp_rank=rank, dp_world=ranks, micro_batches=1)
        for step in range(steps):
            tokens = rng.integers(0, 32000, (1, seq + 1))
            capture.record(step, tokens[:, :-1], tokens[:, 1:], np.ones((1, seq), np.float32),
                           None, np.arange(seq)[None])
    for verify in (False, True):
        store = CaptureStore(root)
        start = time.perf_counter()
        count = 0
        for step in store.steps:
            for rank, micro_batch in store.global_order(step):
                store.read(step, rank, micro_batch, verify=verify)
                count += 1
        elapsed = time.perf_counter() - start
        print(f"read{' (sha256)' if verify else '         '}: {count} micro-batches (mbs 1, seq {seq}, 4 fields) "
              f"in {elapsed:.2f} s = {count / elapsed:,.0f} micro-batches/s, {1e3 * elapsed / count:.3f} ms each")


def replayer_rates(root: Path) -> None:
    """Micro-batches per second through each replayer (D -> one card), beside the store's own reads."""
    from workbench.replay.regroup import ReplayIndex

    def rate(name: str, batches) -> None:
        start, count = time.perf_counter(), 0
        for _ in batches:
            count += 1
        elapsed = time.perf_counter() - start
        print(f"replay {name:34s}: {count} micro-batches (one card, mbs 1) in {elapsed:.2f} s = {count / elapsed:,.0f}/s")

    index = ReplayIndex(root, target_dp=1, target_rank=0)
    rate("ReplayIndex (numpy)", (index[i] for i in range(len(index))))
    try:
        from workbench.replay.mindspore_replay import replay_dataset

        dataset = replay_dataset(root, contract="legacy", dp=1, rank=0)
        rate("MindSpore GeneratorDataset (legacy)", dataset.create_tuple_iterator(output_numpy=True))
    except ImportError as missing:
        print(f"replay MindSpore: skipped ({missing})")
    try:
        from workbench.replay.torch_replay import replay_dataloader

        rate("torch DataLoader", replay_dataloader(root, dp=1, rank=0))
    except ImportError as missing:
        print(f"replay torch: skipped ({missing})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--files", type=int, default=4, help="empty .npy files per rank folder (0-4)")
    parser.add_argument("--file-steps", type=int, default=1000, help="steps whose rank folders get files (0: all)")
    parser.add_argument("--tmp", type=Path, help="parent of the temp folder (e.g. /dev/shm; default: the system's)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--read-steps", type=int, default=250)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--keep", type=Path, help="build the tree here and keep it (default: a temp folder)")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="replay_index.", dir=args.tmp))
    try:
        (root / "tree").mkdir(parents=True)
        built = build_tree(root / "tree", args.steps, args.ranks, args.files, args.file_steps)
        with_files = args.steps if not args.file_steps else min(args.steps, args.file_steps)
        print(f"tree in {root}: {args.steps:,} steps x {args.ranks} rank folders; {args.files + (1 if args.files else 0)}"
              f" files in each rank folder of {with_files:,} steps; created in {built:.1f} s")
        seconds, store, opened = time_index(root / "tree", args.repeats)
        verdict = "OK" if seconds <= TARGET_SECONDS else "TOO SLOW"
        print(f"index: CaptureStore() median {seconds:.3f} s over {args.repeats} runs (target <= {TARGET_SECONDS} s: "
              f"{verdict}); files opened by the constructor: {opened}")
        start = time.perf_counter()
        order = store.global_order(store.steps[0])
        print(f"lazy: {len(store.steps):,} steps, ranks {store.ranks[0]}-{store.ranks[-1]}, layout {store.layout}; "
              f"global_order of the first step ({len(order)} entries) in {1e3 * (time.perf_counter() - start):.2f} ms")
        read_rate(root / "real", args.read_steps, args.ranks, args.seq)
        replayer_rates(root / "real")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
