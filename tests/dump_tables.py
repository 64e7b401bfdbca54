"""Dump tables for the matching/verdict tests, built from msprobe dump.json rows (the readers of issue 11 §2
land separately; this keeps the tests on the schema contract only)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from benchmark_modules import load_benchmark
from workbench.dumps.schema import as_table

DTYPES = {"Float32": "float32", "torch.float32": "float32", "BFloat16": "bfloat16", "torch.bfloat16": "bfloat16",
          "Float16": "float16", "torch.float16": "float16"}


def msprobe_rows(folder: Path, side: str) -> list[dict]:
    """Rows of ``dump.full.json`` (+ ``construct.full.json`` for operators' parent modules)."""
    data = json.loads((folder / "dump.full.json").read_text())["data"]
    construct = json.loads((folder / "construct.full.json").read_text())
    rows: list[dict] = []
    for key, call in data.items():
        parent = construct.get(key) if not key.startswith(("Module.", "Cell.")) else key
        module = parent.split(".")[1] if parent else ""
        op = key.split(".")[-3] if key.startswith(("Module.", "Cell.")) else key.split(".")[-3]
        pass_ = "backward" if ("backward" in key or "parameters_grad" in key) else "forward"
        items = [("input", i, t) for i, t in enumerate(call.get("input_args", []))]
        items += [("output", i, t) for i, t in enumerate(call.get("output", []))]
        items += [("parameter", i, (n, t)) for i, (n, t) in enumerate((call.get("parameters") or {}).items())]
        if "parameters_grad" in key:
            items = [("parameter", i, (n, t[0] if isinstance(t, list) else t)) for i, (n, t) in enumerate(call.items())]
        for io, slot, tensor in items:
            pname = None
            if io == "parameter":
                pname, tensor = tensor
            if not isinstance(tensor, dict) or "shape" not in tensor or "Max" not in tensor:
                continue
            name = f"{key}.parameters.{pname}" if pname and "parameters_grad" not in key else (
                f"{key}.{pname}" if pname else f"{key}.{io}.{slot}")
            shape = tensor["shape"]
            rows.append({"side": side, "rank": 0, "step": 0, "order": len(rows), "name": name, "op": op,
                         "module_path": module, "logical_module": "", "layer": None, "pass": pass_, "io": io,
                         "slot": slot, "dtype": DTYPES.get(tensor["dtype"], tensor["dtype"]),
                         "shape": "x".join(map(str, shape)), "numel": math.prod(shape), "max": tensor["Max"],
                         "min": tensor["Min"], "mean": tensor["Mean"], "l2norm": tensor["Norm"], "nan_count": None,
                         "inf_count": None, "md5": "", "stack_id": key, "source": str(folder)})
    return rows


def msprobe_table(folder: Path, side: str):
    return as_table(msprobe_rows(folder, side))


def benchmark_module():
    """benchmarks/compare.py (its ``write_dump``, from ``msprobe_dumps.py``, generates msprobe dumps of any size)."""
    return load_benchmark("compare")
