"""``workbench demo``: the whole alignment method on CPU, as a user runs it on a cluster, on the reference models.

    demo = run_demo(DemoOptions(out=Path("demo"), fault="norm_epsilon"))
    demo.result.verdict, demo.result.facts["first_failure"], demo.timings

1. prepare: ``align prepare`` on the shipped demo pair (a Megatron launch script and a MindFormers yaml)
   writes every run's configs and plan.yaml (``DIR/align``); every later file goes where the plan says.
2. checkpoint: the reference (torch, Megatron-style) writes its initial weights (``--steps 0 --save``).
3. convert: ``workbench convert`` turns them into the MindFormers .ckpt (a weights fault is planted there).
4. batches: the reference's batches captured by Megatron's capture hook; the MindSpore side replays the
   capture (a replay fault is planted there) and records what it trains on.
5. runs: each run of the plan (steps 1-2 with local norms and the step-1 gradient capture, lr = 0, the long
   run, the reference's rerun with determinism off) on both sides, each side from the configs align prepare
   wrote for it, both from the same weights; the MindSpore side with the fault planted in its code.
6. dumps: msprobe dumps of step 1 on both sides, each in its own process.
7. report: ``align report`` on the plan: every stage, the first failure, the component.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..knowledge import knowledge_dir

PAIR = ("demo_megatron.sh", "demo_mindformers.yaml")
"""The demo's own config pair, shipped in checklists/examples/ (the model sized in datasets/demo_model.yaml)."""
LONG_STEPS = 40
RUNS = ("step12", "lr0", "long", "rerun")
REPORT = "report.html"


@dataclass
class DemoOptions:
    out: Path
    fault: str | None = None
    long_steps: int = LONG_STEPS
    dumps: bool = True
    progress: Callable[[str], None] | None = None


@dataclass
class DemoRun:
    out: Path
    plan: Path
    report: Path
    result: object                                   # the align report's Result
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def mindspore_side(fault_name: str | None, model):
    """(the MindSpore side's model config, the fault to plant in its code or None) under ``fault_name``. The
    model comes from the MindFormers yaml the demo runs, which already states a padded vocabulary
    (:func:`_pad_mindformers_vocab`)."""
    if not fault_name:
        return model, None
    from .catalog import CODE_KINDS, find_fault

    fault = find_fault(fault_name)
    return model, fault if fault.plant.kind in CODE_KINDS else None


def run_demo(options: DemoOptions) -> DemoRun:
    """Every stage of the method into ``options.out`` (which must not exist, or be an empty folder)."""
    from .catalog import find_fault

    fault = find_fault(options.fault) if options.fault else None
    out = Path(options.out).resolve()       # the workers run in other folders (the dump worker in its own)
    timings: dict[str, float] = {}

    def stage(name: str, work: Callable[[], object]):
        if options.progress:
            options.progress(name)
        start = time.perf_counter()
        value = work()
        timings[name] = time.perf_counter() - start
        return value

    plan = stage("prepare", lambda: _prepare(out, options.long_steps))
    if fault is not None and fault.plant.values.get("pad_vocab_rows"):
        _pad_mindformers_vocab(plan, fault.plant.values["pad_vocab_rows"])
    runs = _Runs(plan, out / "work", fault)
    stage("checkpoint", runs.reference_checkpoint)
    stage("convert", runs.convert)
    stage("batches", runs.batches)
    stage("runs", lambda: runs.run_all(RUNS))
    notes = list(stage("dumps", runs.dumps) if options.dumps else ["dumps skipped (--no-dumps)"]) or []
    if not plan.present("mindformers_injected"):
        notes.append("no injected step-2 update (see work/mindformers_runs.log): the step-2 stage decides without it")
    result = stage("report", lambda: _report(plan, out / REPORT))
    return DemoRun(out, plan.path, out / REPORT, result, timings, notes)


