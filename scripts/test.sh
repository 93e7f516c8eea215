#!/usr/bin/env bash
# Set up the environment and run the test suite on every core: bash scripts/test.sh [pytest args]
# (pytest-xdist, one worker per core; each worker builds the tests' tiny data and engines once).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Debian's chromium, for the HTML report's browser test; installing it needs root (or sudo without
# a password): without either, or without apt access, that one test is skipped and the rest run.
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  :
elif [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; then
  echo "test.sh: installing Debian's chromium (apt-get, as root) for the report's browser test;" \
       "without it that one test is skipped"
  bash scripts/install_browser.sh ||
    echo "test.sh: chromium could not be installed; the browser test will be skipped" >&2
else
  echo "test.sh: chromium is not installed and installing it needs root (sudo bash scripts/install_browser.sh);" \
       "the browser test will be skipped" >&2
fi
# -rs: why each skipped test was skipped; --dist loadfile: a file's tests share one worker (and its
# module fixtures)
exec .venv/bin/python -m pytest -q -rs -n auto --dist loadfile "$@"
