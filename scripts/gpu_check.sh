#!/usr/bin/env bash
# One-command GPU check of PUMA (SFT, DPO, HF/vLLM generation, MiniLM memory cache) at the Llama-2-7B shape:
#   bash scripts/gpu_check.sh OUT [flags of scripts/gpu_check.py]   -> OUT/gpu_check.json
# Without a GPU it runs the CPU dry run of the same code path at tiny size. See scripts/gpu_check.py.
set -euo pipefail
if [ $# -lt 1 ] || [ "${1:0:1}" = "-" ]; then
  echo "usage: bash scripts/gpu_check.sh OUT [flags of scripts/gpu_check.py, see --help]" >&2
  exit 2
fi
out=$(realpath -m "$1")
shift
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
PY="${PUMA_PYTHON:-$PY}"
exec "$PY" scripts/gpu_check.py "$out" "$@"