def _prepare(out: Path, long_steps: int):
    from ..align.plan import read_plan
    from ..align.prepare import prepare

    examples = knowledge_dir("checklists") / "examples"
    out.mkdir(parents=True, exist_ok=True)
    prepare(examples / PAIR[0], examples / PAIR[1], out / "align", long_steps=long_steps)
    _add_thresholds(out / "align" / "plan.yaml")
    return read_plan(out / "align")


def _add_thresholds(plan_file: Path) -> None:
    """The demo's thresholds (``thresholds:`` of datasets/demo_faults.yaml, from its measured clean noise) into
    the plan, for the stages that compare losses and local norms of its fp32 pair."""
    from ..fileio import write_text
    from .catalog import load_thresholds

    chosen = load_thresholds()
    write_text(plan_file, plan_file.read_text() + (
        "thresholds:   # the demo's fp32 pair: datasets/demo_faults.yaml thresholds (measured clean noise)\n"
        f"  loss: {{step1_rtol: {chosen.step1_loss_rtol:.6e}, band_margin: {chosen.long_band_margin:.6e}}}\n"
        f"  localnorm: {{floor: {chosen.localnorm_floor:.6e}, factor: {chosen.localnorm_factor:.6e}}}\n"))


def _pad_mindformers_vocab(plan, rows: int) -> None:
    """A padded-vocabulary fault is a config difference too: every MindFormers yaml the plan runs says
    ``vocab_size`` + ``rows`` (the model the padded checkpoint fits), as the migrated config would."""
    import re

    from ..fileio import write_text

    for entry in plan.runs.values():
        config = entry.get("mindformers_config") if isinstance(entry, dict) else None
        if config:
            path = plan.folder / config
            text = re.sub(r"(?m)^(\s+vocab_size:\s*)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + rows}",
                          path.read_text())
            write_text(path, text)


def _report(plan, page: Path):
    from ..align.report import run_stages
    from ..align.result import align_result
    from ..report.emit import emit

    result = align_result(plan, run_stages(plan))
    for suffix in (".md", ".json"):                   # the same report as markdown and JSON (workbench.align/1)
        emit(result, suffix[1:], page.with_suffix(suffix), force=True)
    emit(result, "html", page, force=True)
    return result


