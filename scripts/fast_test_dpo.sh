#!/usr/bin/env bash
# Step 4 (the release's `test.py --evaluate_dpo True`): score every parameter candidate of the train split.
#   RECIPE=release (default): every candidate sent as the parameter, reviews scored by the raw MiniLM cosine
#     ("" for an empty one), a repeated instruction scored against its last task, as the release.
#   RECIPE=improved: candidates read as the improved agent reads them, reviews scored as the environment does.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.score --recipe "${RECIPE:-release}" --task_split "${SPLIT:-train}" \
  --candidates_file "${CANDIDATES:-PUMA/output/param_candidates_train.json}" \
  --out "${OUTPUT:-PUMA/output/param_candidates_train_scores.json}" ${DATA_DIR:+--data_dir "$DATA_DIR"} "$@"
