#!/usr/bin/env bash
# Step 5: chosen = best-scoring candidate, rejected = worst.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.dpo_data --scores_file "${SCORES:-PUMA/output/param_candidates_train_scores.json}" \
  --param_data "${PUMA_DATA:-PUMA/data}/param_train.json" --output_file "${PUMA_DATA:-PUMA/data}/dpo_train.json" "$@"
