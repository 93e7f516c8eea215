#!/usr/bin/env bash
# Build a PersonalWAB offline, end to end: the synthetic generator's world as Amazon Reviews 2023
# raw files (300 users, five categories) -> `python -m PersonalWAB.construct build` with the
# scripted model server standing in for the LLM -> OUT/data, which is validated and evaluated
# with the offline heuristic agent on both tracks. Then the build is run again on the same OUT
# (nothing to do), once more with --force (every step again, every model answer from the cache:
# 0 new calls, identical files), and the consistency evaluation and statistics run on OUT/data.
# The data is synthetic: its numbers mean nothing for the paper. Run again on the same OUT it
# exits 0 too and makes no model call (every answer is in OUT's cache).
#   bash scripts/construct_smoke.sh [OUT]        # default data/construct_smoke
# SMOKE_SCALE and SMOKE_USERS (default medium and 200) make a smaller world for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
W="${1:-data/construct_smoke}"
export TQDM_DISABLE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore
start=$(date +%s)
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }
RAW="$W/raw" D="$W/data" R="$W/results"
mkdir -p "$W" "$R"

step "0. the synthetic world as Amazon Reviews 2023 raw files"
SCALE="${SMOKE_SCALE:-medium}" USERS="${SMOKE_USERS:-200}"
[ -f "$RAW/synthetic_manifest.json" ] || "$PY" -m PersonalWAB.data synthetic --layout raw --scale "$SCALE" --seed 0 --out "$RAW"

step "1. the scripted model server"
rm -f "$W/server_url"
"$PY" -m devtools.doubles serve --responder devtools.doubles.construct_responder:respond \
  --url_file "$W/server_url" --max_lifetime_s 1800 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 120); do [ -s "$W/server_url" ] && break; sleep 0.5; done
URL=$(cat "$W/server_url")
ARGS=(--raw_dir "$RAW" --out "$W" --num_users "$USERS" --min_interactions 10 --max_interactions 200 --seed 0
      --sasrec_extra_users $(( USERS / 2 )) --sasrec_epochs 5 --sasrec_threads 2 --max_concurrency 4)

step "2. cost estimate before a paid run (gpt-4o-mini prices; no model is called)"
"$PY" -m PersonalWAB.construct build "${ARGS[@]}" --model gpt-4o-mini --dry_run

step "3. the build, with the scripted model"
"$PY" -m PersonalWAB.construct build "${ARGS[@]}" --model scripted --api_base "$URL"
"$PY" -m PersonalWAB.data validate --data_dir "$D"

step "4. the heuristic agent on both tracks"
"$PY" run.py --data_dir "$D" --agent_strategy heuristic --agent_memory last --out "$R/singleturn.json" \
  --overwrite   # (a second smoke on the same OUT evaluates again)
"$PY" run.py --data_dir "$D" --agent_strategy heuristic --agent_memory last --max_steps 5 --user_mode offline \
  --end_index 12 --out "$R/multiturn.json" --overwrite

step "5. again on the same OUT: nothing to do; then --force: every step again from the cache"
files=(all_products_part_1.json all_products_part_2.json user_history_part_1.json user_history_part_2.json
       user_instructions.json user_profiles.json recommender/1000_ids.json recommender/pwab.pth)
first=$(cd "$D" && sha256sum "${files[@]}")
"$PY" -m PersonalWAB.construct build "${ARGS[@]}" --model scripted --api_base "$URL"
"$PY" -m PersonalWAB.construct build "${ARGS[@]}" --model scripted --api_base "$URL" --force
echo "$first" | (cd "$D" && sha256sum --quiet -c -)
"$PY" - "$D/construction_manifest.json" <<'PYCHECK'
import json, sys
m = json.load(open(sys.argv[1]))
behind = sum(step["requests"] for step in m["llm_steps"].values())
assert m["llm_calls"] == 0, f"the forced re-run made {m['llm_calls']} model calls"
assert m["llm_calls_cached"] == behind > 0, (m["llm_calls_cached"], behind)
print(f"forced re-run: {m['llm_calls']} model calls, {m['llm_calls_cached']} answers from the cache; "
      "data files identical to the first build")
PYCHECK

step "6. profile consistency and statistics of OUT/data"
"$PY" -m PersonalWAB.construct consistency --data_dir "$D" --model scripted --api_base "$URL" --out "$R/consistency.json"
"$PY" -m PersonalWAB.construct stats --data_dir "$D" --label built --out "$R/stats.json" --plot "$R/stats.png" >/dev/null
step "done: $D ($(du -sh "$D" | cut -f1)); results in $R"
