#!/usr/bin/env bash
# Step 7 (live): the puma agent generating function and parameters with MODEL_PATH (merged model or LoRA folder).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" run.py --agent_strategy puma --task_split "${SPLIT:-test}" --max_steps -1 --puma_generate \
  --puma_model_path "${MODEL_PATH:-PUMA/output/dpo}" --mem_token_length "${MEM_TOKEN_LENGTH:-768}" \
  --memory_length "${MEMORY_LENGTH:-50}" ${DATA_DIR:+--data_dir "$DATA_DIR"} "$@"
