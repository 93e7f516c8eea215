#!/usr/bin/env bash
# Step 3a: function predictions on the test split with the (merged) SFT model (greedy, 32 tokens).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.generate --recipe "${RECIPE:-release}" --mode function --model_path "${MODEL_PATH:-PUMA/output/sft_merged}" \
  --data_file "${PUMA_DATA:-PUMA/data}/function_test.json" --output_file "${OUTPUT:-PUMA/output/function_test.json}" "$@"
