#!/usr/bin/env bash
# Build the BM25 search indexes (Lucene through Pyserini/Anserini, and bm25s) of a data directory.
#
#   bash scripts/tools/build_search_index.sh [--data_dir DIR] [--backend lucene|bm25s|all] \
#       [--threads 2] [--out PATH]
#
# Without --data_dir: the official data in PersonalWAB/envs/pwab/data when it has been placed,
# otherwise data/synthetic/small. Arguments go unchanged to
# `python -m PersonalWAB.engines.search.build`.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python_bin="$repo_root/.venv/bin/python"
if [[ ! -x "$python_bin" ]]; then
    python_bin=python
fi
export PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}"
exec "$python_bin" -m PersonalWAB.engines.search.build "$@"
