#!/usr/bin/env bash
# The test suite. Creates .venv with the test extras on first use; arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/env.sh" test,torch,mindspore,transformers,report,tensorboard,msprobe
venv=${WORKBENCH_VENV:-$root/.venv}
cd "$root"
status=0
"$venv/bin/python" -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: treating as a failure" >&2
  exit 1
fi
exit "$status"
