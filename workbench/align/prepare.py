"""``workbench align prepare``: from the user's Megatron launch script and MindFormers yaml, the runs the
alignment method needs, for both sides, plus the environment snippets and plan.yaml.

Each run starts from the inputs, applies the settings of datasets/align_runs.yaml (canonical keys,
written through keys.yaml's own flags and paths: :mod:`.prepare_keys`), then audits the pair with the
CheckList and moves every value still different to the reference's (the MindFormers side follows
Megatron; where MindFormers' implementation fixes a value, the Megatron flag follows it), until the
CheckList finds nothing more to set. Everything is staged in a temporary folder and renamed into
place whole.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from .prepare_fixes import audit_fixes, leftovers, side_settings
from .prepare_runs import Run, RunCatalog, load_runs

_ROUNDS = 6
_SAFE_DIR = re.compile(r"[\w.+\-/@%:]+\Z")


@dataclass
class Prepared:
    out: Path
    files: list[str]                               # written, relative to out
    differences: list[dict[str, str]]              # items left different on purpose (plan.yaml)
    unresolved: list[str] = field(default_factory=list)   # items align prepare could not align
    changes: dict[str, int] = field(default_factory=dict)  # file -> changed settings


@dataclass
class Context:
    runs: RunCatalog
    hardware: str                  # the Megatron side's: gpu | ascend
    mf_hardware: str
    generation: str
    align_dir: str
    layers: int | None
    long_steps: int
    keep_parallel: bool
    megatron_input: Path
    mindformers_input: Path
    inputs: dict[str, Any] = field(default_factory=dict)   # side -> the input's TrainingConfig
    launcher: dict[str, Any] = field(default_factory=dict)  # torchrun's arguments in the input
    seed: int | None = None


def prepare(megatron: Path | str, mindformers: Path | str, out: Path | str, *, layers: int | None = None,
            long_steps: int = 1000, keep_parallel: bool = False, force: bool = False) -> Prepared:
    """Write the runs under ``out`` (see the module doc); returns what was written and what is left."""
    from ..audit.engine import run_checklist
    from ..convert.staging import Staging
    from ..output_checks import check_output

    megatron, mindformers, out = Path(megatron), Path(mindformers), Path(out)
    _check_options(layers, long_steps, out)
    check_output(out, force, allow_folder=True)
    original = run_checklist(megatron, mindformers)
    if original.megatron.form != "shell":
        raise InputError(str(megatron), f"is a Megatron {original.megatron.form}, not a launch script",
                         "pass the launch script (.sh) the runs start from")
    ctx = Context(load_runs(), original.megatron.value("runtime.hardware") or "gpu",
                   original.mindformers.value("runtime.hardware") or "ascend", original.mindformers.generation,
                   str(out.resolve()), layers, long_steps, keep_parallel, megatron, mindformers,
                   {"megatron": original.megatron, "mindformers": original.mindformers},
                   _launcher(megatron), original.megatron.value("other.seed"))
    with Staging(out) as staging:
        root = staging.path
        root.mkdir()
        result = _write_all(ctx, root, out)
        staging.publish([root / name for name in result.files])
    return result


def _launcher(megatron: Path) -> dict[str, Any]:
    from ..config import read_config

    return {name: raw.value for name, raw in read_config(megatron, "megatron").launcher.items()
            if raw.unresolved is None}


def _check_options(layers: int | None, long_steps: int, out: Path) -> None:
    if layers is not None and layers < 1:
        raise InputError("--layers", f"expected a layer count >= 1, found {layers}", "e.g. --layers 2")
    if long_steps < 2:
        raise InputError("--long-steps", f"expected at least 2 steps, found {long_steps}", "e.g. --long-steps 1000")
    if not _SAFE_DIR.fullmatch(str(out.resolve())):
        raise InputError(str(out), "the launch scripts name this folder unquoted inside argument lists",
                         "choose a folder whose path has no spaces, quotes or shell characters")


def _write_all(ctx: Context, root: Path, out: Path) -> Prepared:
    from ..fileio import write_text
    from . import prepare_files as files
    from .plan import plan_text

    texts: dict[str, str] = {}
    changes: dict[str, int] = {}
    differences: dict[str, str] = {}
    unresolved: list[str] = []
    for run in ctx.runs.runs.values():
        found = _prepare_run(ctx, run, root, texts, changes)
        differences.update(found[0])
        unresolved.extend(f"{run.name}: {item}" for item in found[1] if f"{run.name}: {item}" not in unresolved)
    seed = ctx.seed
    texts["env/megatron.sh"] = files.env_text("megatron", ctx.hardware, ctx.align_dir, seed)
    texts["env/mindformers.sh"] = files.env_text("mindformers", ctx.mf_hardware, ctx.align_dir, seed)
    texts["megatron/capture_hooks.txt"] = files.capture_hooks_text()
    for run in ctx.runs.runs.values():
        if "mindformers" in run.sides:
            texts[f"mindformers/run_{run.name}.sh"] = files.mindformers_launch(run.name, run.title, ctx.align_dir)
    planned = [{"item": item, "why": why} for item, why in sorted(differences.items())]
    texts["plan.yaml"] = plan_text(_artifacts(ctx), {"megatron": str(ctx.megatron_input.resolve()),
                                                     "mindformers": str(ctx.mindformers_input.resolve())},
                                   planned, _plan_runs(ctx))
    for name, text in texts.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        write_text(root / name, text)
    for name in texts:
        if name.endswith(".sh"):
            (root / name).chmod((root / name).stat().st_mode | 0o111)
    return Prepared(out, sorted(texts), planned, unresolved, changes)


def _artifacts(ctx: Context) -> dict[str, str]:
    from .prepare_files import ARTIFACT_PATHS, GPU_GRADS

    paths = dict(ARTIFACT_PATHS)
    if ctx.hardware != "ascend":
        paths["grads"] = GPU_GRADS
    return paths


def _plan_runs(ctx: Context) -> dict[str, Any]:
    from .prepare_files import log_path, script_path

    runs = {}
    for run in ctx.runs.runs.values():
        entry: dict[str, Any] = {"title": run.title,
                                 "steps": 2 if run.steps != "long" else ctx.long_steps}
        for side in run.sides:
            entry[side] = script_path(side, run.name) if side == "megatron" else f"mindformers/run_{run.name}.sh"
            entry[f"{side}_log"] = log_path(side, run.name)
        if "mindformers" in run.sides:
            entry["mindformers_config"] = script_path("mindformers", run.name)
        entry["settings"] = {key: value for key, value in _settings(ctx, run).items()}
        entry["produces"] = list(run.produces)
        runs[run.name] = entry
    return runs


# ------------------------------------------------------------------------------------------ one run
def _settings(ctx: Context, run: Run) -> dict[str, Any]:
    """every_run, parallel_off (unless --keep-parallel), the `from:` run's settings, the run's own."""
    settings = dict(ctx.runs.every_run)
    if not ctx.keep_parallel:
        settings.update(ctx.runs.parallel_off)
    if run.start:
        settings.update(ctx.runs.runs[run.start].settings)
    settings.update(run.settings)
    settings["train.steps"] = ctx.long_steps if run.steps == "long" else run.steps
    if ctx.layers is not None:
        settings["model.num_layers"] = ctx.layers
    return settings


def _prepare_run(ctx: Context, run: Run, root: Path, texts: dict[str, str],
                 changes: dict[str, int]) -> tuple[dict[str, str], list[str]]:
    """Both sides of one run: its settings, then the audit's fixes until none is left. A run of one side
    is prepared against the MindFormers side of its `from:` run, and only its own side is kept."""
    from ..input_files import read_text
    from .prepare_edits import edit_megatron, edit_mindformers, raw_megatron, raw_mindformers
    from .prepare_files import script_path

    settings = _settings(ctx, run)
    m_text, count_m = edit_megatron(ctx, read_text(ctx.megatron_input, what="launch script"), run,
                                    side_settings(ctx, settings, "megatron"), raw_megatron(ctx, run))
    f_text, count_f = edit_mindformers(ctx, read_text(ctx.mindformers_input, what="config"),
                                       side_settings(ctx, settings, "mindformers"),
                                       raw_mindformers(ctx, ctx.runs.runs.get(run.start, run)))
    m_text, f_text, report, counts = _align(ctx, run, root, m_text, f_text, settings)
    for side, text, count in (("megatron", m_text, count_m + counts[0]), ("mindformers", f_text, count_f + counts[1])):
        if side in run.sides:
            texts[script_path(side, run.name)] = text
            changes[script_path(side, run.name)] = count
    return leftovers(ctx, report, run)


def _align(ctx: Context, run: Run, root: Path, m_text: str, f_text: str, settings: dict[str, Any]):
    """Audit the staged pair and apply its fixes until the CheckList asks for nothing more."""
    from ..audit.engine import run_checklist
    from .prepare_edits import edit_megatron, edit_mindformers

    staged_m, staged_f = root / f".check_{run.name}.sh", root / f".check_{run.name}.yaml"
    counts = [0, 0]
    try:
        for _ in range(_ROUNDS):
            _stage(staged_m, m_text)
            _stage(staged_f, f_text)
            report = run_checklist(staged_m, staged_f)
            fixes = audit_fixes(ctx, report, settings)
            if not fixes["megatron"] and not fixes["mindformers"]:
                break
            if fixes["megatron"]:
                m_text, count = edit_megatron(ctx, m_text, run, fixes["megatron"], [], header=False)
                counts[0] += count
            if fixes["mindformers"]:
                f_text, count = edit_mindformers(ctx, f_text, fixes["mindformers"], [])
                counts[1] += count
    finally:
        staged_m.unlink(missing_ok=True)
        staged_f.unlink(missing_ok=True)
    return m_text, f_text, report, counts


def _stage(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
