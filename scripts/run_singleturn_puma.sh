#!/usr/bin/env bash
# Step 7 (live): the puma agent generating function and parameters with MODEL_PATH (merged model or LoRA
# folder), on the GPU when there is one. RECIPE=release reads the model as the release's agent does
# (its evaluation prompt, memory of 10); RECIPE=improved with the training prompt and memory of 100.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
RECIPE="${RECIPE:-release}"
memory=10
[ "$RECIPE" = improved ] && memory=100
exec "$PY" run.py --agent_strategy puma --recipe "$RECIPE" --task_split "${SPLIT:-test}" --max_steps -1 \
  --puma_generate --puma_model_path "${MODEL_PATH:-PUMA/output/dpo}" --agent_memory taskspe \
  --mem_token_length "${MEM_TOKEN_LENGTH:-768}" --memory_length "${MEMORY_LENGTH:-$memory}" \
  ${DATA_DIR:+--data_dir "$DATA_DIR"} "$@"
