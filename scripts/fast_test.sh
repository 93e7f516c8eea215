#!/usr/bin/env bash
# Step 7 (files): evaluate pre-generated function/param files with the puma agent; prints the per-type table.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" run.py --agent_strategy puma --puma_recipe "${RECIPE:-release}" --task_split "${SPLIT:-test}" --max_steps -1 \
  --puma_function_file "${FUNCTION_FILE:-PUMA/output/function_test.json}" --puma_param_file "${PARAM_FILE:-PUMA/output/param_test.json}" \
  ${DATA_DIR:+--data_dir "$DATA_DIR"} "$@"
