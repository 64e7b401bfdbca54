"""Apply one run's settings to each side's text: canonical requests through keys.yaml (each resolved
against the file, so a flag or key already written is changed where it is), plus the settings no
canonical key covers (checkpoint, output folders, the replay dataset, local norms, gradient capture)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.registry import load_framework, load_registry
from .edit_shell import open_script
from .edit_yaml import open_yaml
from .prepare_files import capture_path, megatron_header
from .prepare_keys import Request, setting_for

_REPLAY_WHY = "replay the reference's captured batches (MegatronReplayDataset, docs/replay.md)"


def edit_megatron(ctx, text: str, run, requests: list[Request], raw: list[tuple[str, Any, str]],
                  header: bool = True) -> tuple[str, int]:
    edit = open_script(Path(ctx.megatron_input.name), text)
    count = 0
    for request in requests:
        settings = setting_for(request.key, request.value, "megatron", ctx.generation, ctx.hardware,
                               lambda name: _present(edit, name), ctx.runs.set_through, request.why)
        for setting in settings:
            if _changes(edit, setting.name, setting.value):
                edit.set(setting.name, setting.value, setting.why, _group_flag(edit, request.key))
                count += 1
    for flag, value, why in raw:
        if _changes(edit, flag, value):
            edit.set(flag, value, why, "--save")            # output and checkpoint flags sit together
            count += 1
    for flags, value, why in launcher_settings(ctx) if header else []:
        count += edit.set_launcher(flags, value, why)
    if header:
        edit.add_header(megatron_header(run.name, run.title, ctx.megatron_input.name, ctx.align_dir, run.capture,
                                        run.settings.get("other.deterministic", True) is not False))
    return edit.text(), count


def _changes(edit, flag: str, value: Any) -> bool:
    from .prepare_keys import REMOVE

    if value is REMOVE:
        return edit.has(flag)
    if value is True:
        return not edit.has(flag)
    return not edit.holds(flag, value)


def _present(edit, name: str) -> bool:
    if name.startswith("--"):
        return edit.has(name)
    if edit.has("--" + name.replace("_", "-")):
        return True
    specials = load_framework("megatron").get("flags", {})
    return any(edit.has(flag) for flag, entry in specials.items() if entry["dest"] == name)


def _group_flag(edit, key: str) -> str | None:
    """A flag of the same CheckList group (keys.yaml prefix) already in the script: new flags go beside it."""
    prefix = key.split(".", 1)[0]
    for name, spec in load_registry().keys.items():
        if name.split(".", 1)[0] != prefix or spec.megatron is None:
            continue
        for source in spec.megatron.sources:
            flag = "--" + source.name.replace("_", "-")
            if edit.has(flag):
                return flag
    return None


def launcher_settings(ctx) -> list[tuple[tuple[str, ...], int, str]]:
    """With TP/PP/CP/EP set to 1, keep the reference's data-parallel size (and so its micro-batches per
    step): torchrun's world becomes DP, on as many nodes of the input's size as that takes."""
    data = ctx.inputs["megatron"].value("parallel.data")
    per_node = ctx.launcher.get("nproc_per_node")
    if ctx.keep_parallel or not data or not str(per_node or "").isdigit():
        return []
    per_node = int(per_node)
    nodes, per_node = (data // per_node, per_node) if data % per_node == 0 else (1, data)
    why = f"world = the reference's DP {data} now that TP/PP/CP/EP are 1"
    return [(("--nproc_per_node", "--nproc-per-node"), per_node, why), (("--nnodes",), nodes, why)]


def raw_megatron(ctx, run) -> list[tuple[str, Any, str]]:
    settings = [("--load", "${ALIGN_DIR}/checkpoints/megatron_init", "start from the plan's megatron_checkpoint"),
                ("--save", f"${{ALIGN_DIR}}/runs/megatron_{run.name}", "this run's own output folder"),
                ("--log-interval", 1, "every step's loss in the log")]
    if "grads" in run.capture and ctx.hardware != "ascend":
        settings.append(("--save-wgrads-interval", 1, "Megatron writes step 1's gradients (docs/step-store.md)"))
    return settings


def edit_mindformers(ctx, text: str, requests: list[Request], raw: list[tuple[tuple[str, ...], Any, str]]
                     ) -> tuple[str, int]:
    edit = open_yaml(Path(ctx.mindformers_input.name), text)
    count = 0
    for request in requests:
        settings = setting_for(request.key, request.value, "mindformers", ctx.generation, ctx.mf_hardware,
                               edit.has, ctx.runs.set_through, request.why)
        for setting in settings:
            if _yaml_changes(edit, setting.name, setting.value):
                edit.set(tuple(setting.name.split(".")), setting.value, setting.why)
                count += 1
    for keys, value, why in raw:
        if _yaml_changes(edit, ".".join(keys), value):
            edit.set(keys, value, why)
            count += 1
    return edit.text(), count


def _yaml_changes(edit, dotted: str, value: Any) -> bool:
    from .prepare_keys import REMOVE

    if value is REMOVE:
        return edit.has(dotted)
    absent = object()
    current = edit.get(dotted, absent)
    return current is absent or current != value or type(current) is not type(value)


def raw_mindformers(ctx, run) -> list[tuple[tuple[str, ...], Any, str]]:
    from ..replay.contracts import get_contract

    root = ctx.align_dir
    contract = "legacy" if ctx.generation != "mcore" else "new"
    settings: list[tuple[tuple[str, ...], Any, str]] = [
        (("load_checkpoint",), f"{root}/checkpoints/mindformers_init.ckpt", "the plan's mindformers_checkpoint"),
        (("output_dir",), f"{root}/runs/mindformers_{run.name}", "this run's own output folder"),
        (("runner_config", "epochs"), 1, "one pass over the replayed steps"),
        (("runner_config", "sink_mode"), False, "every step logged"),
    ]
    if "batches" in run.capture:
        loader = {"type": "MegatronReplayDataset", "capture_dir": f"{root}/{capture_path(run.name)}",
                  "contract": contract, "dp": None, "rank": None, "micro_batch_size": None, "per_step": True}
        settings += [(("train_dataset", "data_loader"), loader, _REPLAY_WHY),
                     (("train_dataset", "input_columns"), get_contract(contract).column_names, _REPLAY_WHY),
                     (("train_dataset", "repeat"), 1, _REPLAY_WHY),
                     (("train_dataset_task", "type"), "MegatronReplayDataset", _REPLAY_WHY),
                     (("train_dataset_task", "auto_register"), "mindformers_dataset.MegatronReplayDataset",
                      _REPLAY_WHY)]
    if run.name == "step12":
        settings.append((("runner_wrapper", "local_norm"), True, "per-parameter local norms printed (step 1)"))
    if ctx.mf_hardware == "ascend":
        why = "high-precision operators (CheckList item high_precision_mode)"
        settings += [(("context", "ascend_config", "precision_mode"), "must_keep_origin_dtype", why),
                     (("context", "ascend_config", "ge_options", "global", "ge.opSelectImplmode"), "high_precision", why)]
    return settings
