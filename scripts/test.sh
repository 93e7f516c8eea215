#!/usr/bin/env bash
# Set up the environment and run the test suite: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Debian's chromium, for the HTML report's browser test; installing it needs root (or sudo without
# a password): without either, or without apt access, that one test is skipped and the rest run.
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  :
elif [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; then
  bash scripts/install_browser.sh ||
    echo "test.sh: chromium could not be installed; the browser test will be skipped" >&2
else
  echo "test.sh: chromium is not installed and installing it needs root (sudo bash scripts/install_browser.sh);" \
       "the browser test will be skipped" >&2
fi
exec .venv/bin/python -m pytest -q "$@"
