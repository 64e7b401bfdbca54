#!/usr/bin/env bash
# The demo tier: every fault of datasets/demo_faults.yaml through `workbench demo --fault NAME`
# (tests/demo_tier; a minute or more per fault on 2 cores). Uses the test venv (.venv, scripts/test.sh's).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/env.sh" test,torch,mindspore,transformers,report,tensorboard,msprobe
venv=${WORKBENCH_VENV:-$root/.venv}
cd "$root"
WORKBENCH_DEMO_TIER=1 exec "$venv/bin/python" -m pytest tests/demo_tier -p no:cacheprovider "$@"
