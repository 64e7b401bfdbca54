"""What ``align prepare`` writes besides the edited configs: where each artifact goes, the environment
and seed snippets the launch scripts source, the MindFormers launch scripts, the capture hooks."""
from __future__ import annotations

# Where the runs put each artifact (datasets/align_stages.yaml names them), relative to DIR.
ARTIFACT_PATHS = {
    "megatron_config": "megatron/step12.sh",
    "mindformers_config": "mindformers/step12.yaml",
    "megatron_checkpoint": "checkpoints/megatron_init",
    "mindformers_checkpoint": "checkpoints/mindformers_init.ckpt",
    "megatron_batches": "capture/megatron_step12",
    "mindformers_batches": "capture/mindformers_step12",
    "megatron_step_log": "logs/megatron_step12.log",
    "mindformers_step_log": "logs/mindformers_step12.log",
    "grads": "grads",
    "mindformers_injected": "checkpoints/mindformers_injected_step1.ckpt",
    "megatron_lr0_log": "logs/megatron_lr0.log",
    "mindformers_lr0_log": "logs/mindformers_lr0.log",
    "megatron_long_log": "logs/megatron_long.log",
    "megatron_rerun_log": "logs/megatron_rerun.log",
    "mindformers_long_log": "logs/mindformers_long.log",
    "megatron_dump": "dumps/megatron",
    "mindformers_dump": "dumps/mindformers",
}
GPU_GRADS = "runs/megatron_step12/wgrads"      # --save-wgrads-interval 1 writes {--save}/wgrads/iter_*


def script_path(side: str, run: str) -> str:
    return f"megatron/{run}.sh" if side == "megatron" else f"mindformers/{run}.yaml"


def log_path(side: str, run: str) -> str:
    return f"logs/{side}_{run}.log"


def capture_path(run: str) -> str:
    return f"capture/megatron_{run}"


# Each variable is cited where it is documented; only those are set.
_TORCH_DETERMINISM = """\
  # pytorch/pytorch torch/__init__.py use_deterministic_algorithms: cuBLAS (CUDA >= 10.2) is deterministic
  # only with this workspace setting.
  export CUBLAS_WORKSPACE_CONFIG=:4096:8
  # NVIDIA/Megatron-LM core_v0.12.1 megatron/training/arguments.py validate_args: --deterministic-mode
  # asserts NCCL_ALGO is one of Tree, Ring, CollnetDirect, CollnetChain, ^NVLS.
  export NCCL_ALGO=Ring
"""
_ASCEND_DETERMINISM = """\
  # Ascend/MindSpeed-RL docs/deterministic_computation.md (seed_all): HCCL_DETERMINISTIC=True,
  # LCCL_DETERMINISTIC=1, CLOSE_MATMUL_K_SHIFT=1 for deterministic collectives and matmuls on NPU.
  export HCCL_DETERMINISTIC=true
  export LCCL_DETERMINISTIC=1
  export CLOSE_MATMUL_K_SHIFT=1
  # Ascend/MindSpeed-LLM docs/pytorch/features/environment_variable.md: ASCEND_LAUNCH_BLOCKING=1 runs
  # operators synchronously (slower, one order of execution).
  export ASCEND_LAUNCH_BLOCKING=1
"""
_MINDSPORE_DETERMINISM = """\
  # Ascend/MindSpeed-RL docs/deterministic_computation.md: HCCL_DETERMINISTIC=True makes HCCL's
  # reductions deterministic (MindSpore's context.deterministic: ON in the yaml covers the operators).
  export HCCL_DETERMINISTIC=true
"""


