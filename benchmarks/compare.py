"""Benchmark: `workbench compare` against `msprobe compare` (mindstudio-probe 26.2.0) on msprobe dumps.

Generates, streaming (one entry at a time, never the whole dict), a pair of msprobe ``dump.json`` trees
(``step0/proc0/{dump,stack,construct}.json``) with ``--rows`` tensor rows per side (default 200k): the
golden side with PyTorch naming (``Module.decoder.layers.N.self_attention.linear_qkv.Linear.forward.0``,
``Functional.linear.K.forward``, ``torch.float32``, requires_grad), the target side with MindSpore naming
(``Cell.model.layers.N.attention.wq.Linear.forward.0``, ``Functional.matmul.K.forward``, ``Float32``), each
layer following the call sequence msprobe recorded for the reference models (tests/dump_pairs.py).
Then each tool runs in its own process; wall time and peak RSS (``wait4``, measured by a small process in
between so that this one's size never counts) are printed with the ratios
(targets: workbench ≥ 30× faster, ≤ 1/3 of the memory). Then the same rows split over 8 ranks
(``step0/rank{0..7}``): `workbench compare --workers 1` against `--workers 2` (target ≥ 1.7×).

    python benchmarks/compare.py                      # 200k rows per side
    python benchmarks/compare.py --rows 20000 --skip-msprobe
    python benchmarks/compare.py --skip-msprobe --workers-only --repeat 3 --keep /tmp/bench   # the 1.7x target

Every time is printed with the 1-minute load average when it ended: on a shared machine, ``--workers 2`` can only
show its gain while the second core is free; the CPU seconds printed beside it (the command's and its workers')
do not depend on the other sessions as much: --workers 2's excess over --workers 1 is what the pool costs.
``--keep DIR`` reuses the dumps already generated there. The checkout's bytecode is compiled before the first run
(:func:`compile_checkout`), so that no run measures the compiler.

`workbench compare` is called as ``python -m workbench compare A B``; while that subcommand does not exist
the benchmark says so and measures msprobe alone.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYER_RE = "{L}"

# One decoder layer as msprobe dumped it (tests/dump_pairs.py, level mix, forward): API or module name,
# then the shapes of the tensor inputs and outputs; B/S/H/F/D: batch, sequence, hidden, ffn, head dim.
TORCH_LAYER = """
Tensor.pow BSH>BSH|Tensor.mean BSH>BS1|Tensor.__add__ BS1>BS1|Torch.rsqrt BS1>BS1|Tensor.__mul__ BSH,BS1>BSH
Tensor.__mul__ BSH,H>BSH|Module.decoder.layers.{L}.input_layernorm.RMSNorm.forward.0 BSH>BSH
Functional.linear BSH,QH>BSQ|Module.decoder.layers.{L}.self_attention.linear_qkv.Linear.forward.0 BSH>BSQ
Tensor.__mul__ BSND,S1D>BSND|Tensor.__mul__ BSND,S1D>BSND|Tensor.__add__ BSND,BSND>BSND|Torch.matmul BNSD,BNDS>BNSS
Tensor.__truediv__ BNSS>BNSS|Tensor.masked_fill BNSS,SS>BNSS|Torch.softmax BNSS>BNSS|Torch.matmul BNSS,BNSD>BNSD
Functional.linear BSH,HH>BSH|Module.decoder.layers.{L}.self_attention.linear_proj.Linear.forward.0 BSH>BSH
Module.decoder.layers.{L}.self_attention.SelfAttention.forward.0 BSH,SD,SD>BSH|Tensor.__add__ BSH,BSH>BSH
Tensor.pow BSH>BSH|Tensor.mean BSH>BS1|Tensor.__add__ BS1>BS1|Torch.rsqrt BS1>BS1|Tensor.__mul__ BSH,BS1>BSH
Tensor.__mul__ BSH,H>BSH|Module.decoder.layers.{L}.pre_mlp_layernorm.RMSNorm.forward.0 BSH>BSH
Functional.linear BSH,GH>BSG|Module.decoder.layers.{L}.mlp.linear_fc1.Linear.forward.0 BSH>BSG
Functional.silu BSF>BSF|Tensor.__mul__ BSF,BSF>BSF|Functional.linear BSF,HF>BSH
Module.decoder.layers.{L}.mlp.linear_fc2.Linear.forward.0 BSF>BSH|Module.decoder.layers.{L}.mlp.MLP.forward.0 BSH>BSH
Tensor.__add__ BSH,BSH>BSH|Module.decoder.layers.{L}.TransformerLayer.forward.0 BSH,SD,SD>BSH
"""
MINDSPORE_LAYER = """
Functional.cast BSH>BSH|Tensor.__mul__ BSH,BSH>BSH|Functional.mean BSH>BS1|Tensor.__add__ BS1>BS1
Functional.rsqrt BS1>BS1|Tensor.__mul__ BSH,BS1>BSH|Functional.cast H>H|Tensor.__mul__ BSH,H>BSH
Functional.cast BSH>BSH|Cell.model.layers.{L}.attention_norm.RMSNorm.forward.0 BSH>BSH
Functional.cast HH>HH|Functional.cast BSH>BSH|Tensor.swapaxes HH>HH|Functional.matmul BSH,HH>BSH
Cell.model.layers.{L}.attention.wq.Linear.forward.0 BSH>BSH|Functional.cast KH>KH|Functional.cast BSH>BSH
Tensor.swapaxes KH>HK|Functional.matmul BSH,HK>BSK|Cell.model.layers.{L}.attention.wk.Linear.forward.0 BSH>BSK
Functional.cast KH>KH|Functional.cast BSH>BSH|Tensor.swapaxes KH>HK|Functional.matmul BSH,HK>BSK
Cell.model.layers.{L}.attention.wv.Linear.forward.0 BSH>BSK|Tensor.reshape BSH>BSND|Tensor.reshape BSK>BSND
Tensor.reshape BSK>BSND|Tensor.transpose BSND>BNSD|Functional.cast BNSD>BNSD|Tensor.__neg__ BNSD>BNSD
Functional.cat >BNSD|Tensor.__mul__ BNSD,SD>BNSD|Tensor.__mul__ BNSD,SD>BNSD|Tensor.__add__ BNSD,BNSD>BNSD
Functional.cast BNSD>BNSD|Tensor.transpose BSND>BNSD|Functional.cast BNSD>BNSD|Tensor.__neg__ BNSD>BNSD
Functional.cat >BNSD|Tensor.__mul__ BNSD,SD>BNSD|Tensor.__mul__ BNSD,SD>BNSD|Tensor.__add__ BNSD,BNSD>BNSD
Functional.cast BNSD>BNSD|Tensor.reshape BNSD>BNSD|Functional.broadcast_to BNSD>BNSD|Tensor.reshape BNSD>BNSD
Functional.cast BSND>BSND|Tensor.transpose BSND>BNSD|Tensor.reshape BNSD>BNSD|Functional.broadcast_to BNSD>BNSD
Tensor.reshape BNSD>BNSD|Tensor.swapaxes BNSD>BNDS|Functional.matmul BNSD,BNDS>BNSS|Tensor.__mul__ BNSS,>BNSS
Tensor.__add__ BNSS,SS>BNSS|Functional.cast BNSS>BNSS|Functional.softmax BNSS>BNSS|Functional.cast BNSS>BNSS
Functional.matmul BNSS,BNSD>BNSD|Tensor.transpose BNSD>BSND|Tensor.reshape BSND>BSH|Functional.cast HH>HH
Functional.cast BSH>BSH|Tensor.swapaxes HH>HH|Functional.matmul BSH,HH>BSH
Cell.model.layers.{L}.attention.wo.Linear.forward.0 BSH>BSH|Cell.model.layers.{L}.attention.Attention.forward.0 BSH>BSH
Functional.cast BSH>BSH|Tensor.__add__ BSH,BSH>BSH|Functional.cast BSH>BSH|Tensor.__mul__ BSH,BSH>BSH
Functional.mean BSH>BS1|Tensor.__add__ BS1>BS1|Functional.rsqrt BS1>BS1|Tensor.__mul__ BSH,BS1>BSH
Functional.cast H>H|Tensor.__mul__ BSH,H>BSH|Functional.cast BSH>BSH|Cell.model.layers.{L}.ffn_norm.RMSNorm.forward.0 BSH>BSH
Functional.cast FH>FH|Functional.cast BSH>BSH|Tensor.swapaxes FH>HF|Functional.matmul BSH,HF>BSF
Cell.model.layers.{L}.feed_forward.w1.Linear.forward.0 BSH>BSF|Functional.cast FH>FH|Functional.cast BSH>BSH
Tensor.swapaxes FH>HF|Functional.matmul BSH,HF>BSF|Cell.model.layers.{L}.feed_forward.w3.Linear.forward.0 BSH>BSF
Functional.silu BSF>BSF|Tensor.__mul__ BSF,BSF>BSF|Functional.cast HF>HF|Functional.cast BSF>BSF
Tensor.swapaxes HF>FH|Functional.matmul BSF,FH>BSH|Cell.model.layers.{L}.feed_forward.w2.Linear.forward.0 BSF>BSH
Cell.model.layers.{L}.feed_forward.FeedForward.forward.0 BSH>BSH|Functional.cast BSH>BSH|Tensor.__add__ BSH,BSH>BSH
Cell.model.layers.{L}.DecoderLayer.forward.0 BSH>BSH
"""
DIMS = {"B": 1, "S": 4096, "H": 4096, "F": 11008, "G": 22016, "N": 32, "D": 128, "Q": 12288, "K": 1024, "1": 1}
SIDES = {"pytorch": (TORCH_LAYER, "torch.Tensor", "torch.float32", "Module."),
         "mindspore": (MINDSPORE_LAYER, "mindspore.Tensor", "Float32", "Cell.")}


def parse_layer(text: str) -> list[tuple[str, list[list[int]], list[list[int]]]]:
    calls = []
    for item in " | ".join(text.split("\n")).split("|"):
        if not item.strip():
            continue
        name, shapes = item.split()
        inputs, outputs = shapes.split(">")
        calls.append((name, [[DIMS[c] for c in s] for s in inputs.split(",")], [[DIMS[c] for c in outputs]]))
    return calls


def tensor(kind: str, dtype: str, shape: list[int], rng: random.Random, torch: bool) -> dict:
    high = rng.uniform(0.5, 4.0)
    entry = {"type": kind, "dtype": dtype, "shape": shape, "Max": high, "Min": -rng.uniform(0.5, 4.0),
             "Mean": rng.uniform(-0.01, 0.01), "Norm": rng.uniform(10.0, 500.0)}
    if torch:
        entry["requires_grad"] = False
    return entry


def write_dump(folder: Path, framework: str, rows: int, seed: int) -> int:
    """One msprobe dump (``folder/dump.json``, ``stack.json``, ``construct.json``) of at least ``rows``
    tensor rows, written entry by entry. Returns the rows written."""
    layer_text, kind, dtype, module = SIDES[framework]
    calls, torch, rng = parse_layer(layer_text), framework == "pytorch", random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    counters: dict[str, int] = {}
    written, layer, first = 0, 0, True
    with open(folder / "dump.json", "w") as dump, open(folder / "construct.json", "w") as construct, \
            open(folder / "stack.json", "w") as stack:
        dump.write('{\n "task": "statistics",\n "level": "mix",\n "framework": "%s",\n "dump_data_dir": null,\n'
                   ' "data": {' % framework)
        construct.write("{")
        stack.write("{")
        while written < rows:
            parent = next(name for name, _, _ in reversed(calls) if name.startswith(module)).replace(LAYER_RE, str(layer))
            for name, inputs, outputs in calls:
                if name.startswith(module):
                    full = name.replace(LAYER_RE, str(layer))
                else:
                    full = f"{name}.{counters.get(name, 0)}.forward"
                    counters[name] = counters.get(name, 0) + 1
                entry = {"input_args": [tensor(kind, dtype, s, rng, torch) for s in inputs if s],
                         "input_kwargs": {}, "output": [tensor(kind, dtype, s, rng, torch) for s in outputs]}
                sep = "" if first else ","
                body = json.dumps(entry, indent=1).replace("\n", "\n  ")
                dump.write(f'{sep}\n  {json.dumps(full)}: {body}')
                construct.write(f'{sep}\n {json.dumps(full)}: {json.dumps(None if full == parent else parent)}')
                stack.write(f'{sep}\n {json.dumps(str(written))}: [[{json.dumps(full)}], '
                            f'["File model.py, line {layer}, in forward, \\n y = self.layer(x)"]]')
                first = False
                written += len(entry["input_args"]) + len(entry["output"])
            layer += 1
        dump.write("\n }\n}\n")
        construct.write("\n}\n")
        stack.write("\n}\n")
    return written


# Runs one command and reports its own wall time and peak RSS: a child started straight from this process
# would report this process's RSS when that is larger (Linux counts the parent's pages before exec; the
# parent holds msprobe's result rows), so a small Python process in between starts it and measures it.
_RUNNER = """import os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    cpu = usage.ru_utime + usage.ru_stime               # the child's and its waited-for children's (a pool's workers)
    out.write(f"{os.waitstatus_to_exitcode(status)} {time.perf_counter() - start} {usage.ru_maxrss} {cpu}")
