#!/usr/bin/env bash
# Set up the environment and run the test suite: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install_browser.sh   # Debian's chromium, for the HTML report's browser test
exec .venv/bin/python -m pytest -q "$@"
