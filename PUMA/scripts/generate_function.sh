#!/usr/bin/env bash
# Step 3a: function predictions with the (merged) SFT model (greedy, 32 tokens), for SPLIT=test (default)
# or SPLIT=train: under RECIPE=release the train split's predictions name the tool in step 3b's prompts.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
SPLIT="${SPLIT:-test}"
exec "$PY" -m PUMA.generate --recipe "${RECIPE:-release}" --mode function --model_path "${MODEL_PATH:-PUMA/output/sft_merged}" \
  --data_file "${PUMA_DATA:-PUMA/data}/function_${SPLIT}.json" --out "${OUTPUT:-PUMA/output/function_${SPLIT}.json}" "$@"