class _Runs:
    """The runs of one demo: each side's configs from the plan, its weights, its batches."""

    def __init__(self, plan, work: Path, fault):
        self.plan, self.work, self.fault = plan, work, fault
        self.work.mkdir(parents=True, exist_ok=True)

    def path(self, artifact: str) -> Path:
        return self.plan.artifacts[artifact]

    def configs(self, run: str, side: str):
        from ..reference.from_canonical import configs_from_file

        entry = self.plan.runs[run]
        config = entry["megatron"] if side == "megatron" else entry["mindformers_config"]
        return configs_from_file(self.plan.folder / config, side)

    def micro_batch_size(self, run: str) -> int:
        """The reference script's --micro-batch-size (the demo pair's: the faults were measured with it)."""
        from ..config import read_config, resolve

        config = resolve(read_config(self.plan.folder / self.plan.runs[run]["megatron"], "megatron"))
        return int(config.value("train.micro_batch_size", 1))

    def reference_checkpoint(self) -> None:
        from dataclasses import replace

        from ..reference.runner import RunSpec, run

        model, train = self.configs("step12", "megatron")
        staged = self.work / "initial"
        run(RunSpec(side="megatron", model=model, train=replace(train, steps=0), out=staged, save=("megatron",)))
        _move(staged / "megatron_checkpoint", self.path("megatron_checkpoint"))

    def convert(self) -> None:
        from ..convert.run import ConvertOptions, convert

        target = self.path("mindformers_checkpoint")
        target.parent.mkdir(parents=True, exist_ok=True)
        convert(self.path("megatron_checkpoint"), target, ConvertOptions(to="mindformers"))
        if self.fault is not None and self.fault.plant.kind == "weights":
            from .faults import plant_weights_fault

            plant_weights_fault(target, self.fault)

    def batches(self) -> None:
        from ..reference.config import synthetic_batches
        from .batches import record, replay_for_mindspore, save_npz

        model, train = self.configs("long", "megatron")
        steps = max(train.steps, 2)
        reference = synthetic_batches(model, steps, micro_batch_size=self.micro_batch_size("long"), seed=train.seed)
        record(reference, self.path("megatron_batches"))
        replayed = replay_for_mindspore(self.path("megatron_batches"), self.path("mindformers_batches"), self.fault)
        save_npz(reference, self.work / "megatron_batches.npz")
        save_npz(replayed, self.work / "mindformers_batches.npz")

    def run_all(self, names: tuple[str, ...]) -> None:
        """Every run of both sides: the MindSpore side's in one worker process while the torch side's run here
        (two clusters at once; each side's runs in the plan's order)."""
        from .side_worker import start_side, wait_side

        worker = start_side(self.plan.folder, self.work, self.fault.name if self.fault else None, names)
        try:
            for name in names:
                self.run_side(name, "megatron")
        except BaseException:
            worker[0].kill()                 # it may be waiting for the reference's gradients
            raise
        finally:
            wait_side(worker)

    def run_side(self, name: str, side: str) -> None:
        """Run ``name`` of the plan on ``side`` (if the plan runs it there); its log (and capture) where the plan says."""
        from ..reference.runner import RunSpec, run

        entry = self.plan.runs[name]
        if side not in entry:
            return
        model, train = self.configs(name, side)
        init = self.path("megatron_checkpoint" if side == "megatron" else "mindformers_checkpoint")
        code_fault = None
        if side == "mindformers":
            model, fault = mindspore_side(self.fault.name if self.fault else None, model)
            code_fault = fault.name if fault else None
        spec = RunSpec(side=side, model=model, train=train, out=self.work / f"{name}_{side}", init=init,
                       batches=self.work / f"{side}_batches.npz", grads=name == "step12" and side == "megatron",
                       fault=code_fault)
        result = run(_with_local_norms(spec, name))
        _move(result.log, self.plan.folder / entry[f"{side}_log"])
        if spec.grads:
            _move(result.grads_dir, self.path("grads"))

    def run_injected(self, wait_s: float = 600.0) -> None:
        """The method's step-2 check on the MindSpore side: update 1 of the step-1/2 run with the reference's
        step-1 gradients injected into its optimizer (the fault planted), the weights after it saved where the
        plan names ``mindformers_injected``. Waits for the reference's gradients (the torch side's first run)."""
        from dataclasses import replace

        from ..reference.runner import RunSpec, run

        _wait_for(self.path("grads"), wait_s)
        model, train = self.configs("step12", "mindformers")
        model, fault = mindspore_side(self.fault.name if self.fault else None, model)
        spec = RunSpec(side="mindformers", model=model, train=replace(train, steps=1), out=self.work / "inject_mindformers",
                       init=self.path("mindformers_checkpoint"), batches=self.work / "mindformers_batches.npz",
                       save=("mindspore",), inject=self.path("grads"),
                       inject_config=self.plan.folder / self.plan.runs["step12"]["mindformers_config"],
                       fault=fault.name if fault else None)
        _move(run(spec).checkpoints[0], self.path("mindformers_injected"))

    def dumps(self) -> list[str]:
        from .dumps import dump_both

        return dump_both(self)


def _with_local_norms(spec, run_name: str):
    from dataclasses import replace

    if run_name != "step12":
        return spec
    return replace(spec, train=replace(spec.train, log_local_norms=True))


def _wait_for(path: Path, wait_s: float) -> None:
    """Until ``path`` exists (another process moves it into place whole); an InputError after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise InputError(str(path), f"not written within {wait_s:.0f} s", "see the reference side's run")
        time.sleep(0.2)


def _move(source: Path | None, target: Path) -> None:
    """A finished run's file or folder to where the plan expects it (replacing an older one)."""
    import shutil

    if source is None:
        raise InputError(str(target), "the run wrote nothing here", "see the run's log")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    shutil.move(str(source), str(target))
