"""Reading one tensor touches only its bytes; streaming a conversion holds about one tensor at a time.

Each measurement runs in a fresh interpreter (``ru_maxrss`` is a high-water mark) on a ~200 MB
checkpoint of 8 x 25 MB tensors plus one small one. Bounds are generous but far below the file size.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.tensors.base import TensorMeta
from workbench.tensors.safetensors_write import build_header

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024
BIG, COUNT = 25 * MB, 8
METAS = [TensorMeta("small", (1024,), "fp32")] + [TensorMeta(f"big.{i}", (BIG // 4,), "fp32") for i in range(COUNT)]

PROBE = r"""
import resource, sys
import numpy as np
from workbench.tensors.open import open_sink, open_source

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

mode, path = sys.argv[1], sys.argv[2]
source = open_source(path)
metas = list(source.metas().values())
base = peak()
if mode == "read":
    small = source.read("small")
    assert isinstance(small, np.memmap), type(small)
    assert float(small.sum()) == 1024 * 0.5
    big = source.read("big.3")
    assert isinstance(big, np.memmap) and big.shape == (%d,)
    assert float(big[:4].sum()) == 4 * 0.5
else:
    sink = open_sink(sys.argv[3], metas)
    for meta in metas:
        sink.write(meta.name, source.read(meta.name))
    sink.finish()
print(peak() - base)
""" % (BIG // 4)


@pytest.fixture(scope="module")
def big_safetensors(tmp_path_factory) -> Path:
    """A ~200 MB safetensors file of 0.5s, written in 4 MB blocks (never held in memory at once)."""
    path = tmp_path_factory.mktemp("big") / "big.safetensors"
    block = np.full(MB, 0.5, dtype=np.float32).tobytes()            # 4 MB
    with open(path, "wb") as handle:
        handle.write(build_header(METAS))
        handle.write(np.full(1024, 0.5, dtype=np.float32).tobytes())
        for _ in range(COUNT * BIG // len(block)):
            handle.write(block)
    return path


def probe(*args: str) -> int:
    result = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return int(result.stdout.strip().splitlines()[-1])


def test_reading_one_tensor_does_not_load_the_file(big_safetensors):
    assert big_safetensors.stat().st_size > 200 * MB
    assert probe("read", big_safetensors) < 20 * MB


def test_reading_one_tensor_of_a_ckpt_does_not_load_the_file(big_safetensors, tmp_path):
    ckpt = tmp_path / "big.ckpt"
    probe("convert", big_safetensors, ckpt)
    assert probe("read", ckpt) < 20 * MB


@pytest.mark.parametrize("target", ["out.ckpt", "out.safetensors", "out_dir"])
def test_conversion_memory_follows_the_largest_tensor(big_safetensors, tmp_path, target):
    grown = probe("convert", big_safetensors, tmp_path / target)
    assert grown < 2 * BIG + 64 * MB, f"peak RSS grew by {grown / MB:.0f} MB for {COUNT} x 25 MB tensors"