"""


def measure(command: list[str], log: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds of it and its workers) of one child process; its output goes to
    ``log`` (msprobe is verbose)."""
    report = log.with_suffix(".measured")
    with open(log, "w") as out:
        subprocess.run([sys.executable, "-c", _RUNNER, str(report), *command], cwd=ROOT, stdout=out,
                       stderr=subprocess.STDOUT, check=True)
    code, seconds, rss, cpu = report.read_text().split()
    if int(code) not in ok:
        raise SystemExit(f"failed: {' '.join(command)}\n{log.read_text(errors='replace')[-2000:]}")
    return float(seconds), int(rss) / 1024, float(cpu)


def msprobe_command() -> list[str]:
    found = shutil.which("msprobe") or str(Path(sys.executable).with_name("msprobe"))
    return [found, "compare"]


def workbench_has_compare() -> bool:
    run = subprocess.run([sys.executable, "-m", "workbench", "compare", "--help"], cwd=ROOT,
                         capture_output=True, text=True)
    return run.returncode == 0


def matched_rows(output: Path) -> tuple[int, int]:
    """(rows with a bench counterpart, rows) of msprobe's result csv."""
    found = sorted(output.glob("compare_result*.csv"))
    if not found:
        return 0, 0
    with open(found[-1], newline="") as handle:
        rows = list(csv.DictReader(handle))
    return sum(row.get("Bench Name", "N/A") != "N/A" for row in rows), len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="tensor rows per side")
    parser.add_argument("--ranks", type=int, default=8, help="ranks of the --workers comparison")
    parser.add_argument("--skip-msprobe", action="store_true")
    parser.add_argument("--workers-only", action="store_true", help="only the --workers 1 against 2 comparison")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the --workers comparison")
    parser.add_argument("--keep", type=Path, help="write the dumps here and keep them (reused when there)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_compare_"))
    try:
        run(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def generated(folder: Path, key: str) -> bool:
    """True when ``folder`` holds dumps written for ``key`` (rows, ranks) by an earlier run (``--keep``)."""
    marker = folder / ".generated"
    return marker.exists() and marker.read_text() == key


def mark_generated(folder: Path, key: str) -> None:
    (folder / ".generated").write_text(key)


def load() -> str:
    """The 1-minute load average, printed beside every time."""
    return f"load {os.getloadavg()[0]:.1f}"


def compile_checkout() -> None:
    """The checkout's bytecode, written once before any run is measured, as an install writes it: with
    PYTHONDONTWRITEBYTECODE set (as on the benchmark machine) every run would compile the ~85 modules a comparison
    imports again (~0.085 s of CPU), in the serial part of --workers 1 and 2 alike."""
    import compileall

    compileall.compile_dir(ROOT / "workbench", quiet=1)


def run(args, work: Path) -> None:
    compile_checkout()
    if args.workers_only:
        run_workers(args, work)
        return
    golden, target = work / "torch" / "step0", work / "mindspore" / "step0"
    start = time.perf_counter()
    if not generated(work / "torch", str(args.rows)):
        rows = (write_dump(golden / "proc0", "pytorch", args.rows, 1),
                write_dump(target / "proc0", "mindspore", args.rows, 2))
        mark_generated(work / "torch", str(args.rows))
        size = sum(p.stat().st_size for p in work.glob("*/step0/proc0/dump.json")) / 2**20
        print(f"generated {rows[0]:,} torch rows and {rows[1]:,} MindSpore rows ({size:.0f} MiB of dump.json) "
              f"in {time.perf_counter() - start:.1f} s under {work}")
    results = {}
    if not args.skip_msprobe:
        output = work / "msprobe_out"
        results["msprobe compare"] = measure(msprobe_command() + ["-tp", str(target), "-gp", str(golden), "-o",
                                                                  str(output)], work / "msprobe.log")
        matched, total = matched_rows(output)
        print(f"msprobe compare: {results['msprobe compare'][0]:.1f} s, peak RSS {results['msprobe compare'][1]:.0f} MiB"
              f" ({matched:,} of {total:,} rows matched to the torch side, no mapping file)")
    if not workbench_has_compare():
        print("workbench compare: skipped (`python -m workbench compare` does not exist yet in this checkout)")
        return
    (work / "workbench.csv").unlink(missing_ok=True)
    command = workbench_command(golden.parent, target.parent, work / "workbench.csv")
    results["workbench compare"] = measure(command, work / "workbench.log", (0, 1))
    seconds, rss, _ = results["workbench compare"]
    print(f"workbench compare: {seconds:.1f} s, peak RSS {rss:.0f} MiB ({load()})")
    if "msprobe compare" in results:
        ms_seconds, ms_rss, _ = results["msprobe compare"]
        print(f"ratios: {ms_seconds / seconds:.1f}x faster (target >= 30x), {rss / ms_rss:.2f} of msprobe's memory "
              f"(target <= 0.33)")
    run_workers(args, work)


def workbench_command(golden: Path, target: Path, out: Path, *extra: str) -> list[str]:
    """`workbench compare` with the torch dump as reference (A) and the MindSpore dump as candidate (B)."""
    return [sys.executable, "-m", "workbench", "compare", str(golden), str(target), "--out", str(out), *extra]


def run_workers(args, work: Path) -> None:
    """The same number of rows split over ``--ranks`` rank folders: --workers 1 against --workers 2, ``--repeat``
    times (each pair back to back)."""
    key = f"{args.rows} {args.ranks}"
    if not generated(work / "torch_ranks", key):
        for side, framework, seed in (("torch_ranks", "pytorch", 3), ("mindspore_ranks", "mindspore", 4)):
            for rank in range(args.ranks):
                write_dump(work / side / "step0" / f"rank{rank}", framework, args.rows // args.ranks, seed * 100 + rank)
        mark_generated(work / "torch_ranks", key)
    for _ in range(args.repeat):
        timed = {}
        for workers in (1, 2):
            out = work / f"workers{workers}.csv"
            out.unlink(missing_ok=True)
            command = workbench_command(work / "torch_ranks", work / "mindspore_ranks", out, "--workers", str(workers))
            timed[workers] = measure(command, work / f"workers{workers}.log", (0, 1))
            print(f"workbench compare, {args.ranks} ranks, --workers {workers}: {timed[workers][0]:.1f} s, "
                  f"CPU {timed[workers][2]:.1f} s, peak RSS {timed[workers][1]:.0f} MiB ({load()})")
        print(f"--workers 2 speed-up: {timed[1][0] / timed[2][0]:.2f}x (target >= 1.7x)")


if __name__ == "__main__":
    main()
