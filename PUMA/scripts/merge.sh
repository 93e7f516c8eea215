#!/usr/bin/env bash
# Step 6a: merge the SFT LoRA (and the modules it saved whole) into its base.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.merge --recipe "${RECIPE:-release}" --adapter_path "${ADAPTER:-PUMA/output/sft}" \
  --out "${OUTPUT_DIR:-PUMA/output/sft_merged}" "$@"
