#!/usr/bin/env bash
# Step 5: chosen = first best-scoring candidate, rejected = last worst (RECIPE=improved: no tied pairs,
# and prompts that would not fit get a shorter memory, measured with MODEL_PATH's tokenizer).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.dpo_data --recipe "${RECIPE:-release}" --scores_file "${SCORES:-PUMA/output/param_candidates_train_scores.json}" \
  --param_data "${PUMA_DATA:-PUMA/data}/param_train.json" --out "${PUMA_DATA:-PUMA/data}/dpo_train.json" \
  --model_path "${MODEL_PATH:-PUMA/output/sft_merged}" "$@"
