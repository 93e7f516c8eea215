#!/usr/bin/env bash
# Step 7 (files): evaluate pre-generated function/param files; prints the per-type table.
#   RECIPE=release (default): `python -m PUMA.fast_test`, what the release's test.py computes: the first
#     function of each list, every candidate sent as the parameter, search/recommend = the last candidate
#     that found the target, review = the last candidate's raw cosine; per-task scores in $OUTPUT.
#   RECIPE=improved: `run.py --agent_strategy puma --recipe improved` reads the files as the improved
#     agent does (the first candidate, `Say:`/`stop` recognised) and scores with the environment; writes a
#     result file.
#   RUNNER=run.py with RECIPE=release: the release agent in run.py instead (the first candidate only).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
FUNCTION_FILE="${FUNCTION_FILE:-PUMA/output/function_test.json}"
PARAM_FILE="${PARAM_FILE:-PUMA/output/param_test.json}"
if [ "${RECIPE:-release}" = release ] && [ "${RUNNER:-}" != run.py ]; then
  exec "$PY" -m PUMA.fast_test --recipe release --task_split "${SPLIT:-test}" \
    --function_file "$FUNCTION_FILE" --param_file "$PARAM_FILE" \
    --out "${OUTPUT:-PUMA/output/fast_test_scores.json}" ${DATA_DIR:+--data_dir "$DATA_DIR"} "$@"
fi
exec "$PY" run.py --agent_strategy puma --recipe "${RECIPE:-release}" --task_split "${SPLIT:-test}" --max_steps -1 \
  --puma_function_file "$FUNCTION_FILE" --puma_param_file "$PARAM_FILE" \
  ${DATA_DIR:+--data_dir "$DATA_DIR"} "$@"
