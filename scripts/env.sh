#!/usr/bin/env bash
# Create (or bring up to date) the project's virtual environment with the pinned versions.
#   scripts/env.sh [EXTRAS]      e.g. scripts/env.sh test,torch
# The venv is .venv (override with WORKBENCH_VENV); a stamp per extras set skips the install
# when constraints.txt, pyproject.toml and the native sources have not changed (the install compiles
# workbench/native/*.c through hatch_build.py).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
extras=${1:-}
venv=${WORKBENCH_VENV:-$root/.venv}
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  echo "creating $venv" >&2
  "$python" -m venv "$venv"
fi
stamp="$venv/.workbench-${extras:-core}.stamp"
shopt -s nullglob; native=("$root"/workbench/native/*.[ch]); shopt -u nullglob
want=$(cat "$root/constraints.txt" "$root/pyproject.toml" "${native[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "installing workbench${extras:+[$extras]} into $venv (pinned by constraints.txt)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -c "$root/constraints.txt" -e "$root${extras:+[$extras]}"
  echo "$want" > "$stamp"
fi
