"""`workbench weights diff` memory: peak RSS beside the largest tensor, on a synthetic fp32 HF Llama.

The diff compares each pair of tensors in chunks of float64 (workbench.convert.diff.CHUNK elements),
so its memory follows the two tensors being compared (memory-mapped file pages), not ten float64
copies of them. In one run, each in its own process (peak RSS via wait4):
  workbench weights diff HF HF.ckpt      (HF safetensors vs its MindFormers .ckpt conversion)
  python -c "import workbench.cli.main, pandas"   (the fixed cost: interpreter and imports)
Target: peak RSS <= 2x the largest tensor + the fixed cost + 100 MB.

    .venv/bin/python benchmarks/weights_diff.py [--workdir DIR] [--layers 2] [--keep]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert import ROOT, measure  # noqa: E402  (the sibling benchmark's generator and timer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="wb-diff-bench-"))
    source, converted = work / "hf_llama", work / "mf.ckpt"
    python = sys.executable
    try:
        largest = int(subprocess.run([python, str(ROOT / "benchmarks" / "convert.py"), "--layers", str(args.layers),
                                      "--generate-only", str(source)], check=True, capture_output=True, text=True,
                                     cwd=ROOT).stdout)
        subprocess.run([python, "-m", "workbench", "convert", str(source), str(converted), "--to", "mindformers"],
                       check=True, capture_output=True, cwd=ROOT)
        size = sum(f.stat().st_size for f in source.rglob("*") if f.is_file())
        base_seconds, base_rss = measure([python, "-c", "import workbench.cli.main, pandas, numpy"])
        seconds, rss = measure([python, "-m", "workbench", "weights", "diff", str(source), str(converted),
                                "--config", str(source / "config.json"), "--format", "csv", "--out", str(work / "diff.csv")])
        budget = 2 * largest / 2**20 + base_rss + 100
        print(f"synthetic HF Llama: {size / 2**30:.2f} GiB fp32, largest tensor {largest / 2**20:.0f} MiB")
        print(f"  imports only            {base_seconds:7.2f} s  peak RSS {base_rss:8.0f} MiB")
        print(f"  workbench weights diff  {seconds:7.2f} s  peak RSS {rss:8.0f} MiB  "
              f"= fixed cost + {(rss - base_rss) / (largest / 2**20):.2f}x the largest tensor")
        print(f"weights diff: peak RSS {rss:.0f} MiB vs budget 2x largest + imports + 100 = {budget:.0f} MiB "
              f"({'meets' if rss <= budget else 'MISSES'}); whole-tensor float64 copies needed ~10x the largest")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
