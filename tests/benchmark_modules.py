"""The scripts of ``benchmarks/`` loaded by path (they are not a package): their generators write the same
logs and dumps the benchmarks measure, at any size, for the tests that hold the fast paths to the exact ones."""
from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@lru_cache(maxsize=None)
def load_benchmark(name: str):
    """``benchmarks/<name>.py`` as a module (loaded once)."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
