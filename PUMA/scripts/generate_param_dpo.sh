#!/usr/bin/env bash
# Step 3b: diverse parameter candidates per train instruction (10 beams with sampling at temperature 1.5,
# early stopping; bf16 and a batch size that fits on a GPU). Under RECIPE=release each prompt names the
# predicted function: run SPLIT=train PUMA/scripts/generate_function.sh first (FUNCTION_FILE moves it).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
NUM_CANDIDATES="${NUM_CANDIDATES:-10}"
exec "$PY" -m PUMA.generate --recipe "${RECIPE:-release}" --mode param --model_path "${MODEL_PATH:-PUMA/output/sft_merged}" \
  --data_file "${PUMA_DATA:-PUMA/data}/param_train.json" --out "${OUTPUT:-PUMA/output/param_candidates_train.json}" \
  --function_file "${FUNCTION_FILE:-PUMA/output/function_train.json}" \
  --num_beams "$NUM_CANDIDATES" --num_return_sequences "$NUM_CANDIDATES" --do_sample --temperature 1.5 --max_new_tokens 256 "$@"
