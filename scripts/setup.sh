#!/usr/bin/env bash
# Create .venv and install the pinned requirements (skipped when already current).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -c1-64)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "setting up .venv (pinned requirements; ~2 minutes the first time)"
"$PYTHON" -m venv .venv
.venv/bin/pip install -q -r requirements.txt
echo "$want" > "$stamp"
