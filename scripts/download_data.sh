#!/usr/bin/env bash
# Fetch the official PersonalWAB data files and verify them.
# Arguments go to `python -m PersonalWAB.data download`, e.g.
#   bash scripts/download_data.sh --with_artifacts
#   bash scripts/download_data.sh --verify_only
#   bash scripts/download_data.sh --with_protocol    # also the release protocol pack (the release's texts)
#   bash scripts/download_data.sh --protocol_only    # only the pack
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -x "$ROOT/.venv/bin/python" ]]; then
    PYTHON="$ROOT/.venv/bin/python"
else
    PYTHON="$(command -v python || command -v python3)"
fi
# No `cd`: a relative --out stays relative to where the script was called from.
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m PersonalWAB.data download "$@"
