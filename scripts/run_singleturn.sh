#!/usr/bin/env bash
# Single-turn track with the paper's configuration: function calling with gpt-4o-mini,
# last-behaviour memory of length 50. Settings come from the environment, extra flags go to run.py:
#   MODEL=anthropic/claude-3-5-haiku-latest bash scripts/run_singleturn.sh
#   MODEL=openai/Qwen2.5-7B-Instruct API_BASE=http://localhost:8000/v1 bash scripts/run_singleturn.sh
#   STRATEGY=heuristic MEMORY=none bash scripts/run_singleturn.sh        # offline, no key
# Keys: `source scripts/set_api_key.sh` (reads the environment or a git-ignored .env).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
args=(--env pwab --user_mode no --max_steps -1
      --agent_strategy "${STRATEGY:=function_calling}"
      --agent_memory "${MEMORY:-last}" --memory_length "${MEMORY_LENGTH:-50}" --task_split "${SPLIT:-test}"
      --temperature "${TEMPERATURE:-0.0}" --max_concurrency "${CONCURRENCY:-8}")
[ "$STRATEGY" != heuristic ] && args+=(--model "${MODEL:-gpt-4o-mini}")
[ -n "${API_BASE:-}" ] && args+=(--api_base "$API_BASE")
[ -n "${DATA_DIR:-}" ] && args+=(--data_dir "$DATA_DIR")
exec "$PY" run.py "${args[@]}" "$@"
