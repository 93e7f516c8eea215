#!/usr/bin/env bash
# Offline quick start: set up, generate the small synthetic PersonalWAB, build its
# search index and recommender, and evaluate the offline heuristic agent
# (single-turn, last-behaviour memory) on its test split.
# Extra arguments go to run.py, e.g. `bash scripts/quickstart.sh --agent_memory none`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
DATA_DIR=${DATA_DIR:-data/synthetic/small}
if [ ! -f "$DATA_DIR/user_instructions.json" ]; then
  .venv/bin/python -m PersonalWAB.data synthetic --scale small --seed 0 --out "$DATA_DIR"
fi
exec .venv/bin/python run.py --data_dir "$DATA_DIR" --agent_strategy heuristic --agent_memory last \
  --memory_length 50 --max_concurrency 4 "$@"
