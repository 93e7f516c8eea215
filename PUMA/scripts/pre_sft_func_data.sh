#!/usr/bin/env bash
# Step 1a: instruction -> function SFT data (train + test). Extra flags go to PUMA.data.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.data function --recipe "${RECIPE:-release}" --out "${PUMA_DATA:-PUMA/data}" \
  ${DATA_DIR:+--data_dir "$DATA_DIR"} "$@"
