#!/usr/bin/env bash
# Single-turn track. Settings come from the environment, extra flags go to run.py:
#   STRATEGY=heuristic MEMORY=last MEMORY_LENGTH=50 DATA_DIR=data/synthetic/small \
#   bash scripts/run_singleturn.sh --end_index 100
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
args=(--env pwab --user_mode no --max_steps -1
      --agent_strategy "${STRATEGY:-heuristic}" --agent_memory "${MEMORY:-last}"
      --memory_length "${MEMORY_LENGTH:-50}" --task_split "${SPLIT:-test}"
      --temperature "${TEMPERATURE:-0.0}" --max_concurrency "${CONCURRENCY:-4}")
[ -n "${MODEL:-}" ] && args+=(--model "$MODEL")
[ -n "${DATA_DIR:-}" ] && args+=(--data_dir "$DATA_DIR")
exec "$PY" run.py "${args[@]}" "$@"
