#!/usr/bin/env bash
# The MindFormers tier: the project's reference model and a Hugging Face model against REAL
# MindFormers 2.1.0 (legacy LlamaForCausalLM, CPU). See docs/mindformers-tier.md.
#   scripts/test-mindformers.sh [PYTEST ARGS]      e.g. scripts/test-mindformers.sh -q
# Its own venv, .venv-mindformers (override with MINDFORMERS_VENV): the project with the test,
# torch, mindspore and transformers extras (scripts/env.sh), then mindformers==2.1.0 --no-deps and
# exactly the modules it needs on CPU, every one pinned in constraints.txt. A stamp skips the
# install when constraints.txt, pyproject.toml and the list below have not changed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${MINDFORMERS_VENV:-$root/.venv-mindformers}

# mindformers and what `import mindformers` + the legacy Llama need (versions: constraints.txt).
# Installed with --no-deps: mindformers 2.1.0 asks for mindspore~=2.11, hyper-parallel (not on
# PyPI; only its PyNative Qwen3/DeepSeek-V4 need it) and a numpy-2-only pyarrow.
deps=(mindformers certifi charset-normalizer datasets Deprecated jieba mindpet multiprocess pyarrow
      requests rouge-chinese sentencepiece tensorboardX tiktoken urllib3 wrapt xxhash)

WORKBENCH_VENV="$venv" "$root/scripts/env.sh" test,torch,mindspore,transformers

stamp="$venv/.workbench-mindformers-tier.stamp"
want=$( (cat "$root/constraints.txt" "$root/pyproject.toml"; printf '%s\n' "${deps[@]}") | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  for dep in "${deps[@]}"; do  # never install anything unpinned
    if ! grep -qiE "^${dep//[-_]/[-_]}==" "$root/constraints.txt"; then
      echo "scripts/test-mindformers.sh: $dep is not pinned in constraints.txt; add NAME==VERSION there" >&2
      exit 2
    fi
  done
  echo "installing mindformers==2.1.0 (--no-deps) and its CPU deps into $venv (pinned by constraints.txt)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      -c "$root/constraints.txt" "${deps[@]}"
  echo "$want" > "$stamp"
fi

cd "$root"
status=0
"$venv/bin/python" -m pytest tests/mindformers_tier "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: treating as a failure" >&2
  exit 1
fi
exit "$status"
