#!/usr/bin/env bash
# Step 4: score every parameter candidate with the environment's scoring.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.score --recipe "${RECIPE:-release}" --task_split "${SPLIT:-train}" \
  --candidates_file "${CANDIDATES:-PUMA/output/param_candidates_train.json}" \
  --output_file "${OUTPUT:-PUMA/output/param_candidates_train_scores.json}" ${DATA_DIR:+--data_dir "$DATA_DIR"} "$@"
