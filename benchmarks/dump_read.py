"""Benchmark: reading one msprobe dump (``read_msprobe``) per phase, against ``json.load`` of the same dump.json.

The dumps are those of ``benchmarks/compare.py`` (``msprobe_dumps.py``, torch and MindSpore naming). Each phase is the
wall time of a named function of the readers, summed over its calls, best of ``--repeat`` runs; "other" is the
rest of the read (decoding spellings, naming rows, spreading per-entry values). The side files (read_construct,
read_stacks) are read while the compiled scan runs in its thread: "other" counts the longer of the two.

    python benchmarks/dump_read.py --rows 200000 --keep /tmp/dumps      # generate once, then reuse
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from msprobe_dumps import write_dump
from phase_timer import phase_timer

ROOT = Path(__file__).resolve().parents[1]
PHASES = (                                  # (module, function): what each phase measures
    ("msprobe_native", "_scan"),            # the compiled scan of dump.json's bytes (incl. its arrays)
    ("readers_msprobe", "_construct"),      # construct.json (before: through json)
    ("readers_msprobe", "_stacks"),         # stack.json, name -> stack id (before: through json)
    ("msprobe_side", "read_construct"),     # construct.json: the compiled scan, else json
    ("msprobe_side", "read_stacks"),        # stack.json: the compiled scan, else json
    ("msprobe_side", "load_construct"),     # construct.json as spans joined to the names later, else json
    ("msprobe_side", "load_stacks"),        # stack.json as spans joined to the names later, else json
    ("readers_msprobe", "_entry_infos"),    # entry names through the YAML's grammars (op, module path, pass)
    ("readers_msprobe", "table_from_columns"),  # the pandas table
)


def dumps(folder: Path, rows: int) -> dict[str, Path]:
    """torch and MindSpore dump roots under ``folder`` (written unless already there)."""
    roots = {}
    for side, framework, seed in (("torch", "pytorch", 1), ("mindspore", "mindspore", 2)):
        unit = folder / side / "step0" / "proc0"
        if not (unit / "dump.json").is_file():
            write_dump(unit, framework, rows, seed)
        roots[side] = folder / side
    return roots


def measure(root: Path, repeat: int) -> dict[str, float]:
    """Best of ``repeat`` per phase (seconds), with ``json.load`` of the dump.json and the whole read."""
    from workbench.dumps import msprobe_native, readers_msprobe

    try:
        from workbench.dumps import msprobe_side
    except ImportError:                     # a version before it
        msprobe_side = None
    from workbench.dumps.formats import load_dump_formats

    assert Path(readers_msprobe.__file__).is_relative_to(sys.path[0]), readers_msprobe.__file__
    fmt = load_dump_formats()
    modules = {"msprobe_native": msprobe_native, "readers_msprobe": readers_msprobe, "msprobe_side": msprobe_side}
    totals: dict[str, float] = {}
    for module, name in PHASES:
        if modules[module] is not None and hasattr(modules[module], name):
            setattr(modules[module], name, phase_timer(getattr(modules[module], name), totals, name))
    best: dict[str, float] = {}
    dump_json = next(root.rglob("dump.json"))
    for _ in range(repeat):
        start = time.perf_counter()
        with open(dump_json, "rb") as handle:
            json.load(handle)
        best["json.load"] = min(best.get("json.load", 1e9), time.perf_counter() - start)
        totals.clear()
        start = time.perf_counter()
        table = readers_msprobe.read_msprobe(root, "A", fmt)
        totals["read_msprobe"] = time.perf_counter() - start
        totals["other"] = totals["read_msprobe"] - _accounted(totals)
        for key, value in totals.items():
            best[key] = min(best.get(key, 1e9), value)
        del table
    return best


def _accounted(totals: dict[str, float]) -> float:
    """The seconds the phases account for; the side files (read while the scan runs in its thread) count only
    beyond the scan's time."""
    side = ("read_construct", "read_stacks", "load_construct", "load_stacks")
    beside = sum(totals.get(name, 0.0) for name in side)
    serial = sum(v for k, v in totals.items() if k not in ("read_msprobe", "_scan", *side))
    return serial + max(totals.get("_scan", 0.0), beside) if beside else serial + totals.get("_scan", 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="tensor rows per side")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side; the best is shown")
    parser.add_argument("--keep", type=Path, help="write the dumps here and keep them (reused when present)")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="the workbench checkout to measure (another version: before/after in one run)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_dump_read_"))
    try:
        for side, root in dumps(folder, args.rows).items():
            best = measure(root, args.repeat)
            phases = "  ".join(f"{k} {v:.3f}" for k, v in best.items() if k not in ("json.load", "read_msprobe"))
            print(f"{side}: read_msprobe {best['read_msprobe']:.3f} s (json.load of dump.json alone "
                  f"{best['json.load']:.3f} s) | {phases}")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
