#!/usr/bin/env bash
# The linter (ruff: pyflakes, bugbear; configured in pyproject.toml), from the test venv.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/env.sh" test,torch,mindspore,transformers,report,tensorboard,msprobe
venv=${WORKBENCH_VENV:-$root/.venv}
cd "$root"
exec "$venv/bin/ruff" check workbench tests benchmarks scripts hatch_build.py "$@"