def env_text(side: str, hardware: str, align_dir: str, seed: int | None) -> str:
    """env/<side>.sh: determinism variables (unless WORKBENCH_DETERMINISTIC=0) and the hash seed."""
    if side == "megatron":
        block = _ASCEND_DETERMINISM if hardware == "ascend" else _TORCH_DETERMINISM
    else:
        block = _MINDSPORE_DETERMINISM
    seed_line = f"export PYTHONHASHSEED={seed}\n" if seed is not None else ""
    return (f"# workbench align prepare: the environment of the {side} alignment runs; the launch scripts\n"
            f"# source it. WORKBENCH_DETERMINISTIC=0 (the reference's rerun) leaves determinism off.\n"
            f"export ALIGN_DIR=${{ALIGN_DIR:-{align_dir}}}\n"
            f"mkdir -p \"${{ALIGN_DIR}}/logs\" \"${{ALIGN_DIR}}/runs\" \"${{ALIGN_DIR}}/capture\"\n"
            f"{seed_line}"
            f"if [ \"${{WORKBENCH_DETERMINISTIC:-1}}\" != 0 ]; then\n{block}fi\n")


def megatron_header(run: str, title: str, source: str, align_dir: str, capture: tuple[str, ...],
                    deterministic: bool) -> list[str]:
    lines = [f"# workbench: align prepare wrote this from {source}: run {run}: {title}",
             f"ALIGN_DIR=${{ALIGN_DIR:-{align_dir}}}   # workbench: the folder align prepare wrote"]
    if not deterministic:
        lines.append("export WORKBENCH_DETERMINISTIC=0   # workbench: the noise band needs determinism off")
    lines.append('source "${ALIGN_DIR}/env/megatron.sh"   # workbench: determinism variables and the seed')
    if "batches" in capture:
        lines.append(f'export WORKBENCH_CAPTURE_DIR="${{ALIGN_DIR}}/{capture_path(run)}"   '
                     "# workbench: the batch capture hook (megatron/capture_hooks.txt) writes here")
    if "grads" in capture:
        lines.append('export WORKBENCH_GRADS_DIR="${ALIGN_DIR}/grads"   '
                     "# workbench: the gradient capture hook (megatron/capture_hooks.txt) writes here")
    lines.append(f'exec > >(tee "${{ALIGN_DIR}}/{log_path("megatron", run)}") 2>&1   # workbench: the log the report reads')
    return lines


def mindformers_launch(run: str, title: str, align_dir: str) -> str:
    return (f"#!/bin/bash\n# workbench align prepare: run {run} on the MindFormers side: {title}\n"
            "# MINDFORMERS_DIR: your mindformers checkout (run_mindformer.py); workbench must be installed\n"
            "# in this environment (the replay dataset imports it).\n"
            f"ALIGN_DIR=${{ALIGN_DIR:-{align_dir}}}\n"
            'source "${ALIGN_DIR}/env/mindformers.sh"\n'
            'MINDFORMERS_DIR=${MINDFORMERS_DIR:?set MINDFORMERS_DIR to your mindformers checkout}\n'
            'REGISTER_PATH=$(python -c "import os, workbench.replay; print(os.path.dirname(workbench.replay.__file__))")\n'
            f'python "${{MINDFORMERS_DIR}}/run_mindformer.py" --config "${{ALIGN_DIR}}/mindformers/{run}.yaml" \\\n'
            '    --register_path "${REGISTER_PATH}" 2>&1 | tee '
            f'"${{ALIGN_DIR}}/{log_path("mindformers", run)}"\n')


def capture_hooks_text() -> str:
    from ..replay.capture import megatron_forward_step_snippet
    from ..replay.grad_capture import megatron_train_step_snippet

    return ("# workbench align prepare: the two hooks the Megatron runs need, to paste into your Megatron\n"
            "# checkout (docs/replay.md, docs/step-store.md). The launch scripts export WORKBENCH_CAPTURE_DIR\n"
            "# and WORKBENCH_GRADS_DIR; a run without them must not call the hooks.\n\n"
            "# 1. Batch capture\n" + megatron_forward_step_snippet +
            "\n# 2. Gradient capture (step 1), around optimizer.step()\n" + megatron_train_step_snippet)
