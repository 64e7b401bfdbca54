#!/usr/bin/env bash
# The main job: the whole alignment method on CPU with the reference models (`workbench demo`): writes
# the configs, weights, batches, runs, dumps and report.html into ./workbench-demo (or --out DIR).
# Creates .venv on first use. Extra arguments go to `workbench demo` (e.g. --fault norm_epsilon).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/env.sh" torch,mindspore,msprobe,report   # the reference models, msprobe, the HTML report
venv=${WORKBENCH_VENV:-$root/.venv}
exec "$venv/bin/workbench" demo "$@"
