#!/usr/bin/env bash
# Step 1b: parameter SFT data (k = 100 relevant behaviours, memory cut to MEM_TOKEN_LENGTH tokens of
# MODEL_PATH's tokenizer). QUERY_MODEL (any litellm model string) writes the search labels; without it
# the offline fallback is used.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.data param --recipe "${RECIPE:-release}" --out "${PUMA_DATA:-PUMA/data}" \
  --model_path "${MODEL_PATH:-meta-llama/Llama-2-7b-chat-hf}" --mem_token_length "${MEM_TOKEN_LENGTH:-768}" \
  ${DATA_DIR:+--data_dir "$DATA_DIR"} ${QUERY_MODEL:+--query_model "$QUERY_MODEL"} ${API_BASE:+--api_base "$API_BASE"} "$@"
