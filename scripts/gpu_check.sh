#!/usr/bin/env bash
# One-command GPU check of PUMA (SFT, DPO, HF/vLLM generation, MiniLM memory cache) at the Llama-2-7B shape:
#   bash scripts/gpu_check.sh OUT [flags of scripts/gpu_check.py]   -> OUT/gpu_check.json
# Without a GPU it runs the CPU dry run of the same code path at tiny size. See scripts/gpu_check.py.
# With a GPU it then runs PUMA's learning benchmark in its paper configuration (scripts/benchmark_puma_learning.py
# --full: both recipes, every stage, on SmolLM2-135M; about an hour) -> OUT/puma_learning.json; LEARNING=0 skips it.
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
status=0
"$PY" scripts/gpu_check.py "$out" "$@" || status=$?
if [ "${LEARNING:-1}" = 1 ] && [ "$status" != 2 ] && "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
  echo "PUMA learning benchmark, paper configuration (--full) -> $out/puma_learning.json" >&2
  "$PY" scripts/benchmark_puma_learning.py --full --work_dir "$out/puma_learning" --out "$out/puma_learning.json" \
    --doc "" || status=$?
fi
exit "$status"
