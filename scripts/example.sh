#!/usr/bin/env bash
# The main job on the shipped example pair: audit a tiny Megatron launch script against its
# MindFormers yaml. Creates .venv on first use. Extra arguments go to `workbench checklist`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/env.sh"
venv=${WORKBENCH_VENV:-$root/.venv}
exec "$venv/bin/workbench" checklist \
    "$root/checklists/examples/llama_tiny_megatron.sh" \
    "$root/checklists/examples/llama_tiny_mindformers.yaml" "$@"
