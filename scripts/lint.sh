#!/usr/bin/env bash
# Static checks, configured in pyproject.toml: ruff (pycodestyle, pyflakes, bugbear, pyupgrade, simplify)
# over the repository, then mypy over the PersonalWAB and PUMA packages. bash scripts/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/mypy
